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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from harness_tools.backends import ExecutionBackend, RaceChecker
from harness_tools.backends.contract import ArgSpec, CaseRequest, CaseRun, DeviceInfo, RaceReport
from harness_tools.backends.environment import Environment, read_clocks
from harness_tools.check.case_request import case_arguments, case_inputs, case_request, placement_for, request_owner
from harness_tools.check.compare import OutputComparison, compare, keep_largest_maps, mismatch_message
from harness_tools.check.custom_check import custom_check_failure, judged_by_check
from harness_tools.check.device_compare import DEVICE_COMPARE_MIN_BYTES, Once, compared_on_device, device_checks_for, with_checks
from harness_tools.check.failure_hints import hints_for
from harness_tools.check.inputs import SCHEME, fresh_seed
from harness_tools.check.memory_fit import check_memory  # also the service's, through this module
from harness_tools.check.reference import expected_outputs
from harness_tools.check.same_inputs_rerun import rerun_differences
from harness_tools.check.worker_files import load_output, open_worker_file
from harness_tools.compile import CompileResult, compile_candidate, nvrtc_version
from harness_tools.compile.case_variants import compile_variants
from harness_tools.compile.param_check import parameter_problem
from harness_tools.errors import BackendError, CandidateError
from harness_tools.run import cancellation
from harness_tools.run.scratch import scratch_dir
from harness_tools.run.statistics import Interval, score_interval
from harness_tools.run.timing import TimingPlan, TimingStats, geomean
from harness_tools.task.candidate import Candidate, for_case
from harness_tools.task.checking_rules import mismatch_budget
from harness_tools.task.dtypes import as_dtype
from harness_tools.task.expressions import evaluate_expression
from harness_tools.task.spec import Case, Task

CaseStatus = Literal["passed", "mismatch", "run_error", "corrupted", "race", "skipped"]


class EvaluationConfig(BaseModel):
    seed: int | None = Field(None, ge=0, lt=1 << 64, description="input seed; None draws a fresh one (it is recorded)")
    timing: TimingPlan | None = Field(TimingPlan(), description="None: launch and check, never time")
    stop_timing_above_ms: dict[str, float] = Field(
        default_factory=dict, description="per performance case: stop timing it early once its median is clearly "
        "above this many ms (the plan's stop_above_ms), e.g. the run's best there plus a margin")
    roles: list[Literal["validation", "performance"]] = Field(["validation", "performance"], max_length=2)
    timeout_s: float = Field(120.0, gt=0, description="budget of the whole evaluation: the compile plus every case "
                                                      "(each gets what is left); cases after it is spent are skipped")
    outputs_dir: str | None = Field(None, description="keep kernel outputs here (else a scratch dir is removed)")
    race_check: bool = Field(False, description="run each passing validation case once more under the backend's "
                                                "race check; a data race fails the case (cpu backend only for now)")
    verify: Literal["auto", "device", "host"] = Field(
        "auto", description="where outputs are compared with the oracle: 'auto' on the device (cuda) from "
        "device_compare_min_bytes on, 'device' every output it can, 'host' all on the host")
    device_compare_min_bytes: int = Field(DEVICE_COMPARE_MIN_BYTES, ge=0, description="(verify 'auto') smaller outputs are "
                                          "downloaded, compared on the host and kept; on the device only failures are")


class CaseResult(BaseModel):
    name: str
    role: Literal["validation", "performance"]
    sizes: dict[str, int]
    status: CaseStatus
    passed: bool
    message: str | None = None
    run: CaseRun | None = None
    outputs: list[OutputComparison] = Field(default_factory=list)
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    timing: TimingStats | None = None
    median_ms: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    races: RaceReport | None = Field(None, description="the race check's report, when one ran")
    rerun_differs: dict[str, int] | None = Field(
        None, description="a mismatch run again on the same inputs: per output, the elements whose bytes differed "
        "between the two runs (any: the result depends on thread timing, a race)")


