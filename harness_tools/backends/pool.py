"""Several backends of one kind, one worker per device: a candidate leases one member for its whole evaluation.

A cuda member's worker is pinned to one GPU with ``CUDA_VISIBLE_DEVICES`` (it sees that GPU as device 0); cpu
members are separate workers on the same host. Members start in parallel. Only members of one device model are
kept (the first to start sets it), so every score a pool measures is comparable with every other. A member
whose worker cannot be started again (its GPU or node is gone) is taken out of the pool; the candidate it held
is the caller's to retry elsewhere (:meth:`BackendPool.lease` with ``avoid``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from harness_tools.backends.contract import DeviceInfo
from harness_tools.backends.protocols import ExecutionBackend
from harness_tools.errors import BackendError, BackendUnavailable
from harness_tools.run import cancellation
from harness_tools.run.worker import close_side_by_side

log = logging.getLogger("harness_tools.pool")

T = TypeVar("T")
Factory = Callable[[str | None], ExecutionBackend]  # pin (a CUDA_VISIBLE_DEVICES entry, or None) -> a started backend


@dataclass
class PoolMember:
    slot: int
    pin: str | None
    backend: ExecutionBackend
    busy: bool = False
    lost: str | None = None  # why it left the pool

    @property
    def info(self) -> DeviceInfo:
        return self.backend.device_info()


class BackendPool:
    """``pins``: one entry per member (a GPU's ``CUDA_VISIBLE_DEVICES`` value, or None for an unpinned worker)."""

    def __init__(self, factory: Factory, pins: list[str | None]):
        if not pins:
            raise BackendError("a backend pool needs at least one member")
        self._members = _start_members(factory, pins)
        self._changed = threading.Condition()
        self._exclusive = False

    # ---- what it is ------------------------------------------------------------------------------
    @property
    def members(self) -> list[PoolMember]:
        return list(self._members)

    @property
    def live(self) -> list[PoolMember]:
        return [m for m in self._members if m.lost is None]

    @property
    def size(self) -> int:
        return len(self.live)

    def device_info(self) -> DeviceInfo:
        """The device every member has (one model per pool); raises when no member is left."""
        live = self.live
        if not live:
            raise BackendUnavailable(self._all_lost())
        return live[0].info

    # ---- using it --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def lease(self, avoid: frozenset[int] = frozenset(), on_wait: Callable[[], None] | None = None
              ) -> Iterator[PoolMember]:
        """A free live member, waiting (cancellably) for one; ``avoid``: slots not to use while others live;
        ``on_wait``: called once, before waiting, when every member is busy."""
        member = self._wait(lambda: self._take(avoid), on_wait)
        try:
            yield member
        finally:
            self._release(member)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[PoolMember]:
        """The first free member while no other is in use (profilers and sanitizers pick their own GPU)."""
        self._wait(self._claim_exclusive)
        try:
            member = self._wait(lambda: self._take(frozenset(), as_exclusive=True))
        except BaseException:
            self._end_exclusive()
            raise
        try:
            yield member
        finally:
            self._release(member)
            self._end_exclusive()

    def mark_lost(self, member: PoolMember, reason: str) -> None:
        """Take a member out: its worker could not be started again."""
        with self._changed:
            if member.lost is None:
                member.lost = reason
                log.warning("backend pool: slot %d (%s) lost: %s", member.slot, member.pin or "unpinned", reason)
            self._changed.notify_all()
        with contextlib.suppress(Exception):
            member.backend.close()

    def close(self, wait: bool = True) -> None:
        """Close every member side by side; ``wait=False`` for a process about to end (:func:`close_side_by_side`)."""
        close_side_by_side([member.backend.close for member in self._members], wait)

    # ---- internals -------------------------------------------------------------------------------
    def _take(self, avoid: frozenset[int], as_exclusive: bool = False) -> PoolMember | None:
        live = self.live
        if not live:
            raise BackendUnavailable(self._all_lost())
        if (any(m.busy for m in live) if as_exclusive else self._exclusive):
            return None
        for member in [m for m in live if m.slot not in avoid] or live:
            if not member.busy:
                member.busy = True
                return member
        return None

    def _all_lost(self) -> str:
        return "every worker of the backend pool was lost: " + "; ".join(f"slot {m.slot}: {m.lost}" for m in self._members)

    def _claim_exclusive(self) -> bool | None:
        if self._exclusive:
            return None
        self._exclusive = True
        return True

    def _end_exclusive(self) -> None:
        with self._changed:
            self._exclusive = False
            self._changed.notify_all()

    def _release(self, member: PoolMember) -> None:
        with self._changed:
            member.busy = False
            self._changed.notify_all()

    def _wait(self, take: Callable[[], T | None], on_wait: Callable[[], None] | None = None) -> T:
        """What ``take`` gives, called under the pool's lock until it gives something; cancellable."""
        with self._changed:
            got = take()
            if got is None and on_wait is not None:
                on_wait()
            while got is None:
                self._changed.wait(cancellation.POLL_S)
                cancellation.checkpoint()
                got = take()
            return got


def _start_members(factory: Factory, pins: list[str | None]) -> list[PoolMember]:
    """Start every member at once; keep those that started and share the first one's device model."""
    with ThreadPoolExecutor(max_workers=len(pins), thread_name_prefix="cudaopt-pool-start") as starting:
        futures = [starting.submit(factory, pin) for pin in pins]
    members, errors = [], []
    for slot, (pin, future) in enumerate(zip(pins, futures)):
        try:
            members.append(PoolMember(slot=slot, pin=pin, backend=future.result()))
        except BackendError as exc:
            errors.append(f"{pin or f'worker {slot}'}: {exc}")
    if not members:
        raise BackendUnavailable("no worker of the backend pool started: " + "; ".join(errors))
    for error in errors:
        log.warning("backend pool: a worker did not start (%s)", error)
    if len(pins) > 1:
        for member in members:  # every record it measures says which worker did
            member.info.pool_slot = member.slot
    model = members[0].info.name
    kept = [m for m in members if m.info.name == model]
    for other in members:
        if other not in kept:
            log.warning("backend pool: left out %s (%s): scores are compared on one device model, %s",
                        other.pin, other.info.name, model)
            other.backend.close()
    return kept
