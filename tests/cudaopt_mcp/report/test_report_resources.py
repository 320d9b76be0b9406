"""The report as MCP resources, read through the SDK's client from the real server (cpu backend): built on demand,
served whole (markdown) or in parts (HTML), rebuilt when the run changes, and honest about empty and failed runs."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client, MCPError

from cudaopt_mcp.api_pages import READ_CHARS
from cudaopt_mcp.server.app import build_server
from cudaopt_mcp.service.state import ServerConfig

BOTH = ["validation", "performance"]


def client(results) -> Client:
    return Client(build_server(ServerConfig(results_dir=results, backend="cpu", transport="inprocess")))


async def read_text(c: Client, uri: str) -> tuple[str, str]:
    content = (await c.read_resource(uri)).contents[0]
    return content.text, content.mime_type


async def whole_page(c: Client, run_id: str) -> str:
    """The HTML report, part after part, as a client that follows the refusal's instructions would read it."""
    uri = f"cudaopt://runs/{run_id}/report"
    try:
        return (await read_text(c, uri))[0]
    except MCPError as refusal:
        assert "read it in" in str(refusal) and f"{uri}?part=1" in str(refusal)
        parts = int(str(refusal).split(" parts,")[0].rsplit(" ", 1)[1])
    return "".join([(await read_text(c, f"{uri}?part={n}"))[0] for n in range(1, parts + 1)])


def test_an_empty_run_and_a_run_without_a_correct_candidate_say_so(tmp_path, small_task, kernels):
    async def main():
        async with client(tmp_path / "results") as c:
            run_id = (await c.call_tool("create_run", {"task": str(small_task)})).structured_content["run_id"]
            text, mime = await read_text(c, f"cudaopt://runs/{run_id}/report.md")
            assert mime == "text/markdown" and "This run has no evaluations yet" in text
            page = await whole_page(c, run_id)
            assert page.startswith("<!DOCTYPE html>") and "no evaluations yet" in page and "<svg" not in page

            # only wrong and broken candidates: the report is rebuilt (the run changed) and says none is correct
            await c.call_tool("evaluate", {"run_id": run_id, "source": kernels["wrong"], "roles": BOTH})
            await c.call_tool("compile", {"run_id": run_id, "source": kernels["broken"]})
            text, _ = await read_text(c, f"cudaopt://runs/{run_id}/report.md")
            assert "No candidate is correct" in text and "wrong output 1" in text and "compile error 1" in text
            assert "best: none" in text
            page = await whole_page(c, run_id)
            assert "<figure id='progress'><svg" in page and "No candidate passed every check." in page
    anyio.run(main)


def test_the_html_report_is_served_in_parts_that_make_the_file(tmp_path, small_task, kernels):
    async def main():
        async with client(tmp_path / "results") as c:
            run_id = (await c.call_tool("create_run", {"task": str(small_task)})).structured_content["run_id"]
            await c.call_tool("evaluate", {"run_id": run_id, "roles": BOTH})
            await c.call_tool("evaluate", {"run_id": run_id, "source": kernels["wrong"], "roles": BOTH})
            page = await whole_page(c, run_id)
            on_disk = (tmp_path / "results" / run_id / "report" / "report.html").read_text()
            assert page == on_disk and len(page) > READ_CHARS
            _, mime = await read_text(c, f"cudaopt://runs/{run_id}/report?part=1")
            assert mime == "text/html"
            stamp = (tmp_path / "results" / run_id / "report" / "stamp.json").stat().st_mtime_ns
            await whole_page(c, run_id)  # nothing changed: served as built, not rebuilt
            assert (tmp_path / "results" / run_id / "report" / "stamp.json").stat().st_mtime_ns == stamp
    anyio.run(main)


@pytest.mark.parametrize("uri", ["cudaopt://runs/run-999/report.md", "cudaopt://runs/run-999/report?part=1",
                                 "cudaopt://runs/..%2F..%2Fetc/report.md", "cudaopt://runs/run-1/report.md"])
def test_unknown_or_malformed_runs_are_refused(tmp_path, uri):
    async def main():
        async with client(tmp_path / "results") as c:
            with pytest.raises(MCPError) as refusal:
                await c.read_resource(uri)
            assert "run" in str(refusal.value)
    anyio.run(main)