class Overhead(BaseModel):
    """Wall time per stage of this evaluation, in milliseconds."""

    compile_ms: float = 0.0
    inputs_ms: float = 0.0
    reference_ms: float = 0.0
    load_ms: float = 0.0
    transfer_ms: float = Field(0.0, description="the worker's buffer set-up and output download and checks")
    validate_ms: float = 0.0
    time_ms: float = 0.0
    compare_ms: float = 0.0
    race_ms: float = 0.0
    total_ms: float = 0.0


class EvaluationResult(BaseModel):
    task: str
    backend: str
    seed: int
    input_scheme: int = Field(1, description="how the inputs follow from the seed (check.inputs.SCHEME): the same "
                              "seed and scheme draw the same inputs; a record from before this field reads 1")
    candidate: str = Field(description="content hash of the candidate")
    compile: CompileResult
    correct: bool
    cases: list[CaseResult] = Field(default_factory=list)
    score_ms: float | None = None
    score_ci: Interval | None = Field(None, description="confidence interval of the score (run.statistics)")
    failure: str | None = Field(None, description="the first thing that went wrong, in one line")
    hints: list[str] = Field(default_factory=list, description="where the evidence points (check.failure_hints)")
    environment: Environment
    overhead: Overhead
    retried: str | None = Field(None, description="why this evaluation is a second one, on another worker of the "
                                "pool: the first worker died or was lost mid-evaluation (what it measured is dropped)")


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
                          else f"compile {compiled.status}: " + _first_line(compiled.log, "error"))
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
        runner = _CaseRunner(task, backend, config, seed, scratch, overhead, compiled, device, deadline)
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


def compile_budget(left_s: float) -> float:
    """Seconds a compile may take with ``left_s`` of the budget left: no more than the compiler's default."""
    from harness_tools.compile.child import DEFAULT_TIMEOUT_S

    return max(min(DEFAULT_TIMEOUT_S, left_s), MIN_CASE_S)


MIN_CASE_S = 0.1  # a case (or compile) with less of the budget left is not started


