"""Run one case of a candidate under an external GPU tool (Nsight Compute, compute-sanitizer).

The tool must start the process it inspects, so the case runs in a fresh
``python -P -m harness_tools.profile_launch`` process (not in the long-lived worker). This module
prepares that process's request file, finds the tools, and runs the wrapped command with a timeout,
killing the whole process group when it hangs: nothing a tool does can hang or crash the caller.
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from pydantic import BaseModel

from .candidate import Candidate
from .compile import compile_candidate
from .errors import CandidateError, HarnessError
from .evaluate import case_arguments, case_inputs
from .execution import CaseRequest
from .spec import Case, Task
from .timing import TimingPlan

TOOL_DIRS = ("/usr/local/cuda/bin", "/opt/nvidia/nsight-compute")


class LaunchPrepError(HarnessError):
    """The case cannot be launched as asked (no such case, compile error, bad launch); the message says why."""


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
    compiled = compile_candidate(candidate, arch)
    if not compiled.ok:
        raise LaunchPrepError(f"the candidate does not compile: {compiled.log.strip().splitlines()[0] if compiled.log else ''}")
    try:
        grid, block, shared = candidate.launch_dims(case.sizes)
    except CandidateError as exc:
        raise LaunchPrepError(str(exc)) from None
    _, files = case_inputs(task, case, seed)
    return CaseRequest(kernel_name=candidate.kernel_name, cubin=compiled.cubin or b"", source=candidate.source,
                       defines={k: str(v) for k, v in candidate.defines.items()}, options=list(candidate.options),
                       grid=grid, block=block, shared_mem=shared, args=case_arguments(task, case, files),
                       timing=timing, output_dir=str(output_dir))


def prepare_request(task: Task, candidate: Candidate, case: Case, arch: str, seed: int, folder: Path,
                    timing: TimingPlan | None, name: str = "request") -> Path:
    """Write the launcher's request file for one case into ``folder``."""
    request = build_request(task, candidate, case, arch, seed, folder / "out" / case.name, timing)
    path = folder / f"{name}.pkl"
    with open(path, "wb") as handle:
        pickle.dump(request.model_dump(), handle)
    return path


def launcher_command(*request_files: Path) -> list[str]:
    return [sys.executable, "-P", "-m", "harness_tools.profile_launch", *map(str, request_files)]


def run_wrapped(command: list[str], timeout_s: float, cwd: Path) -> WrappedRun:
    """Run ``command`` in its own session; on timeout the whole group is killed (tool and launcher)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    started = time.monotonic()
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        timed_out = True
    return WrappedRun(returncode=None if timed_out else proc.returncode, output=output or "", timed_out=timed_out,
                      elapsed_s=round(time.monotonic() - started, 2), command=command)
