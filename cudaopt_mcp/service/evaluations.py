"""Evaluations of a candidate (evaluate, run, time, compare), as plain blocking functions over :class:`ServerState`
(no MCP here).

A step takes the run's lock to register and claim its candidate, and again to store what it measured and
update the run's best; compiling and running happen between, without it, on one worker of the pool
(``state.lease``), so several candidates of one run evaluate at once and nothing is lost. Bad
arguments and unknown ids raise (:class:`~cudaopt_mcp.errors.StepRefused`, :class:`~cudaopt_mcp.errors.RunError`,
:class:`~harness_tools.errors.HarnessError`); kernel failures are data in the returned models.

Candidate folder (see :mod:`cudaopt_mcp.service.runs`): ``candidate.json`` (meta + the candidate),
``kernel.cu``, ``compile.json``, ``compile.log``, then per step ``evaluation.json`` (evaluate),
``execution.json`` (run) or ``timing.json`` (time), and ``outputs/<case>/<buffer>.npy`` for the
latest step's cases whose outputs are kept (:mod:`cudaopt_mcp.service.kept_outputs`: failures within a budget,
the baseline's, the best's, and whatever ``run`` produced). ``.evaluating`` marks work in progress:
after a crash it stays, and the candidate reads as ``interrupted`` until it is evaluated again.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

from cudaopt_mcp.api import (
    CompareOutput,
    EvaluateOutput,
)
from cudaopt_mcp.errors import StepRefused
from cudaopt_mcp.service import views as S
from cudaopt_mcp.service.arguments import CandidateArgs, Role, TimingArgs
from cudaopt_mcp.service.best import Offer
from cudaopt_mcp.service.best import offer as offer_best
from cudaopt_mcp.service.cancelled import recorded_if_cancelled
from cudaopt_mcp.service.candidates import build_candidate, compile_stored, load_candidate, register_candidate
from cudaopt_mcp.service.early_stop import stop_bounds
from cudaopt_mcp.service.kept_outputs import forget_passed_outputs, keep_outputs
from cudaopt_mcp.service.pooled import evaluate_pooled
from cudaopt_mcp.service.progress import Progress, no_progress
from cudaopt_mcp.service.runs import RunStore, atomic_write
from cudaopt_mcp.service.state import ServerState
from harness_tools import Candidate, Task
from harness_tools.check.device_compare import DEVICE_COMPARE_MIN_BYTES, SEARCH_DEVICE_COMPARE_MIN_BYTES
from harness_tools.evaluation import (
    MIN_CASE_S,
    EvaluationConfig,
    EvaluationResult,
    check_memory,
    compile_budget,
)
from harness_tools.run.scratch import scratch_dir
from harness_tools.run.timing import TimingPlan

Step = Literal["evaluate", "run", "time"]
RECORD = {"evaluate": "evaluation.json", "run": "execution.json", "time": "timing.json"}
def execute_step(state: ServerState, step: Step, run_id: str, *, candidate_id: str | None = None,
                 candidate: CandidateArgs | None = None, note: str | None = None, timing: TimingArgs | None = None,
                 progress: Progress = no_progress) -> EvaluateOutput:
    """compile, then launch and check (and, for performance cases, time) the candidate's cases."""
    started = time.perf_counter()
    store = state.store
    candidate = candidate or CandidateArgs()
    timing = timing or TimingArgs()
    given = candidate.given()
    if candidate_id is not None and given:
        raise StepRefused(f"give either candidate_id or a new candidate ({', '.join(given)}), not both")
    progress(0, 4, f"waiting for run {run_id}")
    with store.locked(run_id):
        task = store.task(run_id)
        roles = timing.roles or (["performance"] if step == "time" else task.spec.default_roles(state.backend_name))
        # a case too big for this machine is refused before anything is registered, compiled, drawn or allocated
        check_memory(task, task.spec.cases_for(roles, state.backend_name), state.backend_name, state.device_info())
        if candidate_id is not None:
            cand = load_candidate(state, run_id, candidate_id)
        else:
            cand = build_candidate(task, candidate)
            candidate_id, _ = register_candidate(state, run_id, task, cand, note, candidate.tunables)
        bounds = stop_bounds(state, run_id, candidate_id) if step == "evaluate" else {}
    # compiling and running need no lock on the run: its other candidates evaluate meanwhile on other workers; one
    # candidate is worked on by one call at a time (its records are one set), the next waits here
    with state.claimed(run_id, candidate_id), recorded_if_cancelled(state, run_id, candidate_id, step):
            plan = None if step == "run" else _plan(state, step, run_id, candidate_id, timing)
            out = _execute(state, step, run_id, candidate_id, task, cand, roles, progress,
                           step_config(step, timing, plan, bounds))
    progress(4, 4, "done")
    out.elapsed_s = round(time.perf_counter() - started, 3)
    return out


