"""One candidate's evaluation on the server's pool: a free worker for the whole of it, retried once elsewhere.

A worker that died mid-evaluation (killed, out of memory, its GPU gone) says nothing about the candidate, so
the evaluation runs again, once, on another live worker; a worker whose process cannot be started again is
taken out of the pool (unless it is the last: the next call tries it again). A kernel that kills its worker
itself fails the same way on the second worker and is recorded as crashed then. With one worker nothing is
retried (there is no elsewhere).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from cudaopt_mcp.service.state import ServerState
from harness_tools.errors import BackendUnavailable
from harness_tools.evaluation import CaseResult, EvaluationConfig, EvaluationResult, evaluate
from harness_tools.task.candidate import Candidate
from harness_tools.task.spec import Task

log = logging.getLogger("cudaopt.mcp")

OnCase = Callable[[int, int, CaseResult], None]


def evaluate_pooled(state: ServerState, task: Task, candidate: Candidate, config: EvaluationConfig,
                    on_case: OnCase | None = None, on_wait: Callable[[], None] | None = None,
                    on_start: Callable[[], None] | None = None) -> EvaluationResult:
    """``on_wait``: called when every worker is busy, before waiting; ``on_start``: when one is leased (first try).
    An evaluation made ahead with the same key (:mod:`cudaopt_mcp.service.evaluations_ahead`) is taken instead."""
    made = state.ahead.take(task, candidate, config)
    if made is not None:
        if on_start is not None:
            on_start()
        for index, case in enumerate(made.cases):
            if on_case is not None:
                on_case(index + 1, len(made.cases), case)
        return made
    return evaluate_on_pool(state, task, candidate, config, on_case, on_wait, on_start)


def evaluate_on_pool(state: ServerState, task: Task, candidate: Candidate, config: EvaluationConfig,
                     on_case: OnCase | None = None, on_wait: Callable[[], None] | None = None,
                     on_start: Callable[[], None] | None = None) -> EvaluationResult:
    """:func:`evaluate_pooled` without looking for an evaluation made ahead (what makes one ahead)."""
    pool = state.pool()
    lost_on: set[int] = set()
    why: str | None = None
    while True:
        with state.lease(frozenset(lost_on), on_wait if why is None else None) as worker:
            if why is None and on_start is not None:
                on_start()
            try:
                result = evaluate(task, candidate, worker.backend, config, on_case=on_case)
            except BackendUnavailable as exc:  # its worker could not be started again: the GPU or host is gone
                if pool.size > 1:  # the last one stays: the next call tries to start it again
                    pool.mark_lost(worker, str(exc))
                result, died = None, f"worker {worker.slot} lost ({exc})"
            else:
                died = _worker_died(result)
                if died:
                    died = f"worker {worker.slot}: {died}"
        if not died or why is not None or not _elsewhere(state, lost_on | {worker.slot}):
            if result is None:
                raise BackendUnavailable(f"{died}; no other worker to evaluate on")
            result.retried = why
            return result
        lost_on.add(worker.slot)
        why = died
        log.warning("evaluating again on another worker: %s", died)


def _worker_died(result: EvaluationResult) -> str | None:
    for case in result.cases:
        if case.run is not None and case.run.error == "WORKER_DIED":
            return f"its process ended during case {case.name} ({case.run.message or 'no message'})"
    return None


def _elsewhere(state: ServerState, used: set[int]) -> bool:
    return any(m.slot not in used for m in state.pool().live)
