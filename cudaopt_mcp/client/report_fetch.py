"""Bring a run's report from a remote server (its ``report`` resources) into the local run folder."""

from __future__ import annotations

from pathlib import Path

from mcp import MCPError

from cudaopt_mcp.api import REPORT_MARKDOWN_TEMPLATE, REPORT_TEMPLATE
from cudaopt_mcp.api_pages import READ_CHARS, part_uri
from cudaopt_mcp.client.session import Session

MAX_PARTS = 2000  # 120 MB of HTML: far beyond any report; a bound, so a confused server cannot loop us forever


async def fetch_report(session: Session, run_id: str, folder: Path) -> Path:
    """Write the server's report of ``run_id`` to ``folder/report.html`` and ``report.md``; returns the page."""
    page = REPORT_TEMPLATE.format(run_id=run_id)
    parts: list[str] = []
    for number in range(1, MAX_PARTS + 1):
        try:
            text = await session.resource_text(part_uri(page, number))
        except MCPError:
            if number == 1:
                raise
            break  # the previous part was exactly READ_CHARS long and the last one
        parts.append(text)
        if len(text) < READ_CHARS:
            break
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.md").write_text(await session.resource_text(REPORT_MARKDOWN_TEMPLATE.format(run_id=run_id)))
    html = folder / "report.html"
    html.write_text("".join(parts))
    return html
