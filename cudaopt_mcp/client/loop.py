"""The autonomous loop of ``cudaopt optimize``: baseline, then propose → evaluate → feed back, through MCP.

Inputs: all evaluations of one invocation use one input seed (chosen here unless given), so every
candidate is judged on the same data and the server's oracle cache is reused; at the end the best
candidate is evaluated once more on fresh inputs (a new seed) before it is reported as confirmed.
The loop stops at the iteration budget, at the time budget, or when the proposer has nothing new.

Pipeline (a proposer that proposes ahead, on GPU backends by default): while an iteration's candidate is evaluated,
the next ones are chosen (from the same attempts they would have seen before it started) and compiled, so neither
the proposer's model nor the compiler waits on the GPU, nor the GPU on them; the next evaluated is the first of
them compiled, not one still compiling. The first ones are chosen and compiled while the baseline is evaluated.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from cudaopt_mcp.api import (
    BestOutput,
    CompileOutput,
    CreateRunOutput,
    EvaluateOutput,
    GetRunOutput,
    HistoryOutput,
    ProfileOutput,
    TaskSummary,
    artifact_uri,
    best_export_uri,
)
from cudaopt_mcp.client.loop_models import LoopConfig, LoopSummary, search_timing
from cudaopt_mcp.client.proposal import Attempt, NoProposal, Proposal, ProposalContext
from cudaopt_mcp.client.proposers import NeedsTaskParts, Proposer, ProposesAhead, ReportsUsage
from cudaopt_mcp.client.session import Session
from cudaopt_mcp.client.terminal import Terminal
from cudaopt_mcp.errors import ProposerUnavailable, SessionError


async def optimise(session: Session, proposer: Proposer, config: LoopConfig, terminal: Terminal) -> LoopSummary:
    started = time.monotonic()
    run_id, backend, task = await _open_run(session, config)
    problem = proposer.task_problem(task) if isinstance(proposer, NeedsTaskParts) else None
    if problem:  # said before any work is done, with what to do instead
        raise ProposerUnavailable(f"{problem} (run {run_id} was opened and left untouched)")
    run_dir = config.results / run_id
    seed = config.seed if config.seed is not None else random.randrange(1, 2**31)
    attempts = await _prior_attempts(session, run_id)
    terminal.start(run_id, task.name, backend, proposer.describe(), config.max_iterations, seed, resumed=bool(attempts))
    for attempt in attempts:
        proposer.observe(attempt)
    stopped = f"iteration budget of {config.max_iterations} used"
    ahead: dict[int, _Ahead] = {}  # later iterations' proposals, chosen and compiling meanwhile
    depth = _ahead_depth(config, backend) if isinstance(proposer, ProposesAhead) else 0
    async with anyio.create_task_group() as compiles, anyio.create_task_group() as now:
        async def choose_ahead(first: int, last: int, evaluated_below: int) -> None:
            """Choose iterations ``first``..``last`` not chosen yet, one at a time (a proposer is not thread-safe):
            those below ``evaluated_below`` are evaluated beside the current one (--parallel), the rest compiled."""
            for following in range(first, min(last, config.max_iterations) + 1):
                if following not in ahead:
                    context = await _context(session, proposer, config, run_id, backend, task, following, attempts,
                                             run_dir)
                    ahead[following] = entry = await _propose_ahead(proposer, context)
                    if following < evaluated_below:
                        compiles.start_soon(_evaluate_ahead, session, run_id, entry, following, seed, terminal,
                                            _search_timing(config, backend))
                    else:
                        compiles.start_soon(_compile_ahead, session, run_id, entry)

        if not any(a.proposal is None and a.correct for a in attempts):
            found: list[Attempt] = []
            async with anyio.create_task_group() as first:  # the first candidates compile while it is evaluated
                first.start_soon(_evaluate_into, found, session, run_id, seed, terminal, _search_timing(config, backend))
                if config.parallel == 1:
                    await choose_ahead(1, depth, evaluated_below=1)
            attempts.append(found[0])
            proposer.observe(attempts[-1])
            _journal(run_dir, attempts[-1])
        for iteration in range(1, config.max_iterations + 1):
            if config.time_budget_s is not None and time.monotonic() - started > config.time_budget_s:
                stopped = f"time budget of {config.time_budget_s:g} s used"
                break
            entry = None
            if iteration in ahead:  # compiled first (else its evaluate would compile it a second time), or evaluated
                entry = await _first_compiled(ahead, iteration) if config.parallel == 1 else ahead.pop(iteration)
                await entry.compiled.wait()
                proposal = entry.proposal
            else:
                terminal.proposing(iteration)
                context = await _context(session, proposer, config, run_id, backend, task, iteration, attempts, run_dir)
                proposal = await anyio.to_thread.run_sync(proposer.propose, context)
            if isinstance(proposal, NoProposal) and proposal.kind == "exhausted":
                stopped = f"the proposer has nothing new: {proposal.reason}"
                break
            if isinstance(proposal, NoProposal):
                attempt = Attempt(iteration=iteration, status="unusable_reply", failure=proposal.reason)
                terminal.attempt(attempt)
            else:
                if entry is None or entry.attempt is None:  # evaluated while the next ones are chosen: the
                    entry = _Ahead(proposal)                 # proposer's time is then off the critical path
                    now.start_soon(_evaluate_ahead, session, run_id, entry, iteration, seed, terminal,
                                   _search_timing(config, backend))
                await choose_ahead(iteration + 1, iteration + depth, evaluated_below=iteration + config.parallel)
                await entry.compiled.wait()  # set once evaluated
                attempt = entry.attempt
            attempts.append(attempt)
            proposer.observe(attempt)
            _journal(run_dir, attempt)
            if backend == "cuda" and _profile_due(config.profile_every, iteration, attempts):
                await _profile_best(session, run_id, attempts, terminal)
        compiles.cancel_scope.cancel()  # proposals left over when a budget stops the loop are not waited for
    if config.max_iterations == 0:
        stopped = "no iterations asked for"
    best = await _server_best(session, run_id, attempts)
    confirmation = None
    if config.confirm and best is not None and best.candidate_id:
        confirmation = await _evaluate(session, run_id, None, best.iteration, None, terminal,
                                       candidate_id=best.candidate_id, label="confirm")
    summary = LoopSummary(
        run_id=run_id, task=task.name, backend=backend, proposer=proposer.name, proposer_detail=proposer.describe(),
        seed=seed, stopped=stopped, baseline=_baseline(attempts), best=best, confirmation=confirmation,
        attempts=attempts, found_correct=any(a.correct for a in attempts) and (confirmation is None or confirmation.correct),
        elapsed_s=round(time.monotonic() - started, 2), clock=_clock(attempts),
        usage=proposer.usage().model_dump() if isinstance(proposer, ReportsUsage) else None)
    summary.best_kernel = await _best_kernel(session, run_id, run_dir, best)
    _keep_summary(run_dir, summary)
    return summary


async def _context(session: Session, proposer: Proposer, config: LoopConfig, run_id: str, backend: str,
                   task: TaskSummary, iteration: int, attempts: list[Attempt], run_dir: Path) -> ProposalContext:
    return ProposalContext(
        run_id=run_id, backend=backend, task=task, iteration=iteration, max_iterations=config.max_iterations,
        attempts=list(attempts), best=_best(attempts), baseline=_baseline(attempts),
        prompt=await session.prompt("optimize", run_id=run_id, mode="reply") if getattr(proposer, "reads_prompt", True) else "",
        requests_dir=run_dir / "requests")


def _with_hints(failure: str | None, hints: list[str] | None) -> str | None:
    """The failure as the proposer reads it, with where the evidence points."""
    return failure + "".join(f"\nhint: {h}" for h in hints) if failure and hints else failure


@dataclass
class _Ahead:
    proposal: Proposal | NoProposal
    compiled: anyio.Event = field(default_factory=anyio.Event)  # set when compiled, or when evaluated
    attempt: Attempt | None = None  # its evaluation, when it was evaluated ahead (--parallel)


def _ahead_depth(config: LoopConfig, backend: str) -> int:
    """Candidates chosen ahead: with --parallel N the N - 1 evaluated beside the current one (each evaluation
    compiles its own); else those compiled ahead when compile-ahead is on (by default on GPU backends only)."""
    if config.parallel > 1:
        return config.parallel - 1
    on = config.compile_ahead if config.compile_ahead is not None else backend != "cpu"
    if not on:
        return 0
    return config.ahead if config.ahead is not None else max(1, min(4, os.cpu_count() or 1))


async def _first_compiled(ahead: dict[int, _Ahead], iteration: int) -> _Ahead:
    """The candidate chosen ahead that ``iteration`` evaluates: its own once compiled, else a later one already
    compiled, else whichever compiles first; the others keep their places. Their order is only the order they were
    chosen in (each from the attempts known then, the rest pending), so one slow compile (convolution's larger
    tiles: over a second of NVRTC for a case) holds back no evaluation that could run meanwhile. A later slot that
    holds no proposal (the proposer had nothing new) is not moved forward: the loop would stop before the rest."""
    waiting = [k for k in sorted(ahead) if k == iteration or (k > iteration and isinstance(ahead[k].proposal, Proposal))]
    while not any(ahead[k].compiled.is_set() for k in waiting):
        async with anyio.create_task_group() as group:
            for k in waiting:
                group.start_soon(_cancel_when_set, ahead[k].compiled, group.cancel_scope)
    ready = next(k for k in waiting if ahead[k].compiled.is_set())
    ahead[iteration], ahead[ready] = ahead[ready], ahead[iteration]
    return ahead.pop(iteration)


async def _cancel_when_set(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


async def _propose_ahead(proposer: ProposesAhead, context: ProposalContext) -> _Ahead:
    return _Ahead(await anyio.to_thread.run_sync(proposer.propose_ahead, context))


async def _evaluate_into(found: list[Attempt], session: Session, run_id: str, seed: int, terminal: Terminal,
                         timing: dict[str, int]) -> None:
    found.append(await _evaluate(session, run_id, None, 0, seed, terminal, timing=timing))


async def _evaluate_ahead(session: Session, run_id: str, entry: _Ahead, iteration: int, seed: int, terminal: Terminal,
                          timing: dict[str, int]) -> None:
    """Evaluate a candidate chosen ahead while the current one is evaluated (the server runs each on a worker of
    its pool); its iteration then takes the attempt instead of evaluating."""
    try:
        if isinstance(entry.proposal, Proposal):
            entry.attempt = await _evaluate(session, run_id, entry.proposal, iteration, seed, terminal, timing=timing)
    finally:
        entry.compiled.set()


async def _compile_ahead(session: Session, run_id: str, entry: _Ahead) -> None:
    """Compile a candidate chosen ahead while earlier ones are evaluated: its evaluate then finds the cubin in the
    server's compile cache (the server compiles outside the run's lock, on its compiler pool)."""
    try:
        if isinstance(entry.proposal, Proposal):
            await session.call("compile", CompileOutput, run_id=run_id, **entry.proposal.tool_arguments())
    except SessionError:
        pass  # refused: its evaluate says why, as an attempt
    finally:
        entry.compiled.set()


async def _open_run(session: Session, config: LoopConfig) -> tuple[str, str, TaskSummary]:
    if config.run_id:
        got = (await session.call("get_run", GetRunOutput, run_id=config.run_id)).data
        return _run_id(got.run.run_id), got.run.backend, got.task
    made = (await session.call("create_run", CreateRunOutput, task=config.task)).data
    return _run_id(made.run_id), made.backend, made.task


_RUN_ID = re.compile(r"run-[0-9]{3,9}", re.ASCII)


def _run_id(value: object) -> str:
    """The server's run id names a folder under --results here: only an id like run-001 is used."""
    if not isinstance(value, str) or not _RUN_ID.fullmatch(value):
        raise SessionError(f"the server answered with run id {str(value)[:80]!r}, which is not like run-001; it "
                           "would name a folder outside --results")
    return value


