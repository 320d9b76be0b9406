"""Sanitizers for a candidate: NVIDIA compute-sanitizer on the ``cuda`` backend, our race check and
guarded buffers on the ``cpu`` backend. Findings name source lines.

cuda: each tool (memcheck, racecheck, initcheck, synccheck) runs once, over the validation cases, in a
fresh launcher process (:mod:`harness_tools.inspect.launcher`); the kernel is compiled with line
information; the output is parsed by :mod:`harness_tools.inspect.sanitizer_report`. cpu: the validation cases
are evaluated with the ThreadSanitizer race check on; guarded buffers report out-of-bounds accesses
with the argument, block and thread, a divergent barrier with its line.
Expected trouble (tool missing, a hang past the timeout) is data in :class:`SanitizeResult`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from harness_tools.backends import ExecutionBackend, RaceChecker
from harness_tools.compile import PROGRAM_NAME
from harness_tools.errors import BackendError
from harness_tools.evaluation import EvaluationConfig, evaluate
from harness_tools.inspect.launcher import build_request, find_tool, launcher_command, pick_case, prepare_request, run_wrapped
from harness_tools.inspect.sanitizer_parse import parse_sanitizer_output
from harness_tools.inspect.sanitizer_report import SanitizerReport
from harness_tools.task.candidate import Candidate
from harness_tools.task.spec import Task

SanitizerTool = Literal["memcheck", "racecheck", "initcheck", "synccheck"]
ALL_TOOLS: tuple[SanitizerTool, ...] = ("memcheck", "racecheck", "initcheck", "synccheck")
INSTALL_HINT = ("compute-sanitizer comes with the CUDA toolkit (bin/compute-sanitizer); install it or set "
                "CUDAOPT_COMPUTE_SANITIZER to the executable")


class CpuFinding(BaseModel):
    case: str
    kind: Literal["race", "out_of_bounds", "barrier", "corrupted", "other"]
    message: str


SanitizeStatus = Literal["clean", "findings", "unavailable", "failed", "timeout"]


class SanitizeResult(BaseModel):
    backend: str
    status: SanitizeStatus
    message: str = ""
    cases: list[str] = Field(default_factory=list)
    reports: list[SanitizerReport] = Field(default_factory=list, description="cuda: one per compute-sanitizer tool")
    cpu_findings: list[CpuFinding] = Field(default_factory=list, description="cpu: race check and guarded buffers")
    elapsed_s: float = 0.0

    def text(self) -> str:
        lines = [f"sanitize on {self.backend}: {self.status}" + (f" — {self.message}" if self.message else "")]
        lines += [r.text() for r in self.reports]
        lines += [f"- {f.case}: {f.kind}: {f.message[:300]}" for f in self.cpu_findings[:12]]
        return "\n".join(lines)


def sanitize_candidate(task: Task, candidate: Candidate, backend: ExecutionBackend, folder: Path, *,
                       tools: list[SanitizerTool] | None = None, case_names: list[str] | None = None,
                       timeout_s: float = 180.0) -> SanitizeResult:
    """The backend's own way of sanitizing (its ``traits.sanitizer``): compute-sanitizer's tools on the GPU,
    or guarded buffers and the race check on the cpu backend. Logs, where a tool writes them, go to ``folder``."""
    if backend.traits.sanitizer == "compute-sanitizer":
        return sanitize_cuda(task, candidate, backend.device_info().arch, folder, tools=tools, case_names=case_names,
                             timeout_s=timeout_s)
    if not isinstance(backend, RaceChecker):
        raise BackendError(f"the {backend.name} backend says it sanitizes by race check but has no race_check")
    return sanitize_cpu(task, candidate, backend, folder, case_names=case_names, timeout_s=timeout_s)


def sanitize_cuda(task: Task, candidate: Candidate, arch: str, folder: Path, *, tools: list[SanitizerTool] | None = None,
                  case_names: list[str] | None = None, seed: int = 1, timeout_s: float = 180.0) -> SanitizeResult:
    started = time.monotonic()
    sanitizer = find_tool("compute-sanitizer", "CUDAOPT_COMPUTE_SANITIZER")
    if sanitizer is None:
        return SanitizeResult(backend="cuda", status="unavailable", message=f"compute-sanitizer was not found: {INSTALL_HINT}")
    folder.mkdir(parents=True, exist_ok=True)
    cases = ([pick_case(task, n, "validation") for n in case_names] if case_names
             else task.spec.cases_for(["validation"], "cuda"))
    requests = [prepare_request(task, candidate, case, arch, seed, folder, None, name=f"request-{case.name}")
                for case in cases]
    result = SanitizeResult(backend="cuda", status="clean", cases=[c.name for c in cases])
    for tool in tools or list(ALL_TOOLS):
        run = run_wrapped([sanitizer, "--tool", tool, "--print-limit", "200", *launcher_command(*requests)],
                          timeout_s, folder)
        (folder / f"{tool}.log").write_text(run.output)
        if run.timed_out:
            result.status = "timeout"
            result.message = f"{tool} did not finish within {timeout_s:g} s (killed); give fewer or smaller cases"
            break
        report = parse_sanitizer_output(tool, run.output, source_name=PROGRAM_NAME)
        result.reports.append(report)
        if report.tool_error:
            result.status, result.message = "failed", f"{tool}: {report.tool_error}"
        elif not report.clean and result.status == "clean":
            result.status = "findings"
    result.elapsed_s = round(time.monotonic() - started, 2)
    return result


def sanitize_cpu(task: Task, candidate: Candidate, backend: RaceChecker, folder: Path, *,
                 case_names: list[str] | None = None, seed: int = 1, timeout_s: float = 120.0) -> SanitizeResult:
    """The cpu backend's checks over the validation cases: guarded buffers and barrier checks on every
    launch, then the ThreadSanitizer race check on every case whose launch completed (right or wrong:
    a missing barrier often makes the result wrong too)."""
    started = time.monotonic()
    config = EvaluationConfig(seed=seed, timing=None, roles=["validation"], timeout_s=timeout_s)
    evaluation = evaluate(task, candidate, backend, config)
    result = SanitizeResult(backend=backend.name, status="clean")
    if not evaluation.compile.ok:
        result.status, result.message = "failed", f"the candidate does not compile: {evaluation.failure}"
        return result
    arch = backend.device_info().arch
    for case in evaluation.cases:
        if case_names and case.name not in case_names:
            continue
        result.cases.append(case.name)
        run = case.run
        if run is not None and run.status != "ok":
            kind = "out_of_bounds" if run.error == "CPU_OUT_OF_BOUNDS" else _cpu_kind(case.status, (case.message or "").lower())
            result.cpu_findings.append(CpuFinding(case=case.name, kind=kind, message=case.message or case.status))
            continue
        if case.status == "corrupted":
            result.cpu_findings.append(CpuFinding(case=case.name, kind="corrupted", message=case.message or ""))
        request = build_request(task, candidate, task.spec.case(case.name), arch, seed, folder / case.name)
        report = backend.race_check(request, timeout_s)
        if report.status == "races":
            result.cpu_findings.append(CpuFinding(case=case.name, kind="race", message=report.message))
        elif report.status == "error":
            result.cpu_findings.append(CpuFinding(case=case.name, kind="other",
                                                  message=f"the race check could not run: {report.message}"))
    if result.cpu_findings:
        result.status = "findings"
        result.message = f"{len(result.cpu_findings)} finding(s) in {len(result.cases)} validation case(s)"
    result.elapsed_s = round(time.monotonic() - started, 2)
    return result


def _cpu_kind(status: str, text: str) -> str:
    if status in ("race", "corrupted"):
        return status
    if "__syncthreads" in text or "barrier" in text or "divergent" in text:
        return "barrier"
    if any(word in text for word in ("out of bounds", "out-of-bounds", "guard page", "kernel argument", "past the end",
                                     "invalid or misaligned access")):
        return "out_of_bounds"
    return "other"
