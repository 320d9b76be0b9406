"""The MCP tools: thin async wrappers around :mod:`cudaopt_mcp.service`, with docstrings for the model.

Every tool returns a ``CallToolResult`` whose ``structured_content`` is a pydantic model from
:mod:`cudaopt_mcp.api` (published as its ``outputSchema``), whose text content is a short
summary plus that JSON, and which links big artifacts as ``cudaopt://`` resources. Unknown ids and
bad arguments raise ``ToolError``; a kernel that fails (compile error, mismatch, crash, timeout)
comes back as a result with ``is_error`` set and the evidence in its structured content.
Blocking engine work runs in a worker thread, so the event loop keeps serving other clients.
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from cudaopt_mcp.api import (  # the bounded argument types, shared with jobs.py
    BestOutput,
    CandidateId,
    CaseArg,
    CaseList,
    CompareOutput,
    CompileOutput,
    CreateRunOutput,
    Defines,
    EvaluateOutput,
    GetRunOutput,
    HistoryOutput,
    InlineFiles,
    InlineSpec,
    Kernel,
    Launch,
    Launches,
    ListRunsOutput,
    ListTasksOutput,
    Note,
    Options,
    PageCursor,
    ProfileOutput,
    Reps,
    Roles,
    RunId,
    SanitizeOutput,
    Scratch,
    Seed,
    Source,
    StoredCandidateId,
    TaskListing,
    TaskRef,
    Timeout,
    Tunables,
    Warmup,
)
from cudaopt_mcp.api_pages import CORRECT_LISTED
from cudaopt_mcp.server.tool_calls import run_blocking, state_of, tool, tool_result
from cudaopt_mcp.service import candidates, evaluations, inspections, pages, run_creation
from cudaopt_mcp.service import views as S
from cudaopt_mcp.service.arguments import CandidateArgs, TimingArgs
from harness_tools import backend_traits, bundled_task_names, resolve_task

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
ADDITIVE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
# Tools that rewrite a candidate's stored records (evaluation.json, kept outputs, profile.json...) are destructive
# in the spec's sense: the previous record is replaced. Those giving the same record for the same call are idempotent.
OVERWRITES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)
OVERWRITES_IDEMPOTENT = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                                        open_world_hint=False)


def _eval_summary(out: EvaluateOutput) -> str:
    head = f"{out.run_id}/{out.candidate_id} ({out.step} on {out.backend}, {'/'.join(out.roles)}): "
    if not out.compile.ok:
        return head + f"COMPILE {out.compile.status.upper()}: {out.compile.first_error}"
    if not out.correct:
        return head + f"NOT CORRECT: {out.failure}"
    parts = [head + "CORRECT"]
    if out.score_ms is not None:
        ci = f" [{out.score_ci_ms[0]:.4g}, {out.score_ci_ms[1]:.4g}]" if out.score_ci_ms else ""
        parts.append(f"score {out.score_ms:.4g} ms{ci} ({out.clock})")
    if out.speedup_vs_baseline:
        parts.append(f"{out.speedup_vs_baseline:.3g}x baseline")
    if out.best_decision:
        parts.append(out.best_decision[:300])
    elif out.step == "run":
        parts.append("outputs stored; compare gives the error statistics")
    note = backend_traits(out.backend).timing_note if out.score_ms is not None else None
    return " · ".join(parts + ([note] if note else []))


def _eval_links(out: EvaluateOutput) -> list[tuple[str, str, str]]:
    links = [(out.source_uri, f"{out.candidate_id}/kernel.cu", "text/x-cuda")]
    if not out.compile.ok:
        links.append((S.artifact_uri(out.run_id, out.candidate_id, "compile.log"), "compile.log", "text/plain"))
    if out.record_uri:
        links.append((out.record_uri, out.record_uri.rsplit("/", 1)[-1], "application/json"))
    return links


def register(server: MCPServer) -> None:
    @tool(server, annotations=READ_ONLY, title="List bundled tasks")
    async def list_tasks() -> Annotated[CallToolResult, ListTasksOutput]:
        """List the bundled kernel-optimisation tasks (name, kernel, case counts, tunable parameters).

        Start here, then call create_run with a task name. A task fixes the kernel's signature, its
        validation cases (correctness only) and performance cases (timed), the float64 reference and the
        tolerances."""
        rows = []
        for name in bundled_task_names():
            spec = resolve_task(name).spec
            rows.append(TaskListing(
                name=name, kernel_name=spec.kernel_name, summary=spec.description.split(". ")[0][:300],
                validation_cases=sum(c.role == "validation" for c in spec.cases),
                performance_cases=sum(c.role == "performance" for c in spec.cases),
                tunables=sorted(spec.tunables.params) if spec.tunables else []))
        out = ListTasksOutput(tasks=rows, hint="create_run(task=<name>) starts a run; a stdio client may also pass "
                                               "a task folder path or an inline spec")
        return tool_result(out, f"{len(rows)} tasks: {', '.join(r.name for r in rows)}")

    @tool(server, annotations=ADDITIVE, title="Create an optimisation run")
    async def create_run(
        ctx: Context,
        task: TaskRef = None,
        spec: InlineSpec = None,
        files: InlineFiles = None,
        max_candidates: Annotated[int | None, Field(ge=1, le=100000, description="budget of candidates")] = None,
    ) -> Annotated[CallToolResult, CreateRunOutput]:
        """Start a new optimisation run for a task and return its run_id.

        The run lives on disk (results/run-XXX) and survives server restarts: keep the run_id and pass it
        to every other tool. The result includes the kernel signature every candidate must match exactly,
        the cases, tolerances and the baseline launch configuration. Next step: evaluate(run_id) with no
        source measures the baseline."""
        out = await run_blocking(None, run_creation.create_run, state_of(ctx), task, spec, files, max_candidates)
        return tool_result(out, f"created {out.run_id} for task {out.task.name} on the {out.backend} backend; "
                            f"signature: {out.task.signature}",
                       [(out.task.baseline_source_uri, "baseline source", "text/x-cuda")])

    @tool(server, annotations=READ_ONLY, title="List runs")
    async def list_runs(ctx: Context, cursor: PageCursor = None) -> Annotated[CallToolResult, ListRunsOutput]:
        """List the runs stored by this server (oldest first) with their best candidate and budget, a page at a
        time: pass next_cursor back as cursor for the next page (no next_cursor: the last page; total counts all).

        Use it to continue earlier work: any run_id listed here can be passed to the other tools."""
        out = await run_blocking(None, pages.runs_page, state_of(ctx), cursor)
        ids = ", ".join(r.run_id + " " + r.task for r in out.runs) or "none"
        more = f"; more: cursor={out.next_cursor}" if out.next_cursor else ""
        return tool_result(out, f"{len(out.runs)} of {out.total} runs: {ids}{more}")

    @tool(server, annotations=READ_ONLY, title="Show a run")
    async def get_run(ctx: Context, run_id: RunId) -> Annotated[CallToolResult, GetRunOutput]:
        """Show one run: the task (signature, cases, tolerances, baseline launch), the budget, the best
        candidate so far with its speed-up over the baseline, the latest candidates with their status
        (compiled, compile_error, correct, incorrect, interrupted, ...) and a digest of the history."""
        state = state_of(ctx)

        def collect() -> GetRunOutput:
            record = state.store.run(run_id)
            info = S.run_info(state.store, record, state.backend_name, state.is_active)
            digest = [S.history_line(e) for e in state.store.history(run_id, limit=12)]
            return GetRunOutput(run=info, task=S.task_summary(state.store.task(run_id), run_id), history_digest=digest)
        out = await run_blocking(None, collect)
        best = f"best {out.run.best.candidate_id} at {out.run.best.score_ms:.4g} ms" if out.run.best else "no best yet"
        return tool_result(out, f"{run_id}: task {out.run.task}, {out.run.candidates} candidates, {best}",
                       [(out.run.uri, run_id, "application/json")])

    @tool(server, name="compile", annotations=OVERWRITES_IDEMPOTENT, title="Compile a candidate")
    async def compile_tool(ctx: Context, run_id: RunId, source: Source = None, kernel: Kernel = None,
                           launch: Launch = None, launches: Launches = None, scratch: Scratch = None,
                           defines: Defines = None, options: Options = None, tunables: Tunables = None,
                           note: Note = None) -> Annotated[CallToolResult, CompileOutput]:
        """Compile a candidate kernel with NVRTC for the server's GPU and store it in the run.

        Returns candidate_id and the compile report: ok, registers, spills, stack, static shared memory,
        the first error line and an excerpt of the log (full log at log_uri). Compiling the same content
        again returns the same candidate_id. A compile error is returned as an error result with the log
        line to fix. Use evaluate (or run/compare/time) with the candidate_id to test it."""
        cand = CandidateArgs(source=source, kernel=kernel, launch=launch, launches=launches, scratch=scratch,
                             defines=defines, options=options, tunables=tunables)
        out: CompileOutput = await run_blocking(None, candidates.compile_step, state_of(ctx), run_id, cand, note)
        r = f"{out.registers} registers, {out.spill_store_bytes or 0} B spills" if out.ok else out.first_error
        return tool_result(out, f"{run_id}/{out.candidate_id}: compile {out.status}: {r}",
                       [(out.source_uri, "kernel.cu", "text/x-cuda"), (out.log_uri, "compile.log", "text/plain")],
                       is_error=not out.ok)

    @tool(server, annotations=OVERWRITES, title="Evaluate a candidate")
    async def evaluate(ctx: Context, run_id: RunId, source: Source = None, kernel: Kernel = None,
                       launch: Launch = None, launches: Launches = None, scratch: Scratch = None,
                       defines: Defines = None, options: Options = None, tunables: Tunables = None,
                       candidate_id: StoredCandidateId = None,
                       note: Note = None, roles: Roles = None, seed: Seed = None, warmup: Warmup = None,
                       reps: Reps = None, timeout_s: Timeout = 30.0) -> Annotated[CallToolResult, EvaluateOutput]:
        """The common path: compile → run → compare with the reference → time, in one call.

        Pass a new candidate (source and/or launch/defines/options/tunables; omitted parts come from the
        task's baseline) or a stored candidate_id. Fresh seeded inputs every time. Returns per-case status
        (passed / mismatch / run_error / corrupted / skipped) with max abs/rel error, the first mismatching
        element, CUDA error names, per-case median latency, the score (geometric mean of performance
        medians, only when everything passed), speed-ups vs the run's baseline and best, and registers.
        A candidate clearly slower than the run's best on a performance case (its median's interval
        wholly above the best's median there plus a margin, 10 % by default) stops being timed there
        early, and the case says so (timing_stopped); so does a slow kernel's case, timed for about 50 ms
        (at least 10 launches) instead of every planned launch. time always times the full plan. A candidate that
        does not compile or is not correct is returned as an error result with the
        evidence. On the cpu backend the validation cases and the performance cases sized for a CPU run;
        its timings are CPU wall clock and rank CPU execution, not GPU speed.
        Typically a few seconds; progress notifications are sent while it runs."""
        cand = CandidateArgs(source=source, kernel=kernel, launch=launch, launches=launches, scratch=scratch,
                             defines=defines, options=options, tunables=tunables)
        timing = TimingArgs(roles=roles, seed=seed, warmup=warmup, reps=reps, timeout_s=timeout_s)
        out: EvaluateOutput = await run_blocking(ctx, evaluations.execute_step, state_of(ctx), "evaluate", run_id,
                                                 candidate_id=candidate_id, candidate=cand, note=note, timing=timing)
        return tool_result(out, _eval_summary(out), _eval_links(out), is_error=not out.correct)

    @tool(server, name="run", annotations=OVERWRITES, title="Run a candidate (no timing)")
    async def run_tool(ctx: Context, run_id: RunId, candidate_id: CandidateId, roles: Roles = None,
                       seed: Seed = None, timeout_s: Timeout = 30.0) -> Annotated[CallToolResult, EvaluateOutput]:
        """Execute a compiled candidate once per case on fresh inputs and store its outputs (no timing).

        Reports per case whether the launch worked (a crash, hang or illegal address is named, e.g.
        CUDA_ERROR_ILLEGAL_ADDRESS or TIMEOUT; out-of-bounds writes and modified inputs are caught). Launch
        failures come back as an error result. Then call compare for error statistics against the reference,
        and time for latencies; evaluate does all three in one call."""
        out: EvaluateOutput = await run_blocking(ctx, evaluations.execute_step, state_of(ctx), "run", run_id,
                                                 candidate_id=candidate_id,
                                                 timing=TimingArgs(roles=roles, seed=seed, timeout_s=timeout_s))
        failed = not out.compile.ok or any(c.status in ("run_error", "corrupted") for c in out.cases)
        return tool_result(out, _eval_summary(out), _eval_links(out), is_error=failed)

    @tool(server, annotations=READ_ONLY, title="Compare outputs with the reference")
    async def compare(ctx: Context, run_id: RunId, candidate_id: CandidateId) -> Annotated[CallToolResult, CompareOutput]:
        """Per-case error statistics of a candidate's latest stored outputs against the float64 reference.

        For every case: passed or not, max absolute and relative error, number of mismatching elements,
        and the first mismatching element (index, got, expected). Reads what the latest run, evaluate or
        time stored (it launches nothing). A mismatch is returned as an error result."""
        out: CompareOutput = await run_blocking(None, evaluations.compare_step, state_of(ctx), run_id, candidate_id)
        bad = next((c for c in out.cases if not c.passed), None)
        summary = (f"{run_id}/{candidate_id}: all {len(out.cases)} cases within tolerance" if out.correct
                   else f"{run_id}/{candidate_id}: case {bad.name if bad else '?'}: {bad.message if bad else 'failed'}")
        return tool_result(out, summary, [(out.record_uri, out.source_record, "application/json")], is_error=not out.correct)

    @tool(server, name="time", annotations=OVERWRITES, title="Time a candidate")
    async def time_tool(ctx: Context, run_id: RunId, candidate_id: CandidateId, warmup: Warmup = None,
                        reps: Reps = None, seed: Seed = None,
                        timeout_s: Timeout = 30.0) -> Annotated[CallToolResult, EvaluateOutput]:
        """Time a compiled candidate on the performance cases: per-case median, min, IQR, CV and the score.

        Each timed launch starts with a flushed L2; outputs are checked too. The score counts towards the
        run's best only if the candidate has passed its validation cases (run or evaluate) before. On the
        cpu backend performance cases are large for a CPU and can take long; timings are CPU wall clock."""
        timing = TimingArgs(roles=["performance"], seed=seed, warmup=warmup, reps=reps, timeout_s=timeout_s)
        out: EvaluateOutput = await run_blocking(ctx, evaluations.execute_step, state_of(ctx), "time", run_id,
                                                 candidate_id=candidate_id, timing=timing)
        return tool_result(out, _eval_summary(out), _eval_links(out), is_error=not out.correct)

    @tool(server, annotations=OVERWRITES_IDEMPOTENT, title="Profile with Nsight Compute")
    async def profile(ctx: Context, run_id: RunId, candidate_id: CandidateId,
                      case: CaseArg = None,
                      timeout_s: Annotated[float, Field(gt=0, le=600, description="seconds before ncu is killed")] = 300.0,
                      ) -> Annotated[CallToolResult, ProfileOutput]:
        """Nsight Compute profile of one warm launch of a candidate on one performance case (cuda backend).

        Returns a compact summary: duration, SM / memory / DRAM throughput as % of peak and whether the
        kernel is memory-, compute- or latency-bound, achieved vs theoretical occupancy and what limits it,
        registers and shared memory per block, the top warp stall reasons, L1/L2 hit rates, shared-memory
        bank conflicts, its place on the roofline (task FLOPs/bytes against the peaks) and Nsight
        Compute's top recommendations. The full report is linked (report_uri). Clocks are not locked, so
        durations match the event timings. Takes 10-60 s; profiling time never counts in scores. Without
        ncu, without permission to read GPU counters, or on the cpu backend it says so and what to do."""
        out: ProfileOutput = await run_blocking(ctx, inspections.profile_step, state_of(ctx), run_id, candidate_id,
                                             case, timeout_s)
        links = [(u, n, m) for u, n, m in ((out.report_uri, "profile.ncu-rep", "application/octet-stream"),
                                           (out.details_uri, "profile.details.csv", "text/csv")) if u]
        summary = (f"{run_id}/{candidate_id} profile ({out.case}):\n{out.summary_text}" if out.summary_text
                   else f"profile {out.status}: {out.reason}")
        return tool_result(out, summary, links, is_error=not out.available)

    @tool(server, annotations=OVERWRITES_IDEMPOTENT, title="Sanitize a candidate")
    async def sanitize(ctx: Context, run_id: RunId, candidate_id: CandidateId,
                       tools: Annotated[list[Literal["memcheck", "racecheck", "initcheck", "synccheck"]] | None,
                                        Field(max_length=4, description="compute-sanitizer tools (cuda backend; "
                                                                        "default: all four)")] = None,
                       cases: CaseList = None,
                       timeout_s: Annotated[float, Field(gt=0, le=600, description="seconds per tool")] = 180.0,
                       ) -> Annotated[CallToolResult, SanitizeOutput]:
        """Check a candidate for memory errors, data races, uninitialised reads and barrier misuse.

        cuda backend: NVIDIA compute-sanitizer memcheck (out-of-bounds/misaligned accesses), racecheck
        (shared-memory races), initcheck (uninitialised global reads) and synccheck (invalid
        __syncthreads) over the validation cases, the kernel compiled with line information. cpu
        backend: ThreadSanitizer race check and guarded buffers (out-of-bounds with argument, block and
        thread; divergent barriers). Findings name the kernel.cu line. A kernel that is fast because it
        races or reads out of bounds must not win: run this on a new best. Findings are an error result."""
        out: SanitizeOutput = await run_blocking(ctx, inspections.sanitize_step, state_of(ctx), run_id, candidate_id,
                                              tools, cases, timeout_s)
        return tool_result(out, out.text[:1500], [(out.record_uri, "sanitize.json", "application/json")],
                       is_error=out.status != "clean")

    @tool(server, annotations=READ_ONLY, title="Run history")
    async def history(ctx: Context, run_id: RunId,
                      offset: Annotated[int, Field(ge=0, description="index of the first event")] = 0,
                      limit: Annotated[int, Field(ge=1, le=100, description="events per page (at most)")] = 30,
                      cursor: PageCursor = None,
                      ) -> Annotated[CallToolResult, HistoryOutput]:
        """The run's append-only event history (created, candidate, compiled, evaluate, run, time, best),
        oldest first, one page at a time: pass next_cursor back as cursor (or next_offset as offset) for the
        next page; none means the last page. A page stops early rather than grow past ~30,000 characters."""
        out = await run_blocking(None, pages.history_tool_page, state_of(ctx), run_id, offset, limit, cursor)
        more = f"; next_cursor={out.next_cursor}" if out.next_cursor else ""
        return tool_result(out, f"{run_id}: events {out.offset}..{out.offset + len(out.events)} of {out.total}{more}")

    @tool(server, annotations=READ_ONLY, title="Best candidate")
    async def best(ctx: Context, run_id: RunId) -> Annotated[CallToolResult, BestOutput]:
        """The run's best candidate: the fastest one that passed every check, with its score, speed-up over
        the baseline, launch configuration and defines (source at source_uri), plus every candidate whose
        latest record is correct (the newest 200; correct_total counts them all). On the cpu backend with
        validation-only evaluations there is no score and so no best; correct_candidates still lists the
        correct ones."""
        state = state_of(ctx)

        def collect() -> BestOutput:
            store = state.store
            record = store.best(run_id)
            correct = [c for c in store.candidate_ids(run_id)
                       if S.candidate_brief(store, run_id, c, state.is_active(run_id, c)).status == "correct"]
            out = BestOutput(run_id=run_id, best=S.best_info(store, run_id, record),
                             correct_candidates=correct[-CORRECT_LISTED:], correct_total=len(correct))
            if record is not None:
                cand = candidates.load_candidate(state, run_id, record.candidate_id)
                out.kernel, out.launch, out.defines = cand.kernel_name, cand.launch, dict(cand.defines)
                out.launches, out.scratch = cand.launches, list(cand.scratch)
            else:
                out.note = "no scored correct candidate yet (a score needs timed performance cases)"
            return out
        out = await run_blocking(None, collect)
        correct = ", ".join(out.correct_candidates[-10:]) or "none"
        if out.correct_total and out.correct_total > 10:
            correct = f"{out.correct_total}, the newest {correct}"
        summary = (f"{run_id}: best {out.best.candidate_id} at {out.best.score_ms:.4g} ms" if out.best
                   else f"{run_id}: no best yet; correct: {correct}")
        links = [(out.best.source_uri, "best kernel.cu", "text/x-cuda")] if out.best else []
        return tool_result(out, summary, links)
