"""The cpu backend's workers of recent candidates, kept stopped while another candidate runs.

A cpu worker runs one candidate's kernels (its threads must never see another's cases), so a head-to-head, which
times the best, the challenger and the baseline in turn (A B, B A, A B), started a fresh jailed interpreter for
almost every one of its 6-7 evaluations (about 0.3 s each on a 2-core host). Here the worker a candidate leaves is
kept under its owner, stopped (:meth:`~harness_tools.run.worker.Worker.freeze`: neither its request loop nor a
thread its kernel left runs, so it takes nothing from the launches timed meanwhile), and only its own owner takes it
back. At most :data:`KEPT` are kept; the least recently used one beyond them is killed. A worker that cannot be
stopped is closed instead of kept.
"""

from __future__ import annotations

from collections import OrderedDict

from harness_tools.run.worker import Worker

KEPT = 3  # a head-to-head's other two contenders (best and baseline) and one more


class ParkedWorkers:
    """Stopped workers by owner, least recently parked first."""

    def __init__(self, kept: int = KEPT):
        self._kept = kept
        self._workers: OrderedDict[str, Worker] = OrderedDict()

    def park(self, owner: str, worker: Worker) -> None:
        """Keep ``worker`` (alive, between requests) for ``owner``, stopped; or close it when it cannot be stopped."""
        if owner in self._workers:  # never two for one owner: the older one goes
            self._workers.pop(owner).kill()
        if not worker.alive or not worker.freeze():
            worker.close()
            return
        self._workers[owner] = worker
        while len(self._workers) > self._kept:
            self._workers.popitem(last=False)[1].kill()  # SIGKILL ends a stopped process as any other

    def take(self, owner: str) -> Worker | None:
        """``owner``'s worker, running again, or None."""
        worker = self._workers.pop(owner, None)
        if worker is None:
            return None
        worker.thaw()
        if worker.alive:
            return worker
        worker.kill()
        return None

    def close(self) -> None:
        while self._workers:
            self._workers.popitem()[1].kill()
