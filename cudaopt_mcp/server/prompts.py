"""The MCP prompts: templates (:mod:`cudaopt_mcp.templates`) rendered with a run's task and its latest feedback."""

from __future__ import annotations

import json
from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS
from pydantic import Field

from cudaopt_mcp.errors import RunError
from cudaopt_mcp.service import views as S
from cudaopt_mcp.service.state import ServerState
from cudaopt_mcp.templates import load_template
from harness_tools import backend_traits
from harness_tools.check.hidden_shapes import hidden_shapes
from harness_tools.inspect.ncu_summary import ProfileSummary

MAX_SOURCE_CHARS = 12000


def render_optimize(state: ServerState, run_id: str, mode: str = "tools") -> str:
    """The optimisation prompt. ``mode``: 'tools' (the model calls our tools itself) or 'reply' (a client
    such as ``cudaopt optimize`` asks the model for one candidate per reply and evaluates it)."""
    if mode not in ("tools", "reply"):
        raise ValueError(f"mode must be 'tools' or 'reply', not {mode!r}")
    store = state.store
    record = store.run(run_id)
    task = store.task(run_id)
    summary = S.task_summary(task, run_id)
    info = S.run_info(store, record, state.backend_name, state.is_active, recent=1)
    cases = "\n".join(f"- {c.name} ({c.role}): " + ", ".join(f"{k}={v}" for k, v in c.sizes.items())
                      for c in task.spec.cases_for(["validation", "performance"], record.backend))
    if hidden_shapes(task.spec, record.backend):  # that they exist, never which: sizes shown would be tuned to
        cases += ("\n- hidden cases of other sizes, never shown: a candidate becomes the best only if it passes "
                  "them too, so handle any size")
    tolerances = "; ".join(f"{dtype}: atol={t.atol}, rtol={t.rtol}" for dtype, t in summary.tolerance.items())
    budget = (f"{info.budget.used} candidates used of {info.budget.max_candidates}" if info.budget.max_candidates
              else f"{info.budget.used} candidates used (no limit)")
    best = "none yet"
    if info.best:
        best = f"{info.best.candidate_id} at {info.best.score_ms:.4g} ms"
        if info.best.speedup_vs_baseline:
            best += f" ({info.best.speedup_vs_baseline:.3g}x the baseline)"
    values = {
        "run_id": run_id, "backend": info.server_backend, "task_name": summary.name,
        "description": summary.description, "signature": summary.signature, "cases": cases, "tolerances": tolerances,
        "baseline_launch": _baseline_launch(summary),
        "tunables": json.dumps(summary.tunables) if summary.tunables else "none",
        "baseline_source": _cut(task.read(task.spec.baseline.source), summary.baseline_source_uri),
        "budget": budget, "best": best, "best_source": _best_source(state, run_id, info.best),
        "best_profile": _best_profile(state, run_id, info.best),
        "attempts": _attempts(state, run_id), "feedback": latest_feedback(state, run_id),
        "timing_note": _timing_note(record.backend),
    }
    values["how_to_work"] = load_template(f"optimize_{mode}").safe_substitute(values).strip()
    return load_template("optimize").safe_substitute(values)


def _timing_note(backend: str) -> str:
    """What the run's timings mean (on cpu: not GPU speed) and when a score counts as progress."""
    note = backend_traits(backend).timing_note
    rule = ("A score counts as progress only beyond its noise: a candidate becomes the best when its score's "
            "confidence interval lies below the best's and a head-to-head re-measurement agrees.")
    return f"{note}.\n{rule}" if note else rule


def _cut(source: str, uri: str) -> str:
    if len(source) <= MAX_SOURCE_CHARS:
        return source
    return source[:MAX_SOURCE_CHARS] + f"\n// … [cut; full source at {uri}]"


def _best_source(state: ServerState, run_id: str, best) -> str:
    if best is None:
        return ""
    cand = state.store.read_json(run_id, best.candidate_id, "candidate.json") or {}
    if cand.get("baseline") or "candidate" not in cand:
        return ""
    c = cand["candidate"]
    launch = json.dumps(c.get("launch")) + (f", defines {json.dumps(c['defines'])}" if c.get("defines") else "")
    source = _cut(c.get("source", ""), best.source_uri)
    return f"Best candidate's launch: {launch}\n\nBest candidate's source:\n\n```cuda\n{source}\n```\n"


def _best_profile(state: ServerState, run_id: str, best) -> str:
    """The Nsight Compute summary of the best candidate, when it has been profiled."""
    if best is None:
        return ""
    record = state.store.read_json(run_id, best.candidate_id, "profile.json") or {}
    if record.get("status") != "ok" or not record.get("summary"):
        return ""
    summary = ProfileSummary.model_validate(record["summary"])
    return f"Nsight Compute profile of the best candidate (case {record.get('case')}):\n\n{summary.text()}\n"


def _attempts(state: ServerState, run_id: str, limit: int = 20) -> str:
    """One line per candidate (the newest ``limit``): id, idea, status, score."""
    ids = state.store.candidate_ids(run_id)
    lines = [f"- ({len(ids) - limit} earlier candidates not shown)"] if len(ids) > limit else []
    for cid in ids[-limit:]:
        b = S.candidate_brief(state.store, run_id, cid, state.is_active(run_id, cid))
        line = f"- {cid}: {b.status}"
        line += f", {b.score_ms:.4g} ms" if b.score_ms is not None else ""
        line += f", {b.registers} registers" if b.registers is not None else ""
        line += f" — {b.note[:160]}" if b.note else ""
        line += f" — {b.failure[:160]}" if b.failure and b.status != "correct" else ""
        lines.append(line)
    return "\n".join(lines) or "none yet"