def _search_timing(config: LoopConfig, backend: str) -> dict[str, int]:
    return search_timing(config.warmup, config.reps, backend)


async def _evaluate(session: Session, run_id: str, proposal: Proposal | None, iteration: int, seed: int | None,
                    terminal: Terminal, candidate_id: str | None = None, label: str | None = None,
                    timing: dict[str, int] | None = None) -> Attempt:
    """One evaluate call; a refusal (invalid candidate, exhausted budget) is an attempt too, not a crash."""
    terminal.evaluating(iteration, label or ("baseline" if proposal is None and candidate_id is None else None))
    started = time.monotonic()
    args = proposal.tool_arguments() if proposal else {}
    if proposal is None and candidate_id is None:
        args["note"] = "baseline"
    try:
        outcome = await session.call("evaluate", EvaluateOutput, progress=terminal.progress, run_id=run_id,
                                     seed=seed, candidate_id=candidate_id, **(timing or {}), **args)
    except SessionError as exc:
        attempt = Attempt(iteration=iteration, proposal=proposal, status="refused", failure=str(exc),
                          elapsed_s=round(time.monotonic() - started, 2))
        terminal.attempt(attempt)
        return attempt
    attempt = attempt_from_evaluation(iteration, proposal, outcome.data)
    attempt.elapsed_s = round(time.monotonic() - started, 2)
    terminal.attempt(attempt, label)
    return attempt