def step_config(step: Step, timing: TimingArgs, plan: TimingPlan | None, bounds: dict[str, float]) -> EvaluationConfig:
    """A step's evaluation config before its roles, outputs folder and time left are known (``_execute`` adds them).
    A search step keeps only failures' outputs (service.kept_outputs): it compares small ones on the device too."""
    compare_from = SEARCH_DEVICE_COMPARE_MIN_BYTES if step == "evaluate" else DEVICE_COMPARE_MIN_BYTES
    return EvaluationConfig(seed=timing.seed, timeout_s=timing.timeout_s, roles=["validation"], timing=plan,
                            stop_timing_above_ms=bounds, device_compare_min_bytes=compare_from)


def _plan(state: ServerState, step: Step, run_id: str, candidate_id: str, timing: TimingArgs) -> TimingPlan:
    """The timing plan of a step: a search step's (evaluate) cut to the server's budget for a slow kernel, unless
    it re-measures the run's best (as the headless client's confirmation does), which times in full."""
    best = state.store.best(run_id)
    searching = step == "evaluate" and (best is None or best.candidate_id != candidate_id)
    return state.timing_plan(timing.warmup, timing.reps, state.config.search_budget_ms if searching else None)


def _execute(state: ServerState, step: Step, run_id: str, candidate_id: str, task: Task, cand: Candidate,
             roles: list[Role], progress: Progress, config: EvaluationConfig) -> EvaluateOutput:
    """The body of a step: compile and launch (no lock on the run), then, under its lock, store, update
    baseline and best, log."""
    store = state.store
    progress(1, 4, f"compiling {candidate_id}")
    started = time.perf_counter()  # the budget (timeout_s) covers the compile and every case, not waiting for locks
    compiled = compile_stored(state, run_id, candidate_id, cand, timeout_s=compile_budget(config.timeout_s))
    left = config.timeout_s - (time.perf_counter() - started)
    out = EvaluateOutput(run_id=run_id, candidate_id=candidate_id, step=step, correct=False, backend=state.backend_name,
                         roles=list(roles), compile=S.compile_brief(compiled), cases=[],
                         source_uri=S.artifact_uri(run_id, candidate_id, "kernel.cu"), elapsed_s=0.0)
    if not compiled.ok:
        out.failure = f"compile {compiled.status}: {S.first_error(compiled.log) or ''}"
        if left < MIN_CASE_S:
            out.failure += f" (the budget of {config.timeout_s:g} s, timeout_s, was spent compiling)"
        return out
    folder = store.candidate_dir(run_id, candidate_id)
    validated_before = _validated(task, folder)
    marker = folder / ".evaluating"
    marker.touch()
    try:
        with scratch_dir("cudaopt-mcp-") as scratch:
            n_cases = len(task.spec.cases_for(roles, state.backend_name))
            config = config.model_copy(update={"roles": list(roles), "outputs_dir": str(scratch),
                                               "timeout_s": max(left, MIN_CASE_S)})
            result = evaluate_pooled(
                state, task, cand, config,
                on_case=lambda done, total, case: progress(2 + done / max(total, 1), 4,
                                                           f"case {case.name}: {case.status} ({done}/{total})"),
                on_wait=lambda: progress(1.5, 4, f"queued: waiting for a {state.backend_name} worker (every one is "
                                                 "busy with another call)"),
                on_start=lambda: progress(2, 4, f"running {n_cases} {'/'.join(roles)} case(s) on {state.backend_name}"))
            progress(3, 4, "storing results")
            with store.locked(run_id):  # what the run's other calls read: its best, history and kept outputs
                return _store(state, step, run_id, candidate_id, task, cand, roles, config, result, scratch, out,
                              validated_before)
    finally:
        marker.unlink(missing_ok=True)


