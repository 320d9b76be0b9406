"""Nsight Compute on one launch of a candidate, summarised for a model (:mod:`harness_tools.inspect.ncu_summary`).

The case runs in a fresh launcher process under ``ncu``: only the candidate's kernel, skipping the
checked launch and the warm-ups (so the profiled launch is a warm one, as timed), one launch,
``--clock-control none`` so the figures match our event timings, the ``full`` section set. The report
(``profile.ncu-rep``) and its CSV pages stay in the given folder. Profiling time never enters a score.

Expected trouble is data (:class:`ProfileResult` with ``status``): ncu missing, counters not permitted,
a timeout, the kernel failing, no kernel profiled. Bugs are exceptions.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from harness_tools.errors import ProfileParseError
from harness_tools.inspect.launcher import find_tool, launcher_command, pick_case, prepare_request, run_wrapped
from harness_tools.inspect.ncu_summary import Ceilings, ProfileSummary, summarize_profile
from harness_tools.run.timing import TimingPlan
from harness_tools.task.candidate import Candidate
from harness_tools.task.expressions import evaluate_expression
from harness_tools.task.launches import base_name
from harness_tools.task.spec import Task

WARM_LAUNCHES = 3  # skipped before the profiled one: the checked launch, then warm-ups

INSTALL_HINT = ("install Nsight Compute (it comes with the CUDA toolkit, or from developer.nvidia.com/nsight-compute) "
                "or set CUDAOPT_NCU to the ncu executable")
PERMISSION_HINT = ("GPU performance counters are not permitted for this user (ERR_NVGPUCTRPERM): run the server as "
                   "root, or load the driver with NVreg_RestrictProfilingToAdminUsers=0 "
                   "(see developer.nvidia.com/ERR_NVGPUCTRPERM)")


ProfileStatus = Literal["ok", "unavailable", "failed", "timeout"]


class ProfileResult(BaseModel):
    status: ProfileStatus
    message: str = ""
    case: str | None = None
    summary: ProfileSummary | None = None
    report_file: str | None = Field(None, description="the .ncu-rep, relative to the profile folder")
    elapsed_s: float = 0.0
    ncu_version: str | None = None


def ncu_version(ncu: str) -> str | None:
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"Version\s+(\S+)", out)
    return match.group(1) if match else None


def profile_candidate(task: Task, candidate: Candidate, arch: str, folder: Path, *, case_name: str | None = None,
                      seed: int = 1, timeout_s: float = 300.0, ceilings: Ceilings | None = None) -> ProfileResult:
    """Profile ``candidate`` on one performance case (default: the first one for the GPU)."""
    ncu = find_tool("ncu", "CUDAOPT_NCU")
    if ncu is None:
        return ProfileResult(status="unavailable", message=f"Nsight Compute (ncu) was not found: {INSTALL_HINT}")
    case = pick_case(task, case_name, "performance")
    folder.mkdir(parents=True, exist_ok=True)
    request = prepare_request(task, candidate, case, arch, seed, folder,
                              TimingPlan(warmup=WARM_LAUNCHES - 1, reps=1, flush_l2=True))
    report = folder / "profile"
    kernel = candidate.steps()[0][0]  # a sequence is profiled at its first launch's kernel
    # ncu matches the function's base name by default (no namespace, template or parameter list)
    command = [ncu, "--target-processes", "all", "--kernel-name", base_name(kernel), "--launch-skip",
               str(WARM_LAUNCHES), "--launch-count", "1", "--clock-control", "none", "--set", "full", "--force-overwrite",
               "--export", str(report), *launcher_command(request)]
    run = run_wrapped(command, timeout_s, folder)
    (folder / "ncu.log").write_text(run.output)
    result = ProfileResult(status="ok", case=case.name, elapsed_s=run.elapsed_s)
    problem = _problem(run.output, run.timed_out, run.returncode, report.with_suffix(".ncu-rep"), timeout_s)
    if problem is not None:
        result.status, result.message = problem
        return result
    pages = {}
    for page in ("raw", "details"):
        out = subprocess.run([ncu, "--import", str(report.with_suffix(".ncu-rep")), "--csv", "--page", page],
                             capture_output=True, text=True, timeout=120, check=False)
        pages[page] = out.stdout
        (folder / f"profile.{page}.csv").write_text(out.stdout)
    sizes = case.sizes
    metrics = task.spec.metrics
    flops = float(evaluate_expression(metrics.flops, sizes)) if metrics and metrics.flops is not None else None
    moved = float(evaluate_expression(metrics.bytes, sizes)) if metrics and metrics.bytes is not None else None
    try:
        result.summary = summarize_profile(pages["raw"], pages["details"], flops=flops, bytes_moved=moved, ceilings=ceilings)
    except ProfileParseError as exc:
        result.status, result.message = "failed", f"could not read the ncu report: {exc}"
        return result
    result.report_file = "profile.ncu-rep"
    result.ncu_version = ncu_version(ncu)
    sequence = (f"; the first kernel of a sequence of {len(candidate.steps())} launches"
                if len(candidate.steps()) > 1 else "")
    result.message = f"profiled {kernel} on case {case.name} (launch {WARM_LAUNCHES + 1}, warm{sequence})"
    return result


def _problem(output: str, timed_out: bool, code: int | None, report: Path, timeout_s: float):
    """(status, message) when the run did not produce a profile, else None."""
    if timed_out:
        return "timeout", f"ncu did not finish within {timeout_s:g} s (killed); try a smaller case or a longer timeout"
    if "ERR_NVGPUCTRPERM" in output:
        return "unavailable", PERMISSION_HINT
    launch = _launcher_outcome(output)
    if launch and launch.get("status") != "ok":
        return "failed", (f"the kernel failed while being profiled: {launch.get('status')}: "
                          f"{launch.get('message') or launch.get('error')}")
    if "No kernels were profiled" in output or not report.is_file():
        tail = "\n".join(line for line in output.strip().splitlines()[-6:])
        return "failed", f"ncu profiled no kernel (exit code {code}); its last lines:\n{tail}"
    return None


def _launcher_outcome(output: str) -> dict | None:
    for line in reversed(output.splitlines()):
        if line.startswith("{") and '"status"' in line:
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None