def attempt_from_evaluation(iteration: int, proposal: Proposal | None, out: EvaluateOutput) -> Attempt:
    compiled = out.compile
    if not compiled.ok:
        status = "refused" if compiled.status == "refused" else "compile_error"
    else:
        status = "correct" if out.correct else "incorrect"
    return Attempt(
        iteration=iteration, proposal=proposal, candidate_id=out.candidate_id, status=status,
        correct=out.correct, score_ms=out.score_ms, new_best=out.new_best,
        speedup_vs_baseline=out.speedup_vs_baseline, speedup_vs_best=out.speedup_vs_best,
        registers=compiled.registers, spill_bytes=compiled.spill_store_bytes, evaluation=out,
        case_medians_ms={c.name: c.median_ms for c in out.cases if c.median_ms is not None},
        failure=_with_hints(out.failure or (compiled.first_error if status == "compile_error" else None), out.hints))


async def _prior_attempts(session: Session, run_id: str) -> list[Attempt]:
    """A continued run's candidates as attempts (latest evaluation of each), so nothing is proposed twice."""
    events: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None:
        page = (await session.call("history", HistoryOutput, run_id=run_id, offset=offset, limit=100)).data
        events += page.events  # events stay dicts: the schema leaves each event's fields open
        offset = page.next_offset
    latest: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.get("event") in ("candidate", "evaluate", "compiled") and event.get("candidate_id"):
            latest.setdefault(event["candidate_id"], {}).update(event)
    attempts = []
    for number, (cid, event) in enumerate(latest.items()):
        meta = json.loads(await session.resource_text(artifact_uri(run_id, cid, "candidate.json")))
        proposal = _proposal_from_meta(meta)
        correct = bool(event.get("correct"))
        status = "correct" if correct else ("compile_error" if event.get("status") == "error" else "incorrect")
        attempts.append(Attempt(iteration=-(len(latest) - number), proposal=proposal, candidate_id=cid, status=status,
                                correct=correct, score_ms=event.get("score_ms"), failure=event.get("failure")))
    return attempts