class _CaseRunner:
    def __init__(self, task: Task, backend: ExecutionBackend, config: EvaluationConfig, seed: int,
                 scratch: Path, overhead: Overhead, compiled: CompileResult, device: DeviceInfo, deadline: float):
        self.task, self.backend, self.config, self.seed = task, backend, config, seed
        self.scratch, self.overhead, self.compiled = scratch, overhead, compiled
        self.max_shared = device.max_shared_per_block_optin
        self.deadline = deadline
        self.stop_reason: str | None = None
        self.input_files: dict[str, Path] = {}
        self.any_failed = False
        self.rerun_done = False

    def run(self, case: Case, candidate: Candidate) -> CaseResult:
        base = CaseResult(name=case.name, role=case.role, sizes=case.sizes, status="skipped", passed=False)
        if self.stop_reason:
            base.message = self.stop_reason
            return base
        if self._left() < MIN_CASE_S:
            self.stop_reason = base.message = (
                f"not run: the evaluation's budget of {self.config.timeout_s:g} s (timeout_s) was spent before this "
                "case started; give a larger timeout_s or fewer cases (roles)")
            return base
        owner = request_owner(self.task, candidate)  # before per-case defines: one owner for all its cases
        try:
            candidate = for_case(candidate, self.task, case.sizes)
            candidate.launch_plan(case.sizes, self.max_shared)  # before any input is drawn
            compiled = self._compiled(candidate, case)
        except CandidateError as exc:
            base.status, base.message = "run_error", str(exc)
            self.any_failed = True
            return base
        case_dir = self.scratch / case.name
        case_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        inputs = self._inputs(case)
        t1 = time.perf_counter()
        args = self._args(case, case_dir)
        files = self.input_files
        expected = Once(lambda: expected_outputs(self.task, case, self.seed, inputs, self.backend, args, case_dir,
                                                 self.compiled.arch, max(self._left(), MIN_CASE_S), files))
        checks = device_checks_for(self.task, case, self.seed, self.backend.name, self.config.verify, expected,
                                   self.config.device_compare_min_bytes)
        if len(checks) < len(self.task.spec.outputs):
            expected()  # the host compares some output: the oracle is needed anyway
        t2 = time.perf_counter()
        self.overhead.inputs_ms += (t1 - t0) * 1e3
        self.overhead.reference_ms += (t2 - t1) * 1e3
        timing = self.config.timing if case.role == "performance" and not self.any_failed else None
        timing = timing if timing is not None and timing.reps > 0 else None
        if timing is not None and case.name in self.config.stop_timing_above_ms:
            timing = timing.model_copy(update={"stop_above_ms": self.config.stop_timing_above_ms[case.name]})
        try:
            request = case_request(candidate, compiled, case.sizes, with_checks(args, checks), case_dir / "out", timing,
                                   placement_for(case.role), self.max_shared, owner)
        except CandidateError as exc:
            base.status, base.message = "run_error", str(exc)
            self.any_failed = True
            return base
        run = self.backend.run_case(request, max(self._left(), MIN_CASE_S))
        self.overhead.load_ms += run.load_ms
        self.overhead.validate_ms += run.run_ms
        device_compare_ms = sum(c.compare_ms for c in run.comparisons.values())
        self.overhead.transfer_ms += run.setup_ms + run.collect_ms - device_compare_ms
        self.overhead.compare_ms += device_compare_ms
        self.overhead.time_ms += run.time_ms
        result = self._judge(case, run, expected, case_dir / "out")
        if result.status == "mismatch" and case.role == "validation" and not self.rerun_done and run.outputs:
            self.rerun_done = True  # once per evaluation: evidence for the hint, not a second verdict
            result.rerun_differs = rerun_differences(self.backend, request, run, case_dir / "out",
                                                     max(self._left(), MIN_CASE_S))
        if self.config.race_check and case.role == "validation" and result.passed:
            self._race_check(request, result)
        self.any_failed |= not result.passed
        if run.status == "timeout" and self._left() < MIN_CASE_S:
            result.message = (f"{result.message}: the evaluation's budget of {self.config.timeout_s:g} s (timeout_s) "
                              "ran out during this case")
            self.stop_reason = (f"not run: the evaluation's budget of {self.config.timeout_s:g} s (timeout_s) ran out "
                                f"during case {case.name}; give a larger timeout_s or fewer cases (roles)")
        elif run.status in ("crashed", "timeout") or run.worker_restarted:
            self.stop_reason = f"not run: case {case.name} ended with {run.error or run.status}"
        return result

    def _left(self) -> float:
        return self.deadline - time.perf_counter()

    def _compiled(self, candidate: Candidate, case: Case) -> CompileResult:
        """The compile for this case: the evaluation's own unless per-case size_defines change the source's
        defines (compiled once per distinct set; a failure fails the case with NVRTC's first error)."""
        if not self.task.spec.size_defines:
            return self.compiled
        compiled = compile_candidate(candidate, self.compiled.arch, timeout_s=compile_budget(self._left()))
        if not compiled.cached:
            self.overhead.compile_ms += compiled.compile_ms
        if not compiled.ok:
            defines = ", ".join(f"{k}={candidate.defines[k]}" for k in self.task.spec.size_defines)
            raise CandidateError(f"compile {compiled.status} with this case's defines ({defines}): "
                                 + _first_line(compiled.log, "error"))
        return compiled

    def _race_check(self, request: CaseRequest, result: CaseResult) -> None:
        """A race fails the case; so does a check that could not run (race-freedom was asked for)."""
        t0 = time.perf_counter()
        assert isinstance(self.backend, RaceChecker)  # evaluate() refused a race check otherwise
        report = self.backend.race_check(request, max(self._left(), MIN_CASE_S))
        self.overhead.race_ms += (time.perf_counter() - t0) * 1e3
        result.races = report
        if report.status == "races":
            result.status, result.passed, result.message = "race", False, report.message
        elif report.status == "error":
            result.status, result.passed = "run_error", False
            result.message = f"race check could not run: {report.message}"

    def _judge(self, case: Case, run: CaseRun, expected: Once, out_dir: Path) -> CaseResult:
        result = CaseResult(name=case.name, role=case.role, sizes=case.sizes, status="run_error", passed=False, run=run)
        if run.status != "ok":
            result.message = f"{run.status}: {run.message or run.error}"
            return result
        t0 = time.perf_counter()
        spec = self.task.spec
        # the worker runs candidate code: read only files it wrote where it was told to, for the buffers asked for
        on_device = compared_on_device(run, spec, case.sizes)
        handles = {b.name: open_worker_file(run.outputs.get(b.name), out_dir) for b in spec.outputs
                   if b.name not in on_device}
        missing = [name for name, handle in handles.items() if handle is None]
        if missing:
            for handle in handles.values():
                if handle is not None:
                    handle.close()
            result.message = f"the backend returned no output file for {', '.join(missing)} in the case's output folder"
            run.outputs = {}
            return result
        # the failures the device decided keep their downloaded outputs, as evidence
        run.outputs = {name: path for name, path in run.outputs.items() if name in handles or name in on_device}
        written: dict[str, np.ndarray] = {}  # kept for the task's custom check only
        for buf in spec.outputs:
            if buf.name in on_device:
                result.outputs.append(on_device[buf.name])
                continue
            got = as_dtype(load_output(handles[buf.name]), buf.dtype)
            result.outputs.append(compare(buf.name, got, expected()[buf.name], spec.tolerance_for(buf.dtype),
                                          case.sizes, mismatch_budget(buf, case.sizes)))
            if spec.check:
                written[buf.name] = got
        self.overhead.compare_ms += (time.perf_counter() - t0) * 1e3
        result.max_abs_err = max(o.max_abs_err for o in result.outputs)
        result.max_rel_err = max(o.max_rel_err for o in result.outputs)
        if run.overruns or run.modified_inputs:
            result.status = "corrupted"
            parts = [f"wrote outside {', '.join(run.overruns)} (past its end or before its start: the bytes around "
                     "the buffer changed)" if run.overruns else "",
                     f"modified input {', '.join(run.modified_inputs)}" if run.modified_inputs else ""]
            result.message = "; ".join(p for p in parts if p)
            return result
        check = spec.check  # after the comparison: both must pass, or the check alone decides (replaces_tolerance)
        bad = [o for o in result.outputs if not o.passed]
        if bad and not (check and check.replaces_tolerance):
            result.status, result.message = "mismatch", mismatch_message(bad[0])
            return result
        if check:
            t1 = time.perf_counter()
            failure = custom_check_failure(self.task, case, written, expected(), self.input_files)
            self.overhead.compare_ms += (time.perf_counter() - t1) * 1e3
            if check.replaces_tolerance:
                result.outputs = judged_by_check(result.outputs, failure is None)
            if failure is not None:
                result.status, result.message = "mismatch", f"custom check: {failure}"
                return result
        result.status, result.passed = "passed", True
        if run.timing:
            result.timing, result.median_ms = run.timing, run.timing.median_ms
            result.tflops, result.gbps = self._rates(case, run.timing.median_ms)
        return result

    def _inputs(self, case: Case) -> Mapping[str, np.ndarray]:
        arrays, self.input_files = case_inputs(self.task, case, self.seed)
        return arrays

    def _args(self, case: Case, case_dir: Path) -> list[ArgSpec]:
        return case_arguments(self.task, case, self.input_files)

    def _rates(self, case: Case, median_ms: float) -> tuple[float | None, float | None]:
        metrics = self.task.spec.metrics
        if not metrics or median_ms <= 0:
            return None, None
        seconds = median_ms * 1e-3
        flops = evaluate_expression(metrics.flops, case.sizes) / seconds / 1e12 if metrics.flops is not None else None
        gbps = evaluate_expression(metrics.bytes, case.sizes) / seconds / 1e9 if metrics.bytes is not None else None
        return flops, gbps


def _first_line(log: str, word: str) -> str:
    for line in log.splitlines():
        if word in line:
            return line.strip()
    return log.strip().splitlines()[0] if log.strip() else ""
