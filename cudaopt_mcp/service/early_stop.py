"""Stopping a candidate's timing early once it is clearly slower than the run's best (issue 17).

Most candidates of a search are slower than the best, many by far, and timing them with the full plan is most
of a configuration's cost on a slow kernel (a 5 ms matmul: 33 flushed launches). An ``evaluate`` of any
candidate but the best therefore gives each performance case a bound: the best's median there (its stored
evaluation, same backend) plus ``ServerConfig.stop_margin``. The backend looks at the samples every few
launches and stops once the median's 95 % interval lies wholly above the bound (:mod:`harness_tools.run.timing`).

Such a candidate cannot become the best on that evidence (its score's interval lies above the best's), and its
median, from fewer samples, is an honest one, recorded with how many launches were planned. What always times
in full: the first evaluation, re-measurements of the best, head-to-heads, and the ``time`` step.
"""

from __future__ import annotations

from cudaopt_mcp.service.state import ServerState


def stop_bounds(state: ServerState, run_id: str, candidate_id: str) -> dict[str, float]:
    """Per performance case: the median (ms) above which ``candidate_id``'s timing stops early; empty when none
    applies (no best yet, the candidate is the best, another backend's best, or early stops turned off)."""
    margin = state.config.stop_margin
    best = state.store.best(run_id)
    if margin is None or best is None or best.candidate_id == candidate_id or best.backend != state.backend_name:
        return {}
    record = state.store.read_json(run_id, best.candidate_id, "evaluation.json") or {}
    if record.get("backend") != state.backend_name:
        return {}
    return {case["name"]: case["median_ms"] * (1.0 + margin) for case in record.get("cases", [])
            if case.get("role") == "performance" and case.get("passed") and case.get("median_ms")}
