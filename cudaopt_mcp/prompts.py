"""Prompt templates from ``prompts/*.md``, rendered with a run's task and its latest feedback.

Templates use ``$name`` placeholders (``string.Template``), so CUDA braces need no escaping. They are
looked up in ``$CUDAOPT_PROMPTS_DIR`` if set, else in the ``prompts/`` folder of the source tree (a
checkout or an editable install), else in ``<sys.prefix>/share/cudaopt/prompts`` (a wheel install).
"""

from __future__ import annotations

import json
import os
import string
import sys
from pathlib import Path

from mcp.server import MCPServer
from mcp.server.mcpserver import Context

from harness_tools.errors import HarnessError

from . import summaries as S
from .runs import RunError
from .state import ServerState

PROMPTS_DIRS = (Path(__file__).resolve().parent.parent / "prompts", Path(sys.prefix) / "share" / "cudaopt" / "prompts")
MAX_SOURCE_CHARS = 12000


class PromptMissing(HarnessError):
    """A prompt template file is not where it should be."""


def load_template(name: str) -> string.Template:
    env = os.environ.get("CUDAOPT_PROMPTS_DIR")
    folders = [Path(env)] if env else list(PROMPTS_DIRS)
    for folder in folders:
        if (folder / f"{name}.md").is_file():
            return string.Template((folder / f"{name}.md").read_text())
    raise PromptMissing(f"prompt template {name}.md not found in {', '.join(map(str, folders))} "
                        "(set CUDAOPT_PROMPTS_DIR to the prompts/ folder)")


def render_optimize(state: ServerState, run_id: str) -> str:
    store = state.store
    record = store.run(run_id)
    task = store.task(run_id)
    summary = S.task_summary(task, run_id)
    info = S.run_info(store, record, state.backend_name, state.is_active, recent=1)
    cases = "\n".join(f"- {c.name} ({c.role}): " + ", ".join(f"{k}={v}" for k, v in c.sizes.items())
                      for c in summary.cases)
    tolerances = "; ".join(f"{dtype}: atol={t.atol}, rtol={t.rtol}" for dtype, t in summary.tolerance.items())
    budget = (f"{info.budget.used} candidates used of {info.budget.max_candidates}" if info.budget.max_candidates
              else f"{info.budget.used} candidates used (no limit)")
    best = "none yet"
    if info.best:
        best = f"{info.best.candidate_id} at {info.best.score_ms:.4g} ms"
        if info.best.speedup_vs_baseline:
            best += f" ({info.best.speedup_vs_baseline:.3g}x the baseline)"
    source = task.read(task.spec.baseline.source)
    if len(source) > MAX_SOURCE_CHARS:
        source = source[:MAX_SOURCE_CHARS] + f"\n// … [cut; full source at {summary.baseline_source_uri}]"
    values = {
        "run_id": run_id, "backend": info.server_backend, "task_name": summary.name,
        "description": summary.description, "signature": summary.signature, "cases": cases, "tolerances": tolerances,
        "baseline_launch": json.dumps(summary.baseline_launch.model_dump())
        + (f" with defines {json.dumps(summary.baseline_defines)}" if summary.baseline_defines else ""),
        "tunables": json.dumps(summary.tunables) if summary.tunables else "none",
        "baseline_source": source, "budget": budget, "best": best, "feedback": latest_feedback(state, run_id),
    }
    return load_template("optimize").safe_substitute(values)


def latest_feedback(state: ServerState, run_id: str) -> str:
    """What the newest candidate's latest record says, in a few lines."""
    ids = state.store.candidate_ids(run_id)
    if not ids:
        return "No candidate evaluated yet. Start by evaluating the baseline (evaluate with no source)."
    cid = ids[-1]
    brief = S.candidate_brief(state.store, run_id, cid, state.is_active(run_id, cid))
    lines = [f"Candidate {cid}: {brief.status}" + (f" ({brief.note})" if brief.note else "")]
    if brief.failure:
        lines.append(f"Failure: {brief.failure}")
    if brief.score_ms is not None:
        lines.append(f"Score: {brief.score_ms:.4g} ms")
    if brief.registers is not None:
        lines.append(f"Registers: {brief.registers}")
    latest = S.latest_record(state.store.candidate_dir(run_id, cid))
    if latest:
        for case in latest[1].get("cases", []):
            if not case.get("passed") and case.get("message"):
                lines.append(f"- {case['name']}: {case['status']}: {case['message'][:S.MESSAGE_CHARS]}")
    return "\n".join(lines)


def register(server: MCPServer) -> None:
    @server.prompt(name="optimize", title="Optimise a run's kernel")
    def optimize(run_id: str, ctx: Context) -> str:
        """Instructions to optimise the kernel of a run, with its task, best result and latest feedback."""
        state: ServerState = ctx.request_context.lifespan_context
        try:
            return render_optimize(state, run_id)
        except RunError as exc:
            raise ValueError(str(exc)) from None