def _proposal_from_meta(meta: dict[str, Any]) -> Proposal | None:
    if meta.get("baseline"):
        return None
    if meta.get("tunables"):
        return Proposal(tunables=meta["tunables"], note=meta.get("note") or "")
    cand = meta.get("candidate") or {}
    return Proposal(source=cand.get("source"), launch=cand.get("launch"), launches=cand.get("launches"),
                    scratch=cand.get("scratch") or None, defines=cand.get("defines") or None,
                    options=cand.get("options") or None, note=(meta.get("note") or "")[:500])


def _profile_due(every: int | None, iteration: int, attempts: list[Attempt]) -> bool:
    """After each improvement by default; every N iterations when asked (if the best is not profiled yet)."""
    best = _best(attempts)
    if every == 0 or best is None or best.profile is not None:
        return False
    return attempts[-1].new_best if every is None else iteration % every == 0


async def _profile_best(session: Session, run_id: str, attempts: list[Attempt], terminal: Terminal) -> None:
    """Nsight Compute on the best candidate; the server's prompt shows its summary to the next proposal."""
    best = _best(attempts)
    terminal.evaluating(best.iteration, f"profiling {best.candidate_id}")
    try:
        out = (await session.call("profile", ProfileOutput, run_id=run_id, candidate_id=best.candidate_id)).data
    except SessionError as exc:
        best.profile = f"profile refused: {exc}"
        return
    best.profile = out.summary_text or f"profile {out.status}: {out.reason}"
    terminal.note(f"profile of {best.candidate_id}: " + best.profile.splitlines()[0][:150])


