"""Bounded answers: the size bound, page sizes, the URIs of pages and parts, the MIME type of every stored file,
the resource templates the server registers (one per file suffix, so each announces the type its reads return),
and the summary of a kept output.

Hosts reject answers over ~25k tokens (~4 characters a token), so no tool answer and no resource read exceeds
:data:`ANSWER_CHARS`, whatever the run store holds:

- lists (``list_runs``, ``history``, ``cudaopt://runs``) come in pages with an opaque ``next_cursor``;
- the history resource comes in pages of :data:`HISTORY_PAGE_EVENTS` events (``?page=N``, oldest first);
- a file bigger than one read (:data:`READ_CHARS` characters, or :data:`PART_BYTES` bytes when binary) is
  served in parts (``?part=N``); reading it without ``?part`` is refused with the number of parts and their
  URIs, so nothing is ever cut silently;
- a kept output (.npy) also has a JSON summary (shape, dtype, min/max, NaN count) at ``.../summary``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from cudaopt_mcp.api import (
    ARTIFACT_TEMPLATE,
    BEST_EXPORT_TEMPLATE,
    HISTORY_TEMPLATE,
    OUTPUT_TEMPLATE,
    REPORT_TEMPLATE,
    RUN_TEMPLATE,
    RUNS_URI,
    TASK_FILE_TEMPLATE,
)

ANSWER_CHARS = 90_000  # text and structured content of one answer together
READ_CHARS = 60_000  # one resource read: text characters, or the base64 characters of binary content
PART_BYTES = READ_CHARS // 4 * 3  # 45,000 bytes: 60,000 characters of base64
RUNS_PAGE = 20  # runs per page (a run's summary is ~700 characters, and tool answers carry it twice)
HISTORY_PAGE_EVENTS = 100  # events per page of the history resource (an event is at most ~600 characters)
HISTORY_TOOL_CHARS = 30_000  # a history tool page stops before its events' JSON would pass this
CORRECT_LISTED = 200  # best's correct_candidates: the newest this many
COMPLETION_VALUES = 100  # the specification's cap on values per completion

BINARY = "application/octet-stream"
TEXT = "text/plain"
MIME_BY_SUFFIX = {".cu": "text/x-cuda", ".cuh": "text/x-cuda", ".json": "application/json",
                  ".jsonl": "application/x-ndjson", ".log": TEXT, ".txt": TEXT, ".csv": "text/csv",
                  ".py": "text/x-python", ".npy": BINARY, ".ncu-rep": BINARY}


def mime_type(name: str) -> str:
    """The MIME type a file of this name is served with (text/plain for a suffix not listed)."""
    return next((mime for suffix, mime in MIME_BY_SUFFIX.items() if name.endswith(suffix)), TEXT)


# ---- pages and parts -----------------------------------------------------------------------------------
PART_QUERY = "{?part}"
RUNS_PAGE_TEMPLATE = RUNS_URI + "{?cursor}"
HISTORY_PAGE_TEMPLATE = HISTORY_TEMPLATE + "{?page}"
OUTPUT_PARTS_TEMPLATE = OUTPUT_TEMPLATE + PART_QUERY
OUTPUT_SUMMARY_TEMPLATE = OUTPUT_TEMPLATE + "/summary"
REPORT_PARTS_TEMPLATE = REPORT_TEMPLATE + PART_QUERY
BUNDLED_TASK_TEMPLATE = "cudaopt://tasks/{task}"  # a bundled task's task.json, before any run exists


def part_uri(uri: str, part: int) -> str:
    """Part ``part`` (1-based) of a file too big for one read."""
    return f"{uri}?part={part}"


def runs_page_uri(cursor: str) -> str:
    return f"{RUNS_URI}?cursor={cursor}"


def history_page_uri(run_id: str, page: int) -> str:
    return f"{HISTORY_TEMPLATE.format(run_id=run_id)}?page={page}"


def output_summary_uri(run_id: str, candidate_id: str, case: str, buffer: str) -> str:
    return OUTPUT_SUMMARY_TEMPLATE.format(run_id=run_id, candidate_id=candidate_id, case=case, buffer=buffer)


# ---- the file templates: one per suffix, then one for any other name --------------------------------------
# A family's last variable is the file name; its typed templates match ``{name}<suffix>``.
ARTIFACT_SUFFIXES = (".cu", ".json", ".log", ".csv", ".ncu-rep")
TASK_FILE_SUFFIXES = (".json", ".cu", ".cuh", ".py", ".npy")
BEST_EXPORT_SUFFIXES = (".cu", ".json")
FILE_FAMILIES = {ARTIFACT_TEMPLATE: ARTIFACT_SUFFIXES, TASK_FILE_TEMPLATE: TASK_FILE_SUFFIXES,
                 BEST_EXPORT_TEMPLATE: BEST_EXPORT_SUFFIXES}


def typed_template(family: str, suffix: str | None) -> str:
    """The registered template of a file family for files ending in ``suffix`` (None: any other name)."""
    folder = family[:family.rindex("{")]
    return folder + ("{name}" + suffix if suffix else "{name}") + PART_QUERY


def file_templates() -> list[tuple[str, str, str | None]]:
    """(template, family, suffix) of every file template, in match order: typed ones before a family's catch-all."""
    rows: list[tuple[str, str, str | None]] = []
    for family, suffixes in FILE_FAMILIES.items():
        rows += [(typed_template(family, s), family, s) for s in suffixes]
        if family != BEST_EXPORT_TEMPLATE:  # the exports are two fixed names, both typed
            rows.append((typed_template(family, None), family, None))
    return rows


def resource_templates() -> set[str]:
    """Every resource template the server registers."""
    return ({RUN_TEMPLATE, RUNS_PAGE_TEMPLATE, HISTORY_PAGE_TEMPLATE, OUTPUT_PARTS_TEMPLATE, OUTPUT_SUMMARY_TEMPLATE,
             BUNDLED_TASK_TEMPLATE}
            | {t for t, _, _ in file_templates()})


# ---- a kept output, summarised --------------------------------------------------------------------------
class OutputSummary(BaseModel):
    """What a kept output holds, without its bytes (they are at ``uri``, in ``parts`` reads)."""

    case: str
    buffer: str
    dtype: str
    shape: list[int]
    elements: int
    bytes: int = Field(description="size of the .npy file")
    min: float | None = Field(None, description="smallest finite value (None: no finite value)")
    max: float | None = Field(None, description="largest finite value")
    nan_count: int
    inf_count: int
    uri: str = Field(description="the .npy bytes; whole when parts is 1, else refused without ?part")
    parts: int = Field(description="reads its bytes take: ?part=1 .. ?part=parts")
    first_part_uri: str | None = Field(None, description="the first part, when there is more than one")
