"""Pages of what grows with the run store: runs, history events and file parts (:mod:`cudaopt_mcp.api_pages`).

A cursor is opaque to callers: URL-safe base64 of the list it belongs to, the run it pages (if any) and the
offset to go on from. One from another list or run, or one that was edited, is refused with what to do.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cudaopt_mcp.api import HistoryOutput, ListRunsOutput
from cudaopt_mcp.api_pages import (
    HISTORY_PAGE_EVENTS,
    HISTORY_TOOL_CHARS,
    PART_BYTES,
    READ_CHARS,
    RUNS_PAGE,
    history_page_uri,
    part_uri,
    runs_page_uri,
)
from cudaopt_mcp.errors import StepRefused
from cudaopt_mcp.service import views as S
from cudaopt_mcp.service.state import ServerState

MAX_CURSOR_CHARS = 200


def encode_cursor(kind: str, scope: str, offset: int) -> str:
    raw = json.dumps({"k": kind, "s": scope, "o": offset}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, kind: str, scope: str = "") -> int:
    """The offset a cursor of ``kind`` (for ``scope``, e.g. the run id) stands for; anything else is refused."""
    def refuse(why: str) -> StepRefused:
        return StepRefused(f"invalid cursor {cursor[:40]!r}: {why}; pass back the next_cursor of the previous page "
                           "unchanged, or omit cursor for the first page")
    if not isinstance(cursor, str) or not cursor or len(cursor) > MAX_CURSOR_CHARS:
        raise refuse("not a cursor this server gave out")
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError):
        raise refuse("not a cursor this server gave out") from None
    if not isinstance(data, dict) or not isinstance(data.get("o"), int) or isinstance(data.get("o"), bool):
        raise refuse("not a cursor this server gave out")
    if data.get("k") != kind:
        raise refuse(f"it pages {data.get('k')!r}, not {kind!r}")
    if data.get("s") != scope:
        raise refuse(f"it belongs to {data.get('s')!r}, not {scope!r}")
    if data["o"] < 0:
        raise refuse("negative offset")
    return data["o"]


# ---- runs ----------------------------------------------------------------------------------------------
def runs_page(state: ServerState, cursor: str | None) -> ListRunsOutput:
    """:data:`RUNS_PAGE` runs from the cursor on (oldest first), without their candidates."""
    records = state.store.list_runs()
    start = decode_cursor(cursor, "runs") if cursor else 0
    if start > len(records):
        raise StepRefused(f"invalid cursor: it points past the last of the {len(records)} runs; omit cursor to start again")
    page = records[start:start + RUNS_PAGE]
    end = start + len(page)
    nxt = encode_cursor("runs", "", end) if end < len(records) else None
    return ListRunsOutput(runs=[S.run_info(state.store, r, state.backend_name, state.is_active, recent=0) for r in page],
                          total=len(records), next_cursor=nxt, next_uri=runs_page_uri(nxt) if nxt else None)


# ---- history -------------------------------------------------------------------------------------------
def history_tool_page(state: ServerState, run_id: str, offset: int, limit: int, cursor: str | None) -> HistoryOutput:
    """Up to ``limit`` events from ``offset`` (or the cursor), stopping before their JSON passes the page budget."""
    if cursor:
        if offset:
            raise StepRefused("give cursor or offset, not both (the cursor carries its offset)")
        offset = decode_cursor(cursor, "history", run_id)
    events = state.store.history(run_id)
    if offset > len(events):
        raise StepRefused(f"offset {offset} is past the end of {run_id}'s {len(events)} events")
    page: list[dict[str, Any]] = []
    used = 0
    for event in events[offset:offset + limit]:
        used += len(json.dumps(event)) + 2
        if page and used > HISTORY_TOOL_CHARS:
            break
        page.append(event)
    end = offset + len(page)
    more = end < len(events)
    return HistoryOutput(run_id=run_id, total=len(events), offset=offset, events=page, next_offset=end if more else None,
                         next_cursor=encode_cursor("history", run_id, end) if more else None)


def history_resource_page(state: ServerState, run_id: str, page: str | None) -> str:
    """The history as JSON lines: whole when it fits one page, else page ``page`` of :data:`HISTORY_PAGE_EVENTS`."""
    events = state.store.history(run_id)
    pages = max(1, math.ceil(len(events) / HISTORY_PAGE_EVENTS))
    if not page:
        if pages > 1:
            raise StepRefused(f"{run_id}'s history has {len(events)} events, more than one read returns "
                              f"({HISTORY_PAGE_EVENTS}): read it in {pages} pages, oldest first, "
                              f"{history_page_uri(run_id, 1)} to {history_page_uri(run_id, pages)} (the newest)")
        number = 1
    else:
        number = _number(page, pages, "page", run_id + "'s history")
    chunk = events[(number - 1) * HISTORY_PAGE_EVENTS:number * HISTORY_PAGE_EVENTS]
    return "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in chunk)


# ---- files ---------------------------------------------------------------------------------------------
def text_part(text: str, uri: str, part: str | None) -> str:
    """``text`` whole when one read may return it, else part ``part`` (1-based) of :data:`READ_CHARS` characters."""
    number = _part_number(uri, len(text), "characters", READ_CHARS, part)
    return text if number is None else text[(number - 1) * READ_CHARS:number * READ_CHARS]


def binary_part(path: Path, uri: str, part: str | None, summary: Callable[[], str] = str) -> bytes:
    """A binary file whole when one read may return it, else part ``part`` of :data:`PART_BYTES` bytes, read alone
    (a kept output may be 64 MiB); ``summary()`` says what the file holds when it is refused whole."""
    number = _part_number(uri, path.stat().st_size, "bytes", PART_BYTES, part, summary)
    if number is None:
        return path.read_bytes()
    with open(path, "rb") as f:
        f.seek((number - 1) * PART_BYTES)
        return f.read(PART_BYTES)


def parts_of(length: int, binary: bool) -> int:
    return max(1, math.ceil(length / (PART_BYTES if binary else READ_CHARS)))


def _part_number(uri: str, length: int, unit: str, size: int, part: str | None,
                 summary: Callable[[], str] = str) -> int | None:
    """None for the whole file; a big file read without ``part`` is refused with its parts' URIs, never cut."""
    parts = max(1, math.ceil(length / size))
    if part:
        return _number(part, parts, "part", uri)
    if parts > 1:
        raise StepRefused(f"{uri} is {length:,} {unit}, more than one read returns ({size:,}){summary()}: read it in "
                          f"{parts} parts, {part_uri(uri, 1)} to {part_uri(uri, parts)}")
    return None


def _number(text: str, count: int, what: str, of: str) -> int:
    if not (text.isascii() and text.isdigit() and len(text) < 10 and 1 <= int(text) <= count):
        raise StepRefused(f"{what} {text[:20]!r} of {of} does not exist: {what}s are 1 to {count}")
    return int(text)
