"""Creating a run: from a bundled task, a task folder (stdio clients, or HTTP clients inside ``--task-root``) or an
inline spec with its files (written to a private folder first, checked like any task folder)."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

from cudaopt_mcp.api import (
    MAX_INLINE_BYTES,
    MAX_INLINE_FILES,
    CreateRunOutput,
)
from cudaopt_mcp.errors import StepRefused
from cudaopt_mcp.service import views as S
from cudaopt_mcp.service.state import ServerState
from harness_tools import Task, bundled_task_names, load_task, resolve_task
from harness_tools.task.spec import MAX_TASK_FILE_BYTES

INLINE_FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", re.ASCII)


def create_run(state: ServerState, task: str | None, spec: dict[str, Any] | None, files: dict[str, str] | None,
               max_candidates: int | None) -> CreateRunOutput:
    if (task is None) == (spec is None):
        raise StepRefused("give exactly one of 'task' (a bundled task name or a task folder) and 'spec'")
    with tempfile.TemporaryDirectory(prefix="cudaopt-inline-") as tmp:
        if spec is not None:
            loaded, origin = _inline_task(state, spec, files or {}, Path(tmp)), "inline"
        else:
            loaded = _named_task(state, task or "")
            origin = task if task in bundled_task_names() else str(loaded.folder)
        record = state.store.create_run(loaded, origin, state.backend_name, max_candidates)
        summary = S.task_summary(loaded, record.run_id)  # while an inline task's folder still exists
    return CreateRunOutput(
        run_id=record.run_id, backend=record.backend, task=summary,
        next_step=f"evaluate(run_id='{record.run_id}') with no source measures the task's baseline; then evaluate "
                  "your own kernels (source + launch) and compare against it",
    )


def _named_task(state: ServerState, name: str) -> Task:
    trusted = state.config.trusted_client
    if name in bundled_task_names():
        return resolve_task(name)
    if not trusted and "/" not in name:
        raise StepRefused(f"{name!r} is not a bundled task ({', '.join(bundled_task_names())})")
    folder = Path(name).expanduser().resolve()
    if not trusted:
        roots = [r.resolve() for r in state.config.task_roots]
        if not any(folder.is_relative_to(r) for r in roots):
            raise StepRefused("over HTTP only bundled tasks and task folders under the server's --task-root folders "
                              f"are accepted ({', '.join(map(str, roots)) or 'none configured'})")
    if not folder.is_dir() and not Path(name).expanduser().is_absolute():
        raise StepRefused(f"{name!r} is not a bundled task ({', '.join(bundled_task_names())}) nor a task folder: a "
                          f"relative path is resolved against the server's working directory ({Path.cwd()}), which "
                          "need not be the client's; give the folder's absolute path")
    return resolve_task(folder)


def _inline_task(state: ServerState, spec: dict[str, Any], files: dict[str, str], folder: Path) -> Task:
    """Write an inline spec and its files into ``folder`` and load it like any task folder."""
    if not state.config.trusted_client:
        raise StepRefused("an inline task spec is accepted only from a local (stdio) client: its reference may be "
                          "Python code, and no code from a remote client runs in this server; use a bundled task "
                          "or a task folder under the server's --task-root")
    if len(files) > MAX_INLINE_FILES:
        raise StepRefused(f"at most {MAX_INLINE_FILES} files may come with an inline spec")
    for name, text in files.items():
        if not INLINE_FILE.fullmatch(name) or name == "task.json":
            raise StepRefused(f"file name {name[:80]!r} must be a plain file name of letters, digits, '_', '-' and '.' "
                              "(at most 128 characters, not starting with '.', not task.json)")
        if len(text) > MAX_INLINE_BYTES or len(text.encode()) > MAX_INLINE_BYTES:
            raise StepRefused(f"file {name!r} is larger than {MAX_INLINE_BYTES} bytes")
        (folder / name).write_text(text)
    try:
        text = json.dumps(spec)
    except (ValueError, TypeError, RecursionError) as exc:
        raise StepRefused(f"the inline spec cannot be written as JSON: {type(exc).__name__}: {str(exc)[:200]}") from None
    if len(text) > MAX_TASK_FILE_BYTES:
        raise StepRefused(f"the inline spec is {len(text)} characters of JSON; at most {MAX_TASK_FILE_BYTES} are "
                          "accepted")
    (folder / "task.json").write_text(text)
    return load_task(folder)
