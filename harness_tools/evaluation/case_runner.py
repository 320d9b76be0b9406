"""One case of an evaluation: its inputs, oracle and request, the backend's run, and the verdict on its outputs."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from harness_tools.backends import ExecutionBackend, RaceChecker, backend_traits
from harness_tools.backends.contract import ArgSpec, CaseRequest, CaseRun, DeviceInfo
from harness_tools.check.case_request import case_arguments, case_inputs, case_request, placement_for, request_owner
from harness_tools.check.compare import compare, mismatch_message
from harness_tools.check.custom_check import custom_check_failure, judged_by_check
from harness_tools.check.device_compare import Once, compared_on_device, device_checks_for, with_checks
from harness_tools.check.reference import expected_outputs
from harness_tools.check.same_inputs_rerun import rerun_differences
from harness_tools.check.worker_files import load_output, open_worker_file
from harness_tools.compile import CompileResult, compile_candidate
from harness_tools.errors import CandidateError
from harness_tools.evaluation.records import CaseResult, EvaluationConfig, Overhead
from harness_tools.task.candidate import Candidate, for_case
from harness_tools.task.checking_rules import mismatch_budget
from harness_tools.task.dtypes import as_dtype
from harness_tools.task.expressions import evaluate_expression
from harness_tools.task.spec import Case, KernelReference, Task

MIN_CASE_S = 0.1  # a case (or compile) with less of the budget left is not started


def compile_budget(left_s: float) -> float:
    """Seconds a compile may take with ``left_s`` of the budget left: no more than the compiler's default."""
    from harness_tools.compile.child import DEFAULT_TIMEOUT_S

    return max(min(DEFAULT_TIMEOUT_S, left_s), MIN_CASE_S)


def first_line(log: str, word: str) -> str:
    """The first line of ``log`` holding ``word`` (else its first line): what a one-line failure quotes."""
    for line in log.splitlines():
        if word in line:
            return line.strip()
    return log.strip().splitlines()[0] if log.strip() else ""


class CaseRunner:
    """Runs an evaluation's cases one after the other, within its deadline; stops them after a crash."""

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
        overlap = self._oracle_meanwhile()
        checks = device_checks_for(self.task, case, self.seed, self.backend.name, self.config.verify, expected,
                                   self.config.device_compare_min_bytes, wait=not overlap)
        if checks is None:  # another thread is making this oracle (a seed drawn ahead): run now, compare on the host
            checks = {}
        meanwhile = len(checks) < len(self.task.spec.outputs) and overlap
        if meanwhile:
            expected.meanwhile()
        elif len(checks) < len(self.task.spec.outputs):  # the host compares some output: the oracle is needed anyway
            expected()
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
        if meanwhile and run.status == "ok":  # an oracle all compared on the device is not computed at all
            t3 = time.perf_counter()
            with contextlib.suppress(Exception):  # the comparison asks again, and raises what it raised
                expected()
            self.overhead.reference_ms += (time.perf_counter() - t3) * 1e3  # waited for beyond the run, if at all
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

    def _oracle_meanwhile(self) -> bool:
        """Whether a case's host oracle is computed while the backend runs it: when the host computes it (not a
        reference kernel, which would share the device) and the host's cores are not the backend's clock (the cpu
        backend's timings would pay for it). The first evaluation of a seed then overlaps its largest costs: on
        reduction's 3.2 GB case, about a second of float64 sum against the upload and the timed launches."""
        return (not isinstance(self.task.spec.reference, KernelReference)
                and not backend_traits(self.backend.name).buffers_in_host_memory)

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
                                 + first_line(compiled.log, "error"))
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