def _store(state: ServerState, step: Step, run_id: str, candidate_id: str, task: Task, cand: Candidate,
           roles: list[Role], config: EvaluationConfig, result: EvaluationResult, scratch: Path, out: EvaluateOutput,
           validated_before: bool) -> EvaluateOutput:
    """Keep the step's outputs and record, update baseline and best, log (under the run's lock)."""
    store = state.store
    folder = store.candidate_dir(run_id, candidate_id)
    # a scored search step's passed outputs are kept by the baseline and the best only: held back until that is known
    # (the best itself, evaluated again, keeps them as before)
    current = store.best(run_id)
    baseline = _is_baseline(store, run_id, candidate_id)
    held = (step == "evaluate" and result.score_ms is not None and not baseline
            and (current is None or current.candidate_id != candidate_id))
    scratch_outputs = {c.name: dict(c.run.outputs) for c in result.cases if held and c.passed and c.run is not None}
    kept = keep_outputs(result, scratch, folder, store.run_dir(run_id), passed=not held)
    if step == "run":
        _strip_timing(result)
    atomic_write(folder / RECORD[step], result.model_dump_json(indent=2))
    _fill(out, result, kept, run_id, candidate_id, step, with_timing=step != "run")
    validated = validated_before or ("validation" in roles and result.correct)
    previous_best = current
    _update_scores(state, run_id, candidate_id, task, cand, result, config, out, validated)
    if held and out.new_best:  # now the best: its passed outputs are copied (the scratch folder is still there)
        for case in result.cases:
            if case.run is not None and case.name in scratch_outputs:
                case.run.outputs = scratch_outputs[case.name]
        out.outputs_kept = keep_outputs(result, scratch, folder, store.run_dir(run_id))
        atomic_write(folder / RECORD[step], result.model_dump_json(indent=2))
    if step == "evaluate" and out.score_ms is not None:  # a scored search step; run, time and validation-only
        # evaluations keep what they made (they are how a client looks at outputs)
        _trim_outputs(state, run_id, candidate_id, baseline, out, previous_best.candidate_id if previous_best else None)
    store.append_history(run_id, {"event": step, "candidate_id": candidate_id, "correct": result.correct,
                                  "score_ms": result.score_ms, "roles": list(roles), "seed": result.seed,
                                  **({"failure": result.failure[:200]} if result.failure else {}),
                                  **({"new_best": True} if out.new_best else {})})
    return out


def _trim_outputs(state: ServerState, run_id: str, candidate_id: str, baseline: bool, out: EvaluateOutput,
                  previous_best: str | None) -> None:
    """Passed outputs stay with the baseline and the best only (service.kept_outputs)."""
    store = state.store
    best = store.best(run_id)
    if out.new_best and previous_best and previous_best != candidate_id and not _is_baseline(store, run_id, previous_best):
        forget_passed_outputs(store.candidate_dir(run_id, previous_best))
    if not baseline and (best is None or best.candidate_id != candidate_id):
        out.outputs_kept = forget_passed_outputs(store.candidate_dir(run_id, candidate_id))


def _is_baseline(store: RunStore, run_id: str, candidate_id: str) -> bool:
    return bool((store.read_json(run_id, candidate_id, "candidate.json") or {}).get("baseline"))


