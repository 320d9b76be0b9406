"""The seed of each hidden-shape check, chosen one check ahead so that its inputs and oracle are made meanwhile.

Every candidate about to become a run's best is checked on hidden shapes with inputs nobody has seen: a fresh seed
per check. Drawing those inputs and computing their oracle was a large part of a check's host time (for
vector_add on a 2-core host, 80-110 ms of a 230-390 ms check), on the critical path of every new best and of the
baseline's first evaluation. Now the next check's seed is chosen when one is taken, and its cases are made in a
thread (:func:`harness_tools.check.seed_ahead.draw_ahead`, with the device's form of the oracle for outputs that
are compared there); ``cudaopt optimize`` makes the first one while it starts. The seeds still come from the
operating system's randomness and are never told to a client: they are only chosen earlier. A check that comes
while its cases are being made waits for them rather than make them twice (the caches make a key once).
"""

from __future__ import annotations

import hashlib
import logging
import threading

from harness_tools import Task
from harness_tools.check.device_compare import SEARCH_DEVICE_COMPARE_MIN_BYTES
from harness_tools.check.hidden_shapes import HiddenShape, hidden_task
from harness_tools.check.inputs import fresh_seed
from harness_tools.check.seed_ahead import draw_ahead
from harness_tools.task.folder_digest import folder_digest

log = logging.getLogger("cudaopt.mcp")

# Hidden checks compare like a search step: from here on, outputs are compared on the device (a failing one is
# still downloaded as evidence), the oracle's device form being made ahead with the inputs.
HIDDEN_DEVICE_COMPARE_MIN_BYTES = SEARCH_DEVICE_COMPARE_MIN_BYTES


class HiddenSeeds:
    """The next hidden check's seed per task (its folder's content and spec), made ahead on a backend."""

    def __init__(self) -> None:
        self._next: dict[str, int] = {}
        self._guard = threading.Lock()
        self._closed = False  # the server is ending: a draw still under way may fail as its folders go

    def close(self) -> None:
        """The server closes: a check's cases still being made may fail from now on (their scratch folder is removed
        at exit) and say nothing, since no check will need them."""
        self._closed = True

    def take(self, task: Task, shapes: list[HiddenShape], backend: str) -> int:
        """The seed of a check of ``shapes`` now; the following check's seed is chosen and its cases made in a
        thread."""
        key = task_key(task)
        following = fresh_seed()
        with self._guard:
            seed = self._next.pop(key, None)
            self._next[key] = following
        threading.Thread(target=self._make, args=(task, shapes, following, backend), daemon=True,
                         name="cudaopt-hidden-ahead").start()
        return seed if seed is not None else fresh_seed()

    def chosen(self, task: Task) -> int:
        """The seed the next check of ``task`` will take, chosen now if it is not yet (a check made ahead uses it)."""
        with self._guard:
            return self._next.setdefault(task_key(task), fresh_seed())

    def prepare(self, task: Task, shapes: list[HiddenShape], backend: str) -> None:
        """Make the next check's cases here (a start-up's draw-ahead thread calls it), choosing its seed if it is not
        yet; cases made already, or being made, are not made twice (the caches make a key once)."""
        self._make(task, shapes, self.chosen(task), backend)

    def _make(self, task: Task, shapes: list[HiddenShape], seed: int, backend: str) -> None:
        if not shapes:
            return
        try:
            draw_ahead(hidden_task(task, shapes), [s.case for s in shapes], seed, backend,
                       device_compare_min_bytes=HIDDEN_DEVICE_COMPARE_MIN_BYTES)
        except Exception as exc:  # noqa: BLE001 - the check itself makes them again, and reports what fails
            if not self._closed:  # at the end of every `cudaopt -vv optimize`, this was a "No such file" line
                log.debug("the next hidden check's cases were not made ahead: %s", exc)


def task_key(task: Task) -> str:
    """A task as its hidden cases follow from it: its folder's content and its spec (a run's copy shares it)."""
    return f"{folder_digest(task.folder)}|{hashlib.sha256(task.spec.model_dump_json().encode()).hexdigest()}"