def latest_feedback(state: ServerState, run_id: str) -> str:
    """What the newest candidate's latest records say: compile report, every case, score and speed-ups."""
    ids = state.store.candidate_ids(run_id)
    if not ids:
        return "No candidate evaluated yet. Start by evaluating the baseline (evaluate with no source)."
    cid = ids[-1]
    store = state.store
    brief = S.candidate_brief(store, run_id, cid, state.is_active(run_id, cid))
    lines = [f"Candidate {cid}: {brief.status}" + (f" ({brief.note})" if brief.note else "")]
    compiled = store.read_json(run_id, cid, "compile.json") or {}
    r = compiled.get("resources") or {}
    if compiled.get("ok"):
        lines.append(f"Compile: ok, {r.get('registers')} registers, spills {r.get('spill_store_bytes', 0)} B stored / "
                     f"{r.get('spill_load_bytes', 0)} B loaded, stack {r.get('stack_bytes', 0)} B, "
                     f"static shared {r.get('static_shared_bytes', 0)} B")
    elif compiled:
        lines.append(f"Compile {compiled.get('status')}:\n{S.excerpt(compiled.get('log', ''))}")
    latest = S.latest_record(store.candidate_dir(run_id, cid))
    if latest:
        lines += [_case_line(case) for case in latest[1].get("cases", [])]
        lines += _floor_line(latest[1])
    if brief.failure and brief.status != "correct":
        lines.append(f"Failure: {brief.failure}")
    if brief.score_ms is not None:
        baseline, best = S.baseline_score(store, run_id), store.best(run_id)
        line = f"Score: {brief.score_ms:.4g} ms"
        if baseline:
            line += f", {baseline / brief.score_ms:.3g}x the baseline ({baseline:.4g} ms)"
        if best and best.candidate_id != cid:
            line += f", {best.score_ms / brief.score_ms:.3g}x the best ({best.candidate_id}, {best.score_ms:.4g} ms)"
        lines.append(line)
    return "\n".join(lines)


def _floor_line(record: dict) -> list[str]:
    """The fixed event overhead, where it is at least 5 % of a performance median (short kernels)."""
    floor = ((record.get("environment") or {}).get("device") or {}).get("timing_floor_ms")
    medians = [(c.get("timing") or {}).get("median_ms") for c in record.get("cases", []) if c.get("role") == "performance"]
    if not floor or not any(m and m < 20 * floor for m in medians):
        return []
    return [(f"Timing floor: an empty kernel measures {floor * 1e3:.1f} µs with the same events (launch overhead "
             "inside every median); a median near it cannot shrink much further.")]


def _case_line(case: dict) -> str:
    line = f"- {case['name']} ({case['role']}): {case['status']}"
    timing = case.get("timing") or {}
    if timing.get("median_ms") is not None:
        line += f", median {timing['median_ms']:.4g} ms (min {timing.get('min_ms', 0):.4g}, cv {timing.get('cv', 0):.1%})"
    if case.get("max_abs_err") is not None and case["status"] in ("passed", "mismatch"):
        line += f", max abs err {case['max_abs_err']:.3g}"
    if not case.get("passed") and case.get("message"):
        line += f": {case['message'][:S.MESSAGE_CHARS]}"
    return line


def register(server: MCPServer) -> None:
    @server.prompt(name="optimize", title="Optimise a run's kernel")
    def optimize(ctx: Context, run_id: Annotated[str, Field(description="the run to optimise (from create_run)")],
                 mode: Annotated[str, Field(description="'tools' (default): the model calls the tools itself; 'reply': "
                                                        "it answers with one candidate per message")] = "tools") -> str:
        """Instructions to optimise the kernel of a run, with its task, best result, attempts and latest
        feedback. mode 'tools' (default): the model calls the tools itself; 'reply': it answers with one
        candidate per message and a client evaluates it."""
        state: ServerState = ctx.request_context.lifespan_context
        try:
            return render_optimize(state, run_id, mode)
        except (RunError, ValueError) as exc:  # a bad run id or mode: invalid params, with the reason (not -32603)
            raise MCPError(INVALID_PARAMS, str(exc)) from None


def _baseline_launch(summary) -> str:
    """The baseline's launch (or launch sequence with its scratch buffers), defines and per-case defines."""
    if summary.baseline_launch is not None:
        text = json.dumps(summary.baseline_launch.model_dump())
    else:
        text = ("a sequence of launches, in order on one stream, timed as one unit: "
                + json.dumps([s.model_dump(exclude_none=True) for s in summary.baseline_launches])
                + (f"; scratch buffers {json.dumps([b.model_dump() for b in summary.baseline_scratch])}"
                   if summary.baseline_scratch else ""))
    if summary.baseline_kernel:
        text = f"kernel {summary.baseline_kernel}: {text}"
    if summary.baseline_defines:
        text += f" with defines {json.dumps(summary.baseline_defines)}"
    if summary.size_defines:
        text += f"; the task #defines per case {json.dumps(summary.size_defines)}"
    if summary.constants:
        text += ("; inputs in __constant__ symbols (not kernel arguments): "
                 + ", ".join(f"{b} -> {sym}" for b, sym in summary.constants.items()))
    return text
