"""Cancelling work in flight: a token the caller holds, and the processes of the work register on it.

Engine calls block in one thread; the caller (an MCP request that the client cancelled, a job the user
stops) is another. :func:`cancellable` makes a :class:`CancelToken` the current one for the calling thread
(a context variable, so nothing has to be passed through every layer); each child process the work starts
(:class:`~harness_tools.run.worker.Worker` calls, :func:`~harness_tools.run.jail.run`) registers how to kill
it with :func:`killable`. :meth:`CancelToken.cancel` kills them at once, so a kernel spinning on the GPU stops
within milliseconds instead of at its timeout, and the blocked call raises :class:`Cancelled`.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator

from harness_tools.errors import Cancelled

_current: contextvars.ContextVar[CancelToken | None] = contextvars.ContextVar("cudaopt_cancel_token", default=None)
POLL_S = 0.05  # how often a cancellable wait looks at its token


class CancelToken:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kills: dict[int, Callable[[], None]] = {}
        self._next = 0
        self.reason: str | None = None
        self.cancelled_at: float | None = None  # time.monotonic() of the cancel

    @property
    def cancelled(self) -> bool:
        return self.reason is not None

    def cancel(self, reason: str = "cancelled by the caller") -> None:
        """Mark the work cancelled and kill every process registered on it (idempotent)."""
        with self._lock:
            if self.reason is not None:
                return
            self.reason, self.cancelled_at = reason, time.monotonic()
            kills = list(self._kills.values())
        for kill in kills:
            kill()

    def check(self) -> None:
        if self.reason is not None:
            raise Cancelled(self.reason)

    @contextlib.contextmanager
    def registered(self, kill: Callable[[], None]) -> Iterator[None]:
        with self._lock:
            key, self._next = self._next, self._next + 1
            self._kills[key] = kill
            already = self.reason is not None
        if already:
            kill()
        try:
            yield
        finally:
            with self._lock:
                self._kills.pop(key, None)


def current() -> CancelToken | None:
    return _current.get()


@contextlib.contextmanager
def cancellable(token: CancelToken) -> Iterator[CancelToken]:
    """Make ``token`` the current thread's token for the duration (the work's processes register on it)."""
    reset = _current.set(token)
    try:
        yield token
    finally:
        _current.reset(reset)


@contextlib.contextmanager
def killable(kill: Callable[[], None]) -> Iterator[None]:
    """While inside, cancelling the current token (if any) calls ``kill``; outside any token, nothing."""
    token = _current.get()
    if token is None:
        yield
        return
    with token.registered(kill):
        yield


def checkpoint() -> None:
    """Raise :class:`Cancelled` if the current work was cancelled (call between steps)."""
    token = _current.get()
    if token is not None:
        token.check()


@contextlib.contextmanager
def acquired(lock: threading.Lock) -> Iterator[None]:
    """``with lock`` that gives up with :class:`Cancelled` when the current work is cancelled while waiting."""
    token = _current.get()
    if token is not None:
        token.check()
    while not lock.acquire(timeout=POLL_S):
        if token is not None:
            token.check()
    try:
        yield
    finally:
        lock.release()
