"""Resources: runs, task files and candidate artifacts, readable by URI (tools link to them).

    cudaopt://runs                                                   every run (JSON)
    cudaopt://runs/{run_id}                                          one run: task, budget, best, recent candidates
    cudaopt://runs/{run_id}/history                                  the append-only history (JSON lines)
    cudaopt://runs/{run_id}/best/{name}                              the exported best kernel (best_kernel.cu, ...)
    cudaopt://runs/{run_id}/task/{name}                              a file of the run's task (task.json, baseline.cu)
    cudaopt://runs/{run_id}/candidates/{candidate_id}/{artifact}     kernel.cu, compile.log, evaluation.json, ...
    cudaopt://runs/{run_id}/candidates/{candidate_id}/outputs/{case}/{buffer}   a kept output (.npy bytes)

The templates are :mod:`cudaopt_mcp.api`'s constants, so the links the tools hand out resolve here.
Every id and name is validated by the run store before a path is built; unknown ones are refused.
Hidden cases are never served: task.json loses its ``hidden`` block, and the hidden check's record has a
name no artifact pattern admits (:mod:`cudaopt_mcp.service.hidden`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from cudaopt_mcp.api import (
    ARTIFACT_TEMPLATE,
    BEST_EXPORT_TEMPLATE,
    BEST_EXPORTS,
    HISTORY_TEMPLATE,
    OUTPUT_TEMPLATE,
    RUN_TEMPLATE,
    RUNS_URI,
    TASK_FILE_TEMPLATE,
    GetRunOutput,
    ListRunsOutput,
)
from cudaopt_mcp.errors import RunError
from cudaopt_mcp.service import views as S
from cudaopt_mcp.service.hidden import public_task_json
from cudaopt_mcp.service.runs import ARTIFACT
from cudaopt_mcp.service.state import ServerState
from harness_tools.task.loading import TASK_FILE

MIME = {".cu": "text/x-cuda", ".cuh": "text/x-cuda", ".json": "application/json", ".jsonl": "application/x-ndjson",
        ".log": "text/plain", ".py": "text/x-python", ".npy": "application/octet-stream"}
_CASE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


BINARY_SUFFIXES = (".ncu-rep",)


def register(server: MCPServer, state_of: Callable[[], ServerState]) -> None:
    """``state_of`` returns the running server's state (static resources get no request context)."""

    def guarded(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except RunError as exc:
                raise ResourceNotFoundError(str(exc)) from None
        return wrapper

    @server.resource(RUNS_URI, name="runs", mime_type="application/json")
    @guarded
    def runs() -> str:
        """Every run in this server's results folder, with budget and best candidate."""
        state = state_of()
        return ListRunsOutput(runs=[S.run_info(state.store, r, state.backend_name, state.is_active, recent=0)
                                    for r in state.store.list_runs()]).model_dump_json(indent=2, exclude_none=True)

    @server.resource(RUN_TEMPLATE, name="run", mime_type="application/json")
    @guarded
    def run(run_id: str) -> str:
        """One run: its task, budget, best candidate, latest candidates and a history digest."""
        state = state_of()
        record = state.store.run(run_id)
        out = GetRunOutput(run=S.run_info(state.store, record, state.backend_name, state.is_active),
                           task=S.task_summary(state.store.task(run_id), run_id),
                           history_digest=[S.history_line(e) for e in state.store.history(run_id, limit=12)])
        return out.model_dump_json(indent=2, exclude_none=True)

    @server.resource(HISTORY_TEMPLATE, name="run history", mime_type="application/x-ndjson")
    @guarded
    def run_history(run_id: str) -> str:
        """The run's append-only history, one JSON event per line, oldest first."""
        path = state_of().store.run_file(run_id, "history.jsonl")
        return path.read_text() if path.is_file() else ""

    @server.resource(BEST_EXPORT_TEMPLATE, name="best kernel export")
    @guarded
    def best_export(run_id: str, name: str) -> str:
        """The run's best kernel exported standalone: best_kernel.cu (defines baked in, launch configuration
        in its header comment) or best_launch.json."""
        if name not in BEST_EXPORTS:
            raise RunError(f"no export {name!r}: ask for best_kernel.cu or best_launch.json")
        path = state_of().store.run_file(run_id, name)
        if not path.is_file():
            raise RunError(f"run {run_id} has no scored best candidate yet, so nothing is exported")
        return path.read_text()

    @server.resource(TASK_FILE_TEMPLATE, name="task file")
    @guarded
    def task_file(run_id: str, name: str) -> str:
        """A file of the run's own copy of its task: task.json (without its hidden cases), the baseline source,
        the tunable kernel."""
        if not ARTIFACT.match(name) or ".." in name:
            raise RunError(f"invalid task file name {name!r}")
        path = state_of().store.run_file(run_id, "task") / name
        if not path.is_file():
            raise RunError(f"run {run_id}'s task has no file {name!r}")
        return public_task_json(path.read_text()) if name == TASK_FILE else path.read_text()

    @server.resource(ARTIFACT_TEMPLATE, name="candidate artifact")
    @guarded
    def artifact(run_id: str, candidate_id: str, artifact: str) -> str | bytes:
        """A candidate's artifact: kernel.cu, candidate.json, compile.json, compile.log, evaluation.json,
        execution.json (from run), timing.json (from time), profile.json / profile.details.csv /
        profile.ncu-rep (binary, from profile), sanitize.json / sanitize-<tool>.log (from sanitize)."""
        path = state_of().store.artifact_path(run_id, candidate_id, artifact)
        return path.read_bytes() if path.suffix in BINARY_SUFFIXES else path.read_text()

    @server.resource(OUTPUT_TEMPLATE, name="kept output", mime_type="application/octet-stream")
    @guarded
    def output(run_id: str, candidate_id: str, case: str, buffer: str) -> bytes:
        """A kernel output of the candidate's latest run/evaluate, as a NumPy .npy file (small cases only)."""
        if not _CASE.match(case) or ".." in case or not ARTIFACT.match(buffer) or ".." in buffer:
            raise RunError(f"invalid case or buffer name {case!r}/{buffer!r}")
        path = state_of().store.candidate_dir(run_id, candidate_id) / "outputs" / case / f"{buffer}.npy"
        if not path.is_file():
            raise RunError(f"no kept output {case}/{buffer} for candidate {candidate_id} of {run_id}")
        return path.read_bytes()