def _fill(out: EvaluateOutput, result: EvaluationResult, kept: list[str], run_id: str, candidate_id: str,
          step: Step, with_timing: bool) -> None:
    out.correct, out.failure, out.seed, out.score_ms = result.correct, result.failure, result.seed, result.score_ms
    out.hints = list(result.hints) or None
    out.cases = [S.case_outcome(c, with_timing) for c in result.cases]
    out.clock = next((c.timing.clock for c in result.cases if c.timing), None) if with_timing else None
    out.outputs_kept = kept
    out.record_uri = S.artifact_uri(run_id, candidate_id, RECORD[step])


def _update_scores(state: ServerState, run_id: str, candidate_id: str, task: Task, cand: Candidate,
                   result: EvaluationResult, config: EvaluationConfig, out: EvaluateOutput, validated: bool) -> None:
    """Baseline and best move only on a scored, fully validated result from the run's own backend (the best's
    rules: :mod:`cudaopt_mcp.service.best`)."""
    store = state.store
    run = store.run(run_id)
    best = store.best(run_id)
    baseline = S.baseline_score(store, run_id)
    out.best_before_ms = best.score_ms if best else None
    score = result.score_ms
    out.score_ci_ms = [result.score_ci.low_ms, result.score_ci.high_ms] if result.score_ci else None
    if score is not None and result.correct and validated and result.backend == run.backend:
        offered = Offer(candidate_id=candidate_id, result=result, config=config)
        meta = store.read_json(run_id, candidate_id, "candidate.json") or {}
        if meta.get("baseline"):
            atomic_write(store.run_file(run_id, "baseline.json"), offered.record().model_dump_json(indent=2, exclude_none=True))
            baseline = score
        offer_best(state, run_id, task, cand, offered, out)
    elif score is not None and not validated:
        out.best_decision = "not a candidate for best: it has not passed its validation cases (run or evaluate them)"
    out.baseline_score_ms = baseline
    if score:
        out.speedup_vs_baseline = round(baseline / score, 4) if baseline else None
        out.speedup_vs_best = round(best.score_ms / score, 4) if best else None
    now = store.best(run_id)
    out.best_score_ms = now.score_ms if now is not None else None
    if out.new_best and now is not None and now.baseline_score_ms:  # like with like: both timed in the head-to-head
        out.speedup_vs_baseline = round(now.baseline_score_ms / now.score_ms, 4)


def _validated(task: Task, folder: Path) -> bool:
    """Whether a stored evaluate/run record of this candidate passed every validation case of its backend."""
    for name in ("evaluation.json", "execution.json"):
        record = S.read_json_file(folder / name)
        if record:
            names = {c.name for c in task.spec.cases_for(["validation"], record.get("backend") or "cuda")}
            passed = {c["name"] for c in record.get("cases", []) if c.get("role") == "validation" and c.get("passed")}
            if names and names <= passed:
                return True
    return False


def _strip_timing(result: EvaluationResult) -> None:
    """``run`` launches performance cases once, without a timing plan worth the name: drop its numbers."""
    result.score_ms = None
    for case in result.cases:
        case.timing = None
        case.median_ms = case.tflops = case.gbps = None
        if case.run is not None:
            case.run.timing = None


def compare_step(state: ServerState, run_id: str, candidate_id: str) -> CompareOutput:
    folder = state.store.candidate_dir(run_id, candidate_id)
    latest = S.latest_record(folder)
    if latest is None:
        raise StepRefused(f"candidate {candidate_id} has no stored outputs yet: call run or evaluate first")
    name, record = latest
    result = EvaluationResult.model_validate(record)
    return CompareOutput(run_id=run_id, candidate_id=candidate_id, source_record=name, seed=result.seed,
                         correct=result.correct, cases=[S.case_outcome(c, with_timing=False) for c in result.cases],
                         record_uri=S.artifact_uri(run_id, candidate_id, name))
