"""compile → validate → time: one candidate through the whole engine.

Validation cases only decide correctness; performance cases are checked too, and timed. The score
is the geometric mean of the performance cases' median latencies, and exists only when every case
passed. After a crash, a timeout or a sticky CUDA error the remaining cases are skipped (a hung
kernel would otherwise cost one timeout per case); after any failure, later cases are still checked but no longer timed.
With ``race_check`` on, every validation case that passed is run once more under the backend's race
check (the cpu backend's ThreadSanitizer run); a data race fails the case with status ``race``.

``timeout_s`` is the budget of the whole evaluation: the compile gets at most what is left of it (capped
by the compiler's own default), each case at most what is left after the cases before it, and once it
is spent the remaining cases are skipped with a message saying so. Before anything is compiled, every
case's memory is computed from the spec and a case that does not fit the device or this machine's
available host memory is refused (:class:`~harness_tools.errors.BackendError`, saying how much it needs
and how much there is).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

from harness_tools.backends import ExecutionBackend, RaceChecker
from harness_tools.backends.environment import Environment, read_clocks
from harness_tools.check.compare import keep_largest_maps
from harness_tools.check.failure_hints import hints_for
from harness_tools.check.inputs import SCHEME, fresh_seed
from harness_tools.check.memory_fit import check_memory  # also the service's, through this module
from harness_tools.compile import compile_candidate, nvrtc_version
from harness_tools.compile.case_variants import compile_variants
from harness_tools.compile.param_check import parameter_problem
from harness_tools.errors import BackendError, CandidateError
from harness_tools.evaluation.case_runner import MIN_CASE_S, CaseRunner, compile_budget, first_line
from harness_tools.evaluation.records import CaseResult, CaseStatus, EvaluationConfig, EvaluationResult, Overhead
from harness_tools.run import cancellation
from harness_tools.run.scratch import scratch_dir
from harness_tools.run.statistics import score_interval
from harness_tools.run.timing import geomean
from harness_tools.task.candidate import Candidate, for_case
from harness_tools.task.spec import Task

__all__ = ["MIN_CASE_S", "CaseResult", "CaseStatus", "EvaluationConfig", "EvaluationResult", "Overhead", "check_memory",
           "compile_budget", "evaluate"]


def evaluate(task: Task, candidate: Candidate, backend: ExecutionBackend,
             config: EvaluationConfig | None = None,
             on_case: Callable[[int, int, CaseResult], None] | None = None) -> EvaluationResult:
    """Compile, validate and time ``candidate``; ``on_case(done, total, case)`` reports progress."""
    config = config or EvaluationConfig()
    if config.race_check and not isinstance(backend, RaceChecker):
        raise BackendError(f"the {backend.name} backend has no race check yet (compute-sanitizer support comes "
                           "later); use the cpu backend for race checks")
    seed = config.seed if config.seed is not None else fresh_seed()
    started = time.perf_counter()
    deadline = started + config.timeout_s
    overhead = Overhead()
    device = backend.device_info()
    cases = task.spec.cases_for(config.roles, backend.name)
    check_memory(task, cases, backend.name, device)
    env = Environment(device=device, nvrtc_version=nvrtc_version())
    try:  # with per-case size_defines, this compile is the first case's; the others follow per case (cached)
        first = for_case(candidate, task, (cases[0] if cases else task.spec.cases[0]).sizes)
    except CandidateError as exc:
        first, clash = candidate, str(exc)
    else:
        clash = None
    compiled = compile_candidate(first, device.arch, timeout_s=compile_budget(deadline - time.perf_counter()))
    overhead.compile_ms = compiled.compile_ms if not compiled.cached else 0.0
    result = EvaluationResult(task=task.name, backend=backend.name, seed=seed, input_scheme=SCHEME,
                              candidate=candidate.digest(), compile=compiled, correct=False, environment=env,
                              overhead=overhead)
    mismatch = parameter_problem(task.spec, compiled, candidate) if compiled.ok else None
    if clash or not compiled.ok or mismatch:  # nothing runs; a kernel with the wrong parameters means nothing
        result.failure = (f"defines: {clash}" if clash else f"signature: {mismatch}" if mismatch
                          else f"compile {compiled.status}: " + first_line(compiled.log, "error"))
        if not compiled.ok and time.perf_counter() >= deadline:
            result.failure += f" (the evaluation's budget of {config.timeout_s:g} s, timeout_s, was spent compiling)"
        overhead.total_ms = (time.perf_counter() - started) * 1e3
        return result
    if task.spec.size_defines and len(cases) > 1:  # the other cases' compiles, side by side on the compiler pool
        variants_started = time.perf_counter()
        fresh = compile_variants(candidate, task, cases, device.arch, compile_budget(deadline - time.perf_counter()))
        if any(not r.cached for r in fresh):
            overhead.compile_ms += (time.perf_counter() - variants_started) * 1e3
    # the caller's folder is kept; a scratch folder is removed afterwards
    where = contextlib.nullcontext(Path(config.outputs_dir)) if config.outputs_dir else scratch_dir("cudaopt-")
    with where as scratch:
        env.clocks_before = read_clocks()
        runner = CaseRunner(task, backend, config, seed, scratch, overhead, compiled, device, deadline)
        for index, case in enumerate(cases):
            cancellation.checkpoint()  # a cancelled evaluation stops between cases too, not only in a launch
            result.cases.append(runner.run(case, candidate))
            if on_case is not None:
                on_case(index + 1, len(cases), result.cases[-1])
        env.clocks_after = read_clocks()
    keep_largest_maps([o for c in result.cases for o in c.outputs])
    result.correct = bool(result.cases) and all(c.passed for c in result.cases)
    failed = next((c for c in result.cases if not c.passed), None)
    if failed:
        result.failure = f"case {failed.name}: {failed.status}: {failed.message}"
        result.hints = hints_for(candidate, result.cases, cases)
    if not result.cases:
        result.failure = (f"no {'/'.join(config.roles)} case of task {task.name} runs on the {backend.name} backend "
                          f"(cases name their backends in task.json)")
    timed = [c.timing for c in result.cases if c.role == "performance"]
    if result.correct and timed and all(t is not None for t in timed):
        stats = [t for t in timed if t is not None]
        result.score_ms = geomean([t.median_ms for t in stats])
        if all(t.median_ci is not None for t in stats):
            result.score_ci = score_interval([t.median_ci for t in stats if t.median_ci is not None])
    overhead.total_ms = (time.perf_counter() - started) * 1e3
    return result
