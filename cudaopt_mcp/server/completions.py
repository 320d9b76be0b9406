"""Completions (``completion/complete``) for what a host asks a person to fill in: the optimize prompt's run id and
mode, and every resource template's variables: run ids, bundled task names, candidate ids (of the ``run_id`` already
given), case and buffer names of kept outputs, and the names of stored files (for a typed template such as
``{name}.json``, the names of its files without the suffix).

Values match by prefix, sorted, at most the specification's 100; ``total`` counts every match and ``hasMore``
says whether some were left out. An unknown template, argument or run completes to nothing: completion is a
hint, never a refusal.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
from mcp.server import MCPServer
from mcp.types import Completion, CompletionArgument, CompletionContext, PromptReference, ResourceTemplateReference

from cudaopt_mcp.api import ARTIFACT_TEMPLATE, BEST_EXPORTS, TASK_FILE_TEMPLATE
from cudaopt_mcp.api_pages import COMPLETION_VALUES, MIME_BY_SUFFIX, file_templates, resource_templates
from cudaopt_mcp.service.runs import ARTIFACT, RUN_ID
from cudaopt_mcp.service.state import ServerState
from harness_tools import HarnessError, bundled_task_names

PROMPT_MODES = ("tools", "reply")
FILES = {template: (family, suffix) for template, family, suffix in file_templates()}


def register(server: MCPServer, state_of: Callable[[], ServerState]) -> None:
    """``state_of`` returns the running server's state (completion handlers get no request context)."""

    @server.completion()
    async def complete(ref: PromptReference | ResourceTemplateReference, argument: CompletionArgument,
                       context: CompletionContext | None) -> Completion:
        known = dict((context.arguments if context else None) or {})
        options = await anyio.to_thread.run_sync(values_for, state_of(), ref, argument.name, known)
        matches = sorted({v for v in options if v.startswith(argument.value)})
        return Completion(values=matches[:COMPLETION_VALUES], total=len(matches),
                          has_more=len(matches) > COMPLETION_VALUES)


def values_for(state: ServerState, ref: PromptReference | ResourceTemplateReference, name: str,
               known: dict[str, str]) -> list[str]:
    """Every value ``name`` may take, given the arguments already ``known``."""
    if isinstance(ref, PromptReference):
        if ref.name != "optimize":
            return []
        return _run_ids(state) if name == "run_id" else list(PROMPT_MODES) if name == "mode" else []
    if ref.uri not in resource_templates():
        return []
    try:
        if name == "run_id":
            return _run_ids(state)
        if name == "task":
            return bundled_task_names()
        run_id = known.get("run_id", "")
        if name == "candidate_id":
            return state.store.candidate_ids(run_id)
        if name in ("case", "buffer"):
            return _outputs(state, run_id, known.get("candidate_id", ""), name, known.get("case", ""))
        if name == "name" and ref.uri in FILES:
            return _file_names(state, run_id, known.get("candidate_id", ""), *FILES[ref.uri])
    except HarnessError:  # an unknown run or candidate in the context: nothing to offer
        return []
    return []  # cursor, page, part: nothing to guess


def _run_ids(state: ServerState) -> list[str]:
    return [p.name for p in state.store.root.glob("run-*") if RUN_ID.match(p.name) and (p / "run.json").is_file()]


def _outputs(state: ServerState, run_id: str, candidate_id: str, name: str, case: str) -> list[str]:
    """Cases with kept outputs (before a candidate is given: the task's case names), or a case's buffers."""
    if not candidate_id:
        return [c.name for c in state.store.task(run_id).spec.cases] if name == "case" else []
    folder = state.store.candidate_dir(run_id, candidate_id) / "outputs"
    if name == "case":
        return [p.name for p in folder.iterdir() if p.is_dir()] if folder.is_dir() else []
    cases = folder / case
    return [p.stem for p in cases.glob("*.npy") if ARTIFACT.match(p.stem)] if case and cases.is_dir() else []


def _file_names(state: ServerState, run_id: str, candidate_id: str, family: str, suffix: str | None) -> list[str]:
    """The stored files of a family: with ``suffix``, their names less it; without, those no typed template takes."""
    store = state.store
    if family == TASK_FILE_TEMPLATE:
        names = _files(store.run_file(run_id, "task"))
    elif family == ARTIFACT_TEMPLATE:
        names = _files(store.candidate_dir(run_id, candidate_id))
    else:
        names = [n for n in BEST_EXPORTS if store.run_file(run_id, n).is_file()]
    if suffix:
        return [n[:-len(suffix)] for n in names if n.endswith(suffix) and len(n) > len(suffix)]
    typed = tuple(s for t, (f, s) in FILES.items() if f == family and s) or tuple(MIME_BY_SUFFIX)
    return [n for n in names if not n.endswith(typed)]


def _files(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.is_file() and ARTIFACT.match(p.name)] if folder.is_dir() else []
