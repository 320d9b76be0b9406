"""Run one case of a candidate under an external GPU tool (Nsight Compute, compute-sanitizer).

The tool must start the process it inspects, so the case runs in a fresh
``python -P -m harness_tools.inspect.launch_child`` process (not in the long-lived worker). This module
prepares that process's request file, finds the tools, and runs the wrapped command jailed, with a
timeout, killing the whole jail when it hangs: nothing a tool does can hang or crash the caller.
"""

from __future__ import annotations

import os
import pickle
import shutil
import sys
import time
from pathlib import Path

from pydantic import BaseModel

from harness_tools.backends.contract import CaseRequest
from harness_tools.check.case_request import case_arguments, case_inputs, case_request
from harness_tools.compile import compile_candidate
from harness_tools.errors import CandidateError, LaunchPrepError
from harness_tools.run import jail
from harness_tools.run.jail import JailSpec, Limits
from harness_tools.run.scratch import inputs_root
from harness_tools.run.timing import TimingPlan
from harness_tools.task.candidate import Candidate, for_case
from harness_tools.task.spec import Case, Task

TOOL_DIRS = ("/usr/local/cuda/bin", "/opt/nvidia/nsight-compute")


class WrappedRun(BaseModel):
    returncode: int | None
    output: str
    timed_out: bool
    elapsed_s: float
    command: list[str]


def find_tool(name: str, env_var: str) -> str | None:
    """``$env_var`` if set, else PATH, else the usual CUDA install folders (and newest Nsight Compute)."""
    given = os.environ.get(env_var)
    if given:
        return given if Path(given).is_file() else None
    found = shutil.which(name)
    if found:
        return found
    for folder in TOOL_DIRS:
        candidates = sorted(Path(folder).glob(f"**/{name}"), reverse=True) if Path(folder).is_dir() else []
        for path in candidates:
            if path.is_file() and os.access(path, os.X_OK):
                return str(path)
    return None


def pick_case(task: Task, name: str | None, role: str, backend: str = "cuda") -> Case:
    cases = task.spec.cases_for([role], backend)
    if name is None:
        if not cases:
            raise LaunchPrepError(f"task {task.name} has no {role} case for the {backend} backend")
        return cases[0]
    for case in task.spec.cases:
        if case.name == name:
            return case
    raise LaunchPrepError(f"task {task.name} has no case {name!r}; cases: {', '.join(c.name for c in task.spec.cases)}")


def build_request(task: Task, candidate: Candidate, case: Case, arch: str, seed: int, output_dir: Path,
                  timing: TimingPlan | None = None) -> CaseRequest:
    """The request for one case: compiled (with line information, so tools can name source lines), with
    the case's inputs for ``seed``."""
    if not {"-lineinfo", "--generate-line-info"} & set(candidate.options):
        candidate = candidate.model_copy(update={"options": [*candidate.options, "-lineinfo"]})
    try:
        candidate = for_case(candidate, task, case.sizes)
        candidate.launch_plan(case.sizes)
    except CandidateError as exc:
        raise LaunchPrepError(str(exc)) from None
    compiled = compile_candidate(candidate, arch)
    if not compiled.ok:
        raise LaunchPrepError(f"the candidate does not compile: {compiled.log.strip().splitlines()[0] if compiled.log else ''}")
    _, files = case_inputs(task, case, seed)
    try:
        return case_request(candidate, compiled, case.sizes, case_arguments(task, case, files), output_dir, timing)
    except CandidateError as exc:
        raise LaunchPrepError(str(exc)) from None


def prepare_request(task: Task, candidate: Candidate, case: Case, arch: str, seed: int, folder: Path,
                    timing: TimingPlan | None, name: str = "request") -> Path:
    """Write the launcher's request file for one case into ``folder``."""
    request = build_request(task, candidate, case, arch, seed, folder / "out" / case.name, timing)
    path = folder / f"{name}.pkl"
    with open(path, "wb") as handle:
        pickle.dump(request.model_dump(), handle)
    return path


def launcher_command(*request_files: Path) -> list[str]:
    return [sys.executable, "-P", "-m", "harness_tools.inspect.launch_child", *map(str, request_files)]


def run_wrapped(command: list[str], timeout_s: float, cwd: Path) -> WrappedRun:
    """Run ``command`` (the tool, then the launcher) jailed: the GPU, the tool's own folder and the inputs
    read-only, ``cwd`` (this inspection's scratch folder) writable; on timeout the whole jail is killed."""
    tool_home = Path(command[0]).resolve().parent.parent
    spec = JailSpec(purpose="inspect", gpu=True, read_only=(str(tool_home), str(inputs_root())), writable=(str(cwd),),
                    limits=Limits(processes=256))
    started = time.monotonic()
    code, output, _ = jail.run(command, spec, timeout_s, cwd=str(cwd), merge=True)
    return WrappedRun(returncode=code, output=output, timed_out=code is None,
                      elapsed_s=round(time.monotonic() - started, 2), command=command)
