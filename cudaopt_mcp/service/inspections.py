"""The server's profile and sanitize operations (blocking, no MCP here), on a stored candidate.

Both hold the run's lock and the engine lock (a profiler or sanitizer must not share the GPU with a
timing). Their artifacts go into the candidate's folder: ``profile.json`` (the result with its summary),
``profile.ncu-rep`` (the full Nsight Compute report), ``profile.raw.csv``, ``profile.details.csv`` and
``ncu.log``; ``sanitize.json`` and ``sanitize-<tool>.log``. Profiling time never enters a score.
"""

from __future__ import annotations

import shutil

from cudaopt_mcp.api import ProfileOutput, SanitizeOutput
from cudaopt_mcp.service import views as S
from cudaopt_mcp.service.cancelled import recorded_if_cancelled
from cudaopt_mcp.service.candidates import load_candidate
from cudaopt_mcp.service.progress import Progress, no_progress
from cudaopt_mcp.service.runs import atomic_write
from cudaopt_mcp.service.state import ServerState
from harness_tools import backend_traits, profile_candidate, sanitize_candidate
from harness_tools.inspect.profile import ProfileResult
from harness_tools.inspect.sanitize import SanitizeResult, SanitizerTool
from harness_tools.run.scratch import scratch_dir

PROFILE_FILES = ("profile.ncu-rep", "profile.raw.csv", "profile.details.csv", "ncu.log")


def profile_step(state: ServerState, run_id: str, candidate_id: str, case: str | None, timeout_s: float,
                 progress: Progress = no_progress) -> ProfileOutput:
    store = state.store
    out = ProfileOutput(run_id=run_id, candidate_id=candidate_id, available=False, backend=state.backend_name,
                        status="unavailable", reason="")
    with store.locked(run_id):
        task, cand = store.task(run_id), load_candidate(state, run_id, candidate_id)
        traits = backend_traits(state.backend_name)
        if not traits.profiler:
            where = ("this command runs" if state.config.transport == "inprocess" else "this server runs")
            out.reason = (f"profiling needs the cuda backend (Nsight Compute on an NVIDIA GPU); {where} the "
                          f"{state.backend_name} backend, whose timings are {traits.clock}")
            return out
        folder = store.candidate_dir(run_id, candidate_id)
        progress(1, 3, f"profiling {candidate_id} with Nsight Compute")
        with (state.working(run_id, candidate_id), recorded_if_cancelled(state, run_id, candidate_id, "profile", False),
              state.exclusive() as worker, scratch_dir("cudaopt-profile-") as scratch):
            arch = worker.info.arch
            result = profile_candidate(task, cand, arch, scratch, case_name=case, timeout_s=timeout_s)
            for name in PROFILE_FILES:
                if (scratch / name).is_file():
                    shutil.move(str(scratch / name), folder / name)
        atomic_write(folder / "profile.json", result.model_dump_json(indent=2))
        store.append_history(run_id, {"event": "profile", "candidate_id": candidate_id, "status": result.status,
                                      "case": result.case})
    return _profile_output(out, result, run_id, candidate_id)


def _profile_output(out: ProfileOutput, result: ProfileResult, run_id: str, candidate_id: str) -> ProfileOutput:
    out.available = result.status == "ok"
    out.status, out.case, out.elapsed_s = result.status, result.case, result.elapsed_s
    out.reason = result.message
    if result.summary is not None:
        out.summary = result.summary
        out.summary_text = result.summary.text()
    if result.report_file:
        out.report_uri = S.artifact_uri(run_id, candidate_id, "profile.ncu-rep")
        out.details_uri = S.artifact_uri(run_id, candidate_id, "profile.details.csv")
    return out


def sanitize_step(state: ServerState, run_id: str, candidate_id: str, tools: list[SanitizerTool] | None,
                  cases: list[str] | None, timeout_s: float, progress: Progress = no_progress) -> SanitizeOutput:
    store = state.store
    with store.locked(run_id):
        task, cand = store.task(run_id), load_candidate(state, run_id, candidate_id)
        folder = store.candidate_dir(run_id, candidate_id)
        progress(1, 3, f"sanitizing {candidate_id} on {state.backend_name}")
        with (state.working(run_id, candidate_id), recorded_if_cancelled(state, run_id, candidate_id, "sanitize", False),
              state.exclusive() as worker, scratch_dir("cudaopt-sanitize-") as scratch):
            result = sanitize_candidate(task, cand, worker.backend, scratch, tools=tools, case_names=cases,
                                        timeout_s=timeout_s)
            for log in scratch.glob("*.log"):  # compute-sanitizer's logs; the cpu checks write none
                shutil.move(str(log), folder / f"sanitize-{log.name}")
        atomic_write(folder / "sanitize.json", result.model_dump_json(indent=2))
        store.append_history(run_id, {"event": "sanitize", "candidate_id": candidate_id, "status": result.status})
    return _sanitize_output(result, run_id, candidate_id)


def _sanitize_output(result: SanitizeResult, run_id: str, candidate_id: str) -> SanitizeOutput:
    return SanitizeOutput(run_id=run_id, candidate_id=candidate_id, backend=result.backend, status=result.status,
                          message=result.message, cases=result.cases, text=result.text()[:4000],
                          findings=sum(len(r.findings) for r in result.reports) + len(result.cpu_findings),
                          record_uri=S.artifact_uri(run_id, candidate_id, "sanitize.json"), elapsed_s=result.elapsed_s)