def _best(attempts: list[Attempt]) -> Attempt | None:
    """The latest attempt the server crowned (a lower number inside the noise is not a new best); before any
    crowning in this loop (a resumed run), the fastest correct one."""
    crowned = [a for a in attempts if a.new_best and a.correct]
    if crowned:
        return crowned[-1]
    scored = [a for a in attempts if a.correct and a.score_ms is not None]
    return min(scored, key=lambda a: a.score_ms or 0.0) if scored else None


async def _server_best(session: Session, run_id: str, attempts: list[Attempt]) -> Attempt | None:
    """The run's best as the server decided it (beyond the noise, head-to-head, hidden shapes passed), with the
    server's recorded score: not simply the lowest number this loop saw."""
    info = (await session.call("best", BestOutput, run_id=run_id)).data.best
    if info is None:
        return None
    mine = next((a for a in reversed(attempts) if a.candidate_id == info.candidate_id and a.correct), None)
    if mine is None:
        return None
    return mine.model_copy(update={"score_ms": info.score_ms, "speedup_vs_baseline": info.speedup_vs_baseline})


def _baseline(attempts: list[Attempt]) -> Attempt | None:
    return next((a for a in reversed(attempts) if a.proposal is None and a.candidate_id and a.correct), None)


def _clock(attempts: list[Attempt]) -> str | None:
    return next((a.evaluation.clock for a in attempts if a.evaluation and a.evaluation.clock), None)


async def _best_kernel(session: Session, run_id: str, run_dir: Path, best: Attempt | None) -> str | None:
    if best is None:
        return None
    local = run_dir / "best_kernel.cu"
    if local.is_file():
        return str(local)
    return best_export_uri(run_id, "best_kernel.cu")


def _keep_summary(run_dir: Path, summary: LoopSummary) -> None:
    """The invocation's summary without its attempts (the journal has them), for the run's report."""
    text = summary.model_dump_json(indent=2, exclude={"attempts": True, "baseline": {"evaluation"},
                                                      "best": {"evaluation"}, "confirmation": {"evaluation"}})
    (run_dir / "optimize_summary.json").write_text(text)


def _journal(run_dir: Path, attempt: Attempt) -> None:
    """The loop's own record, one line per attempt (the server's history has the evaluations)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    record = attempt.model_dump(mode="json", exclude={"evaluation"}, exclude_none=True)
    if record.get("proposal", {}).get("source"):
        record["proposal"]["source"] = f"<{len(attempt.proposal.source)} characters; see the candidate's kernel.cu>"  # type: ignore[union-attr]
    with open(run_dir / "optimize.jsonl", "a") as handle:
        handle.write(json.dumps({"time": time.time(), **record}) + "\n")
