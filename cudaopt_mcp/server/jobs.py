"""Start-then-poll: work that may outlast a client's tool-call limit (often 60 s).

``start_evaluation`` takes the same arguments as ``evaluate`` (or, with ``what``, runs ``profile`` or
``sanitize`` on a stored candidate), starts the work in a background thread and answers at once with a
``job_id``; ``job`` reports progress and, once finished, the full result (the same structured result the
direct tool returns); ``cancel_job`` stops it within a second (its worker processes are killed). Jobs live
in this server process; their results are also stored in the run like any other, so after a restart
``get_run``/``best`` and the candidate's records still show them.
"""

from __future__ import annotations

import functools
import itertools
import re
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Literal

import anyio
import anyio.from_thread
import anyio.lowlevel
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field

from cudaopt_mcp.api import CaseArg, EvaluateOutput, JobId, Kernel, Launches, ProfileOutput, SanitizeOutput, Scratch
from cudaopt_mcp.server.tool_calls import REFUSALS, refusals_as_tool_errors, state_of, tool, tool_result
from cudaopt_mcp.server.tools import (
    OVERWRITES,
    READ_ONLY,
    Defines,
    Launch,
    Note,
    Options,
    Reps,
    Roles,
    RunId,
    Seed,
    Source,
    Tunables,
    Warmup,
)
from cudaopt_mcp.service import evaluations, inspections
from cudaopt_mcp.service.arguments import CandidateArgs, TimingArgs
from cudaopt_mcp.service.state import ServerState
from harness_tools.errors import Cancelled
from harness_tools.run.cancellation import CancelToken, cancellable

JOB_ID = re.compile(r"^job-\d{4,9}$")
CANCEL_WAIT_S = 5.0  # cancel_job answers once the job has ended (normally milliseconds after the kill)
STOPS_WORK = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
LongTimeout = Annotated[float, Field(gt=0, le=3600, description="seconds for the whole job: the compile and every case "
                                                               "(evaluate), or the tool (profile, sanitize)")]


class JobOutput(BaseModel):
    job_id: str
    run_id: str
    status: Literal["running", "done", "failed", "cancelled"]
    progress: float = Field(description="stages done out of total")
    total: float
    message: str
    elapsed_s: float
    what: Literal["evaluate", "profile", "sanitize"] = "evaluate"
    result: EvaluateOutput | ProfileOutput | SanitizeOutput | None = Field(
        None, description="once done: what evaluate, profile or sanitize returns")
    error: str | None = None
    hint: str | None = None


class _Job:
    def __init__(self, job_id: str, run_id: str, what: str):
        self.job_id, self.run_id, self.what = job_id, run_id, what
        self.started = time.monotonic()
        self.finished: float | None = None
        self.stage: tuple[float, float, str] = (0.0, 4.0, "queued")
        self.result: BaseModel | None = None
        self.error: str | None = None
        self.cancelled = False
        self.token = CancelToken()
        self.ended = threading.Event()
        self.lock = threading.Lock()

    def progress(self, done: float, total: float, message: str) -> None:
        with self.lock:
            self.stage = (done, total, message)

    def snapshot(self) -> JobOutput:
        with self.lock:
            end = self.finished or time.monotonic()
            status = ("cancelled" if self.cancelled else "failed" if self.error else
                      "done" if self.result is not None else "running")
            return JobOutput(job_id=self.job_id, run_id=self.run_id, what=self.what, status=status, progress=self.stage[0],
                             total=self.stage[1], message=self.stage[2], elapsed_s=round(end - self.started, 3),
                             result=self.result, error=self.error,
                             hint="poll job(job_id) again in a few seconds" if status == "running" else None)


class JobTable:
    def __init__(self):
        self._jobs: dict[str, _Job] = {}
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self.on_end: Callable[[str | None], Awaitable[None]] | None = None  # told the run a job wrote, when it ends

    def start(self, state: ServerState, run_id: str, what: str, work: Callable[..., BaseModel]) -> _Job:
        """Run ``work(progress=...)`` in the background; an unknown run is refused now, not inside the job."""
        state.store.run(run_id)
        with self._lock:
            job = _Job(f"job-{next(self._numbers):04d}", run_id, what)
            self._jobs[job.job_id] = job
        loop = anyio.lowlevel.current_token()  # called from the tool, on the server's event loop
        threading.Thread(target=self._work, args=(job, work, self.on_end, loop), name=job.job_id, daemon=True).start()
        return job

    def get(self, job_id: str) -> _Job:
        if not JOB_ID.match(job_id or ""):
            raise ToolError(f"invalid job id {job_id!r} (expected like job-0001)")
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise ToolError(f"unknown job {job_id!r}: jobs live in the server process that started them; after a "
                            "restart, get_run and best show the stored results")
        return job

    @staticmethod
    def _work(job: _Job, work: Callable[..., BaseModel], on_end, loop) -> None:
        JobTable._run(job, work)
        if on_end is not None:
            try:
                anyio.from_thread.run(on_end, job.run_id, token=loop)
            except RuntimeError:  # the server's loop has ended: nobody is listening any more
                pass

    @staticmethod
    def _run(job: _Job, work: Callable[..., BaseModel]) -> None:
        try:
            with cancellable(job.token):
                result = work(progress=job.progress)
            with job.lock:
                job.result = result
        except Cancelled as exc:
            with job.lock:
                job.cancelled, job.stage = True, (job.stage[0], job.stage[1], str(exc))
        except REFUSALS as exc:
            with job.lock:
                job.error = str(exc)
        except Exception as exc:  # noqa: BLE001 - a bug must still end the job visibly, not leave it "running"
            with job.lock:
                job.error = f"internal error: {type(exc).__name__}: {exc}"
        finally:
            with job.lock:
                job.finished = time.monotonic()
            job.ended.set()


