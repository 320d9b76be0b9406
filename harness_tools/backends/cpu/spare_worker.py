"""The cpu backend's next worker, started while the loop chooses and builds the next candidate.

A cpu worker runs one kernel library only (a candidate is native code: what it left behind must not see the next
one's cases), so every new candidate costs a fresh jailed interpreter: 20 starts of about 0.3 s were 6.3 s of the
22 s ``cudaopt optimize sgemm`` on a 2-core host. After a timed case (the last of an evaluation), the backend starts
a spare here; the next library takes it, already up. The timing is wall clock on the same cores, so a spare never
starts beside timed launches: one still starting is stopped before a timed case on the current worker
(:meth:`SpareWorker.quiet`), and waited for when the case needs a new worker anyway (:meth:`SpareWorker.take`).
"""

from __future__ import annotations

import logging
import threading

from harness_tools.run.worker import Worker

log = logging.getLogger("harness_tools")
TAKE_WAIT_S = 10.0  # a spare still not up after this long is given up (a start takes 0.2-0.5 s): the caller starts
# its own rather than wait out the start's own limit (once, on a loaded 2-core host, a spare's start hung 180 s)


class SpareWorker:
    """At most one worker started ahead, like ``template`` (its executor, device and jail)."""

    def __init__(self, template: Worker):
        self._template = template
        self._lock = threading.Lock()
        self._worker: Worker | None = None
        self._starting: threading.Thread | None = None
        self._closed = False

    def start(self) -> None:
        """Start one in the background, unless one is there or on its way (or this was closed)."""
        with self._lock:
            if self._worker is not None or self._closed:
                return
            worker = self._worker = Worker(self._template.executor, self._template.device, self._template.spec)
            self._starting = threading.Thread(target=self._start, args=(worker,), name="cudaopt-spare-worker",
                                              daemon=True)
            self._starting.start()

    def quiet(self) -> None:
        """Before timed launches on the current worker: a spare still starting is stopped, not waited for (a task
        with several performance cases times them one after the other; the last one's end starts it again). Such a
        spare's jail is often not spawned yet: it is stopped there too (it was waited for until up, 0.2 s of every
        evaluation of a two-case task on a 2-core host: benchmarks/spare_between_timed_cases.py)."""
        with self._lock:
            worker, starting = self._worker, self._starting
        if worker is None or starting is None or not starting.is_alive():
            return
        worker.interrupt()  # its start fails at once, quietly: before its jail is spawned, or killed as it is
        ended = _join_or_end(worker, starting)
        with self._lock:
            if self._worker is worker and (not ended or not worker.alive):
                self._worker = self._starting = None

    def take(self) -> Worker | None:
        """The spare, up, or None (none was started, it failed to start or is not up within TAKE_WAIT_S: the caller
        starts its own)."""
        with self._lock:
            worker, starting = self._worker, self._starting
        ended = starting is None or worker is None or _join_or_end(worker, starting)
        with self._lock:
            worker, self._worker, self._starting = self._worker, None, None
        return worker if ended and worker is not None and worker.alive else None

    def close(self) -> None:
        """Close the spare; one still starting closes itself once up (a command's end does not wait for it)."""
        with self._lock:
            self._closed = True
            worker, starting = self._worker, self._starting
            self._worker = self._starting = None
        if worker is not None and (starting is None or not starting.is_alive()):
            worker.close()

    def _start(self, worker: Worker) -> None:
        try:
            worker.start()
        except Exception as exc:  # noqa: BLE001 - a spare that cannot start is no error: the next case starts its own
            log.debug("a spare cpu worker did not start (%s); the next kernel starts its own", exc)
            worker.kill()
            return
        with self._lock:
            abandoned = self._closed or self._worker is not worker  # closed, or given up while it started
        if abandoned:
            worker.close()


def _join_or_end(worker: Worker, starting: threading.Thread) -> bool:
    """Wait for a spare's start, at most TAKE_WAIT_S; then end it (an interrupt that came before the process was
    spawned ended nothing: it is sent again) and wait as long again. Whether the start has ended: one that outlives
    its kill is left to its own limit, and its worker, once up, closes itself (:meth:`SpareWorker._start`)."""
    starting.join(TAKE_WAIT_S)
    if starting.is_alive():
        log.info("a spare cpu worker was not up after %.0f s: given up", TAKE_WAIT_S)
        worker.interrupt()
        starting.join(TAKE_WAIT_S)
    return not starting.is_alive()
