"""Resources: runs, task files and candidate artifacts, readable by URI (tools link to them).

    cudaopt://runs{?cursor}                                          the runs, a page at a time (JSON)
    cudaopt://runs/{run_id}                                          one run: task, budget, best, recent candidates
    cudaopt://runs/{run_id}/history{?page}                           the append-only history (JSON lines), in pages
    cudaopt://runs/{run_id}/best/{name}                              the exported best kernel (best_kernel.cu, ...)
    cudaopt://runs/{run_id}/task/{name}                              a file of the run's task (task.json, baseline.cu)
    cudaopt://runs/{run_id}/candidates/{candidate_id}/{name}         kernel.cu, compile.log, evaluation.json, ...
    cudaopt://runs/{run_id}/candidates/{candidate_id}/outputs/{case}/{buffer}{?part}   a kept output (.npy bytes)
    .../outputs/{case}/{buffer}/summary                              its shape, dtype, range and NaN count (JSON)
    cudaopt://runs/{run_id}/report{?part}                            the run's report page (HTML, in parts)
    cudaopt://runs/{run_id}/report.md                                its compact markdown summary
    cudaopt://tasks/{task}                                           a bundled task's task.json

Files are registered once per suffix (``{name}.cu``, ``{name}.json``, ...; :mod:`cudaopt_mcp.api_pages`), so
each template announces the MIME type its reads return; a family's catch-all serves other names as text.
No read exceeds the bound of :mod:`cudaopt_mcp.api_pages`: a bigger file is read in ``?part=N`` parts.
Every id and name is validated by the run store before a path is built; unknown ones are refused.
Hidden cases are never served: task.json loses its ``hidden`` block, and the hidden check's record has a
name no artifact pattern admits (:mod:`cudaopt_mcp.service.hidden`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from cudaopt_mcp.api import (
    ARTIFACT_TEMPLATE,
    BEST_EXPORT_TEMPLATE,
    BEST_EXPORTS,
    REPORT_MARKDOWN_TEMPLATE,
    REPORT_TEMPLATE,
    RUN_TEMPLATE,
    RUNS_URI,
    TASK_FILE_TEMPLATE,
    GetRunOutput,
    output_uri,
)
from cudaopt_mcp.api_pages import (
    BINARY,
    BUNDLED_TASK_TEMPLATE,
    HISTORY_PAGE_EVENTS,
    HISTORY_PAGE_TEMPLATE,
    MIME_BY_SUFFIX,
    OUTPUT_PARTS_TEMPLATE,
    OUTPUT_SUMMARY_TEMPLATE,
    PART_BYTES,
    READ_CHARS,
    REPORT_PARTS_TEMPLATE,
    RUNS_PAGE,
    RUNS_PAGE_TEMPLATE,
    TEXT,
    file_templates,
)
from cudaopt_mcp.errors import RunError, StepRefused
from cudaopt_mcp.service import pages
from cudaopt_mcp.service import views as S
from cudaopt_mcp.service.hidden import public_task_json
from cudaopt_mcp.service.runs import ARTIFACT
from cudaopt_mcp.service.state import ServerState
from harness_tools import bundled_task_names
from harness_tools.task.loading import BUNDLED_DIR, TASK_FILE

JSON = "application/json"
_CASE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
PARTS_NOTE = (f"A file over {READ_CHARS:,} characters ({PART_BYTES:,} bytes if binary) is too big for one read: "
              "read without ?part it is refused with its number of parts N and their URIs; ?part=1 to ?part=N "
              "return it in order, each a plain slice (concatenated, they are the file).")
ARTIFACTS_DOC = ("A candidate's artifact: kernel.cu, candidate.json, compile.json, compile.log, evaluation.json, "
                 "execution.json (from run), timing.json (from time), profile.json / profile.details.csv / "
                 "profile.ncu-rep (binary, from profile), sanitize.json / sanitize-<tool>.log (from sanitize).")
TASK_FILES_DOC = ("A file of the run's own copy of its task: task.json (without its hidden cases), the baseline "
                  "source, the tunable kernel, the reference.")
EXPORTS_DOC = ("The run's best kernel exported standalone: best_kernel.cu (defines baked in, launch configuration "
               "in its header comment) or best_launch.json.")
FAMILIES = {ARTIFACT_TEMPLATE: ("Candidate artifact", ARTIFACTS_DOC), TASK_FILE_TEMPLATE: ("Task file", TASK_FILES_DOC),
            BEST_EXPORT_TEMPLATE: ("Best kernel export", EXPORTS_DOC)}


def register(server: MCPServer, state_of: Callable[[], ServerState]) -> None:
    """``state_of`` returns the running server's state (static resources get no request context)."""

    def guarded(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except RunError as exc:
                raise ResourceNotFoundError(str(exc)) from None
            except StepRefused as exc:  # too big for one read, a bad part or cursor: what to ask instead
                raise MCPError(INVALID_PARAMS, str(exc)) from None
        return wrapper

    runs_doc = (f"The runs in this server's results folder, {RUNS_PAGE} a page, oldest first, each with budget and "
                "best candidate (no candidate lists). next_uri (or ?cursor=<next_cursor>) is the next page; total "
                "counts them all.")

    @server.resource(RUNS_URI, name="runs", title="Runs", description=runs_doc, mime_type=JSON)
    @guarded
    def runs() -> str:
        return pages.runs_page(state_of(), None).model_dump_json(indent=1, exclude_none=True)

    @server.resource(RUNS_PAGE_TEMPLATE, name="runs page", title="Runs (a page)", description=runs_doc, mime_type=JSON)
    @guarded
    def runs_from(cursor: str | None = None) -> str:
        return pages.runs_page(state_of(), cursor).model_dump_json(indent=1, exclude_none=True)

    @server.resource(RUN_TEMPLATE, name="run", title="Run", mime_type=JSON)
    @guarded
    def run(run_id: str) -> str:
        """One run: its task, budget, best candidate, latest candidates and a history digest."""
        state = state_of()
        record = state.store.run(run_id)
        out = GetRunOutput(run=S.run_info(state.store, record, state.backend_name, state.is_active),
                           task=S.task_summary(state.store.task(run_id), run_id),
                           history_digest=[S.history_line(e) for e in state.store.history(run_id, limit=12)])
        return out.model_dump_json(indent=2, exclude_none=True)

    @server.resource(HISTORY_PAGE_TEMPLATE, name="run history", title="Run history", mime_type="application/x-ndjson",
                     description=f"The run's append-only history, one JSON event per line, oldest first. Up to "
                                 f"{HISTORY_PAGE_EVENTS} events it is served whole; a longer one in pages of "
                                 f"{HISTORY_PAGE_EVENTS} events, ?page=1 (the oldest) to ?page=N (the newest): read "
                                 "without ?page it is refused with N and the pages' URIs. The history tool pages "
                                 "it too, with a cursor.")
    @guarded
    def run_history(run_id: str, page: str | None = None) -> str:
        return pages.history_resource_page(state_of(), run_id, page)

    for template, family, suffix in file_templates():
        title, description = FAMILIES[family]
        mime = MIME_BY_SUFFIX[suffix] if suffix else TEXT
        kind = f"Files named *{suffix}, served as {mime}." if suffix else "Files of any other name, served as text."
        server.resource(template, name=f"{title.lower()} {suffix or '(other)'}", title=f"{title} ({suffix or 'other'})",
                        description=f"{description} {kind} {PARTS_NOTE}", mime_type=mime,
                        )(guarded(_reader(family, state_of, suffix or "", mime == BINARY)))

    report_doc = ("built from the run folder when read (rebuilt only when the run changed since): the score per "
                  "iteration with the best so far and failures by kind, latency distributions, tunable-space "
                  "heatmaps, binned maps of where wrong outputs are wrong, a roofline against the GPU's measured "
                  "peaks, compile resources against score, the environment and the LLM's token cost.")

    @server.resource(REPORT_PARTS_TEMPLATE, name="run report", title="Run report (HTML)", mime_type="text/html",
                     description=f"The run's report as one self-contained HTML page (inline SVG plots, no script), "
                                 f"{report_doc} {PARTS_NOTE}")
    async def run_report(run_id: str, part: str | None = None) -> str:
        text = await anyio.to_thread.run_sync(guarded(_report_text), state_of(), run_id, "html")
        return guarded(pages.text_part)(text, REPORT_TEMPLATE.format(run_id=run_id), part)

    @server.resource(REPORT_MARKDOWN_TEMPLATE, name="run report summary", title="Run report (markdown)",
                     mime_type="text/markdown",
                     description=f"The run's report as compact markdown a model can read: verdict, the fastest correct "
                                 f"candidates, parameter importance, achieved rates, environment; {report_doc}")
    async def run_report_markdown(run_id: str) -> str:
        text = await anyio.to_thread.run_sync(guarded(_report_text), state_of(), run_id, "markdown")
        return guarded(pages.text_part)(text, REPORT_MARKDOWN_TEMPLATE.format(run_id=run_id), None)

    @server.resource(BUNDLED_TASK_TEMPLATE, name="bundled task", title="Bundled task", mime_type=JSON)
    @guarded
    def bundled_task(task: str) -> str:
        """A bundled task's task.json (without its hidden cases): signature, cases, tolerances, baseline launch
        and tunables, to read before create_run(task=<name>). list_tasks names them; completion offers them."""
        if task not in bundled_task_names():  # a name only: never a folder path
            raise RunError(f"no bundled task {task!r}; list_tasks names them")
        return pages.text_part(public_task_json((BUNDLED_DIR / task / TASK_FILE).read_text()),
                               BUNDLED_TASK_TEMPLATE.format(task=task), None)

    @server.resource(OUTPUT_PARTS_TEMPLATE, name="kept output", title="Kept output (.npy)", mime_type=BINARY,
                     description="A kernel output of the candidate's latest run/evaluate, as a NumPy .npy file "
                                 f"(outputs_kept names the cases). One up to {PART_BYTES:,} bytes is served whole; a "
                                 "bigger one in parts, ?part=1 to ?part=N, read without ?part it is refused with N, "
                                 "the parts' URIs and its summary. .../summary describes any output in JSON.")
    @guarded
    def output(run_id: str, candidate_id: str, case: str, buffer: str, part: str | None = None) -> bytes:
        path = _output_path(state_of(), run_id, candidate_id, case, buffer)
        uri = output_uri(run_id, candidate_id, case, buffer)

        def about() -> str:  # said only when the output is refused whole: it scans every element
            s = S.output_summary(path, case, buffer, uri, pages.parts_of(path.stat().st_size, binary=True),
                                 _buffer_dtype(state_of(), run_id, buffer))
            return f" ({s.dtype} {s.shape}, finite range [{s.min}, {s.max}], {s.nan_count} NaN; summary at {uri}/summary)"
        return pages.binary_part(path, uri, part, about)

    @server.resource(OUTPUT_SUMMARY_TEMPLATE, name="kept output summary", title="Kept output summary",
                     mime_type=JSON)
    @guarded
    def output_summary(run_id: str, candidate_id: str, case: str, buffer: str) -> str:
        """What a kept output holds without its bytes: dtype, shape, elements, size, smallest and largest finite
        value, NaN and Inf counts, and how many reads its bytes take (parts) with the first part's URI."""
        path = _output_path(state_of(), run_id, candidate_id, case, buffer)
        uri = output_uri(run_id, candidate_id, case, buffer)
        parts = pages.parts_of(path.stat().st_size, binary=True)
        return S.output_summary(path, case, buffer, uri, parts, _buffer_dtype(state_of(), run_id, buffer)).model_dump_json(
            indent=1, exclude_none=True)


def _report_text(state: ServerState, run_id: str, kind: str) -> str:
    from cudaopt_mcp.report.build import ensure_report  # plotting loads on the first report read, not at start-up

    files = ensure_report(state.store, run_id)
    return (files.html if kind == "html" else files.markdown).read_text()


def _buffer_dtype(state: ServerState, run_id: str, buffer: str) -> str | None:
    """The dtype the run's task gives this output buffer (None: no such buffer)."""
    return next((b.dtype for b in state.store.task(run_id).spec.outputs if b.name == buffer), None)


def _reader(family: str, state_of: Callable[[], ServerState], suffix: str, binary: bool):
    """The read function of one file template: ``name`` comes without the template's own suffix."""
    def read(run_id: str, name: str, part: str | None = None, candidate_id: str | None = None) -> str | bytes:
        name += suffix
        store = state_of().store
        if family == ARTIFACT_TEMPLATE:
            path = store.artifact_path(run_id, candidate_id, name)
        elif family == BEST_EXPORT_TEMPLATE:
            if name not in BEST_EXPORTS:
                raise RunError(f"no export {name!r}: ask for best_kernel.cu or best_launch.json")
            path = store.run_file(run_id, name)
            if not path.is_file():
                raise RunError(f"run {run_id} has no scored best candidate yet, so nothing is exported")
        else:
            if not ARTIFACT.match(name) or ".." in name:
                raise RunError(f"invalid task file name {name!r}")
            path = store.run_file(run_id, "task") / name
            if not path.is_file():
                raise RunError(f"run {run_id}'s task has no file {name!r}")
        uri = family.format(run_id=run_id, candidate_id=candidate_id, name=name, artifact=name)
        if binary:
            return pages.binary_part(path, uri, part)
        text = path.read_text(errors="replace")
        return pages.text_part(public_task_json(text) if family == TASK_FILE_TEMPLATE and name == TASK_FILE else text,
                               uri, part)

    if family == ARTIFACT_TEMPLATE:
        def artifact(run_id: str, candidate_id: str, name: str, part: str | None = None) -> str | bytes:
            return read(run_id, name, part, candidate_id)
        return artifact

    def run_file(run_id: str, name: str, part: str | None = None) -> str | bytes:
        return read(run_id, name, part)
    return run_file


def _output_path(state: ServerState, run_id: str, candidate_id: str, case: str, buffer: str):
    if not _CASE.match(case) or ".." in case or not ARTIFACT.match(buffer) or ".." in buffer:
        raise RunError(f"invalid case or buffer name {case!r}/{buffer!r}")
    path = state.store.candidate_dir(run_id, candidate_id) / "outputs" / case / f"{buffer}.npy"
    if not path.is_file():
        raise RunError(f"no kept output {case}/{buffer} for candidate {candidate_id} of {run_id}")
    return path

