"""What compute-sanitizer found, as data (:class:`SanitizerReport`, :class:`SanitizerFinding`) and as a short text
for a model; the text report is read by :mod:`harness_tools.inspect.sanitizer_parse`."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field

Tool = Literal["memcheck", "racecheck", "initcheck", "synccheck"]
TOOLS: tuple[str, ...] = ("memcheck", "racecheck", "initcheck", "synccheck")
MAX_FINDINGS = 20
TEXT_CHARS = 1200

Triple = tuple[int, int, int]


class SanitizerFinding(BaseModel):
    tool: Tool
    kind: str = Field(description="short category, e.g. invalid_global_read, race_read_after_write, barrier_divergence")
    message: str = Field(description="the record's first line, without the ========= prefix")
    severity: str | None = Field(None, description="racecheck's level: error, warning or info")
    kernel: str | None = None
    file: str | None = Field(None, description="of the first frame that has one; the caller's source name when it matches")
    line: int | None = None
    thread: Triple | None = None
    block: Triple | None = None
    access_size: int | None = Field(None, description="bytes")
    address: str | None = Field(None, description="e.g. 'Address 0x.. is out of bounds and is 4 bytes after ...'")
    peers: list[str] = Field(default_factory=list, description="racecheck: the other accesses of the race")
    count: int = Field(1, description="how many identical reports were folded into this one")


class SanitizerReport(BaseModel):
    tool: Tool
    findings: list[SanitizerFinding] = Field(default_factory=list)
    omitted: int = Field(0, description="distinct findings left out beyond the first MAX_FINDINGS")
    summary_errors: int | None = Field(None, description="ERROR SUMMARY (racecheck: errors of RACECHECK SUMMARY)")
    summary_warnings: int | None = Field(None, description="racecheck only: warnings of RACECHECK SUMMARY")
    clean: bool = False
    tool_error: str | None = Field(None, description="the run itself failed (tool missing, not attached, internal error)")

    def text(self) -> str:
        """A compact summary for a model, at most TEXT_CHARS characters."""
        head = f"compute-sanitizer {self.tool}: "
        if self.clean:
            return head + "clean (" + _summary_words(self) + ")"
        lines = [head + "the run failed (not a kernel finding): " + self.tool_error] if self.tool_error else []
        if self.findings or not self.tool_error:
            lines.append(f"{head}{len(self.findings) + self.omitted} distinct finding(s); " + _summary_words(self))
        for shown, f in enumerate(self.findings):
            if sum(len(x) + 1 for x in lines) + len(entry := _finding_line(f)) + 40 > TEXT_CHARS:
                break  # leave room for the line below
            lines.append(entry)
        else:
            shown = len(self.findings)
        if hidden := len(self.findings) - shown + self.omitted:
            lines.append(f"(+{hidden} more distinct finding(s) not shown)")
        return "\n".join(lines)[:TEXT_CHARS]


def _summary_words(r: SanitizerReport) -> str:
    if r.summary_errors is None:
        return "no summary line"
    warnings = f", {r.summary_warnings} warnings" if r.summary_warnings is not None else ""
    return f"{'RACECHECK' if warnings else 'ERROR'} SUMMARY {r.summary_errors} errors{warnings}"


def _finding_line(f: SanitizerFinding) -> str:
    where = f"{f.file}:{f.line}" if f.file else "(no line info)" if f.kernel else "host side"
    head = f"- {where}" + (f" in {_brief(f.kernel)}" if f.kernel else "") + f": {f.kind}"
    head += (f" {f.access_size}B" if f.access_size else "") + (f" ({f.severity})" if f.severity not in (None, "error") else "")
    parts = [head + (f" x{f.count}" if f.count > 1 else "")]
    if not f.kind.startswith(_SELF_DESCRIBING):  # the kind alone does not say what happened
        parts.append(f.message[:140])
    if f.thread:
        parts.append(f"e.g. thread {_fmt(f.thread)} block {_fmt(f.block)}")
    elif f.block:
        parts.append(f"block {_fmt(f.block)}")
    if f.peers:
        parts.append("vs " + ", ".join(f.peers[:3]))
    if f.address:
        parts.append(_short_address(f.address))
    return "; ".join(parts)[:300]


_SELF_DESCRIBING = ("invalid_", "misaligned_", "potential_invalid_", "uninitialized_", "race_", "barrier_", "warp_barrier_")


def _short_address(detail: str) -> str:
    """'Address 0x.. is out of bounds and is 1 bytes after the nearest allocation at 0x.. of size 4,000 bytes'
    -> 'out of bounds: 1 bytes after a 4,000-byte allocation'."""
    m = re.search(r"is out of bounds(?: and is ([\d,]+) bytes (after|before) the nearest allocation at 0x[0-9a-fA-F]+ "
                  r"of size ([\d,]+) bytes)?", detail)
    if m:
        return "out of bounds" + (f": {m[1]} bytes {m[2]} a {m[3]}-byte allocation" if m[1] else "")
    return "misaligned address" if "misaligned" in detail else detail[:120]


def _brief(name: str) -> str:
    """Long (templated, namespaced) names: template arguments dropped, then the tail kept, where the name is."""
    while len(name) > 60 and (shorter := re.sub(r"<[^<>]*>", "", name)) != name:
        name = shorter
    return name if len(name) <= 60 else "..." + name[-57:]


def _fmt(t: Triple | None) -> str:
    return "(" + ",".join(str(v) for v in t) + ")" if t else "?"