def register(server: MCPServer, table: JobTable) -> None:
    @tool(server, annotations=OVERWRITES, title="Start long work in the background")
    async def start_evaluation(ctx: Context, run_id: RunId, source: Source = None, kernel: Kernel = None,
                               launch: Launch = None, launches: Launches = None, scratch: Scratch = None,
                               defines: Defines = None, options: Options = None, tunables: Tunables = None,
                               candidate_id: Annotated[str | None, Field(description="evaluate this stored candidate "
                                                                                     "instead of a new one (required "
                                                                                     "for profile and sanitize)")] = None,
                               note: Note = None, roles: Roles = None, seed: Seed = None, warmup: Warmup = None,
                               reps: Reps = None, timeout_s: LongTimeout = 120.0,
                               what: Annotated[Literal["evaluate", "profile", "sanitize"],
                                               Field(description="the work: evaluate (default), or profile / sanitize "
                                                                 "of candidate_id")] = "evaluate",
                               case: CaseArg = None,
                               sanitizers: Annotated[list[Literal["memcheck", "racecheck", "initcheck", "synccheck"]] | None,
                                                     Field(max_length=4, description="sanitize: the compute-sanitizer "
                                                                                     "tools")] = None,
                               ) -> Annotated[CallToolResult, JobOutput]:
        """Like evaluate (or profile / sanitize with `what`), but for work that may take longer than your
        tool-call limit (big performance cases, many repetitions, slow kernels, racecheck over many cases):
        starts it in the background and returns a job_id at once. Poll job(job_id) every few seconds;
        when its status is "done", its result is exactly what the direct tool would have returned (and
        the run's best and records are updated the same way)."""
        state = state_of(ctx)
        cand = CandidateArgs(source=source, kernel=kernel, launch=launch, launches=launches, scratch=scratch,
                             defines=defines, options=options, tunables=tunables)
        if what == "evaluate":
            timing = TimingArgs(roles=roles, seed=seed, warmup=warmup, reps=reps, timeout_s=timeout_s)
            work = functools.partial(evaluations.execute_step, state, "evaluate", run_id, candidate_id=candidate_id,
                                     candidate=cand, note=note, timing=timing)
        elif candidate_id is None or cand.given():
            raise ToolError(f"{what} works on a stored candidate: give candidate_id (and no new candidate)")
        elif what == "profile":
            work = functools.partial(inspections.profile_step, state, run_id, candidate_id, case, timeout_s)
        else:
            work = functools.partial(inspections.sanitize_step, state, run_id, candidate_id, sanitizers, None,
                                     timeout_s)
        with refusals_as_tool_errors():
            job = table.start(state, run_id, what, work)
        out = job.snapshot()
        return tool_result(out, f"started {out.job_id} ({what}) on {run_id}; poll job(job_id='{out.job_id}')")

    @tool(server, annotations=READ_ONLY, title="Poll background work")
    async def job(job_id: JobId) -> Annotated[CallToolResult, JobOutput]:
        """Progress of background work started with start_evaluation: status running / done / failed, the
        current stage and elapsed time; once done, the complete result (evaluation, profile or sanitize)."""
        out = table.get(job_id).snapshot()
        summary = f"{out.job_id}: {out.what} {out.status} ({out.message}, {out.elapsed_s:.1f} s)"
        if isinstance(out.result, EvaluateOutput):
            summary += f": {'CORRECT' if out.result.correct else 'NOT CORRECT'}"
        elif out.result is not None:
            summary += f": {out.result.status}"
        return tool_result(out, summary, is_error=out.status == "failed")

    @tool(server, annotations=STOPS_WORK, title="Cancel background work")
    async def cancel_job(job_id: JobId) -> Annotated[CallToolResult, JobOutput]:
        """Stop background work started with start_evaluation: its worker processes are killed at once, the
        candidate's records say cancelled (nothing it measured is kept as a result), and the next call can
        use the GPU straight away. Cancelling a finished job changes nothing and says how it ended."""
        job = table.get(job_id)
        job.token.cancel("cancelled with cancel_job")
        await anyio.to_thread.run_sync(job.ended.wait, CANCEL_WAIT_S)
        out = job.snapshot()
        return tool_result(out, f"{out.job_id}: {out.what} {out.status} ({out.message}, {out.elapsed_s:.1f} s)")
