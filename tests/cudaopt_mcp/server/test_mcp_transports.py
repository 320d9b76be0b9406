"""The MCP server as a real process: stdio, streamable HTTP on 127.0.0.1, restarts, kill -9, the Inspector CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from cudaopt_mcp.errors import ServeError
from cudaopt_mcp.server.app import build_server
from cudaopt_mcp.server.transports import BearerAuth, http_app
from cudaopt_mcp.service.state import ServerConfig

ROOT = Path(__file__).resolve().parents[3]
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
PING = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'


def stdio(results: Path, *extra: str, **client) -> Client:
    """A client of a real server process over stdio (cpu backend unless ``extra`` says otherwise); ``client``: the
    Client's own options (mode, extensions)."""
    # the SDK gives a stdio server a minimal environment; ours needs this interpreter's (PYTHONPATH where set)
    return Client(StdioServerParameters(command=sys.executable, cwd=str(ROOT), env=dict(os.environ),
                                        args=["-m", "cudaopt_mcp.server", "--results", str(results), "--backend", "cpu",
                                              "-v", *extra]), **client)


async def call(c: Client, tool: str, **args):
    return await c.call_tool(tool, args)


def test_stdio_server_and_restart_continue_the_run(tmp_path, kernels):
    results = tmp_path / "results"

    async def first():
        async with stdio(results) as c:  # -v: the server logs, and only to stderr, or the protocol would break
            assert len((await c.list_tools()).tools) == 16
            assert (await call(c, "create_run", task="transpose")).structured_content["run_id"] == "run-001"
            base = await call(c, "evaluate", run_id="run-001")
            assert not base.is_error and base.structured_content["correct"]

    async def second():
        async with stdio(results) as c:  # a new server process on the same results folder
            runs = (await call(c, "list_runs")).structured_content["runs"]
            assert [r["run_id"] for r in runs] == ["run-001"]
            got = (await call(c, "get_run", run_id="run-001")).structured_content
            assert [r["status"] for r in got["run"]["recent"]] == ["correct"]
            wrong = await call(c, "evaluate", run_id="run-001", source=kernels["wrong"])
            assert wrong.is_error and wrong.structured_content["candidate_id"] == "c0002"
            again = await call(c, "evaluate", run_id="run-001", candidate_id="c0001")
            assert again.structured_content["correct"] and again.structured_content["candidate_id"] == "c0001"
            assert (await call(c, "create_run", task="reduce_sum")).structured_content["run_id"] == "run-002"
            events = (await call(c, "history", run_id="run-001", limit=100)).structured_content["events"]
            assert [e["event"] for e in events if e["event"] == "evaluate"] == ["evaluate"] * 3

    anyio.run(first)
    anyio.run(second)


def test_streamable_http_on_loopback(tmp_path, http_server):
    _, url = http_server(tmp_path / "results")

    async def main():
        async with Client(url) as c:
            run_id = (await call(c, "create_run", task="transpose")).structured_content["run_id"]
            result = await call(c, "evaluate", run_id=run_id)
            assert result.structured_content["correct"], result.content
            text = (await c.read_resource(f"cudaopt://runs/{run_id}/candidates/c0001/kernel.cu")).contents[0].text
            assert "__global__" in text
        async with httpx2.AsyncClient() as http:  # DNS-rebinding protection: foreign Host or Origin refused
            host = await http.post(url, headers={**MCP_HEADERS, "Host": "evil.example"}, content=PING)
            origin = await http.post(url, headers={**MCP_HEADERS, "Origin": "http://evil.example"}, content=PING)
            assert host.status_code == 421 and origin.status_code == 403
    anyio.run(main)


def test_get_with_last_event_id_opens_a_stream_rather_than_failing(tmp_path, http_server):
    """No event store, so nothing to replay: a resuming GET gets a fresh stream (it was an HTTP 500)."""
    _, url = http_server(tmp_path / "results")
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}

    async def main():
        async with httpx2.AsyncClient(timeout=30) as http:
            opened = await http.post(url, headers=MCP_HEADERS, content=json.dumps(init).encode())
            assert opened.status_code == 200, opened.text
            session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
            await http.post(url, headers={**MCP_HEADERS, **session},
                            content=b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
            get_headers = {"Accept": "text/event-stream", **session, "Last-Event-ID": "stream-1_42"}
            async with http.stream("GET", url, headers=get_headers) as stream:
                assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
    anyio.run(main)


def test_two_http_clients_on_one_run_lose_no_candidates(tmp_path, http_server):
    _, url = http_server(tmp_path / "results")
    ids: list[str] = []

    async def worker(offset: int):
        async with Client(url) as c:
            for i in range(5):
                result = await call(c, "compile", run_id="run-001", defines={"VARIANT": offset + i})
                ids.append(result.structured_content["candidate_id"])

    async def main():
        async with Client(url) as c:
            await call(c, "create_run", task="transpose")
        async with anyio.create_task_group() as tg:
            for offset in (0, 100, 200):
                tg.start_soon(worker, offset)
    anyio.run(main)
    assert sorted(ids) == [f"c{i:04d}" for i in range(1, 16)]
    assert len(list((tmp_path / "results" / "run-001" / "candidates").iterdir())) == 15


def test_non_loopback_bind_without_token_refuses_to_start(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "CUDAOPT_MCP_TOKEN"}
    for host, extra in (("0.0.0.0", {}), ("0.0.0.0", {"CUDAOPT_MCP_TOKEN": "short"})):
        out = subprocess.run([sys.executable, "-m", "cudaopt_mcp.server", "--transport", "http", "--host", host,
                              "--port", "1", "--results", str(tmp_path / "r"), "--backend", "cpu"],
                             check=False, env={**env, **extra}, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and "CUDAOPT_MCP_TOKEN" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr and out.stdout == ""


def test_token_rules_and_bearer_auth(tmp_path, http_server, monkeypatch):
    server = build_server(ServerConfig(results_dir=tmp_path / "r", transport="http", host="0.0.0.0"))
    monkeypatch.delenv("CUDAOPT_MCP_TOKEN", raising=False)
    with pytest.raises(ServeError):
        http_app(server, ServerConfig(transport="http", host="0.0.0.0"))
    monkeypatch.setenv("CUDAOPT_MCP_TOKEN", "x" * 32)
    assert isinstance(http_app(server, ServerConfig(transport="http", host="0.0.0.0")), BearerAuth)

    token = "t0k3n-" + "z" * 26  # a token set on loopback is enforced too
    _, url = http_server(tmp_path / "results", env={"CUDAOPT_MCP_TOKEN": token})

    async def main():
        async with httpx2.AsyncClient() as http:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": token}):
                refused = await http.post(url, headers={**MCP_HEADERS, **headers}, content=PING)
                assert refused.status_code == 401
        authed = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                    timeout=httpx2.Timeout(30.0, read=300.0))
        async with authed, Client(streamable_http_client(url, http_client=authed)) as c:
            assert len((await c.list_tools()).tools) == 16
    anyio.run(main)


def test_kill_9_mid_evaluation_then_restart_continues(tmp_path, http_server, kernels):
    results = tmp_path / "results"
    server, url = http_server(results)
    marker = results / "run-001" / "candidates" / "c0002" / ".evaluating"

    ended = anyio.Event()

    async def doomed_evaluation():
        try:
            async with Client(url) as c:
                await call(c, "evaluate", run_id="run-001", source=kernels["slow"], timeout_s=300)
        except Exception:  # noqa: BLE001, S110 - the server dies under the call, as intended
            pass
        finally:
            ended.set()

    async def main():
        async with Client(url) as c:
            await call(c, "create_run", task="transpose")
            assert (await call(c, "evaluate", run_id="run-001")).structured_content["correct"]
        async with anyio.create_task_group() as tg:
            tg.start_soon(doomed_evaluation)
            with anyio.fail_after(120):
                while not marker.exists():
                    await anyio.sleep(0.1)
            await anyio.sleep(0.5)
            server.kill9()  # the server and its worker, as after a crash of the machine's session
            with anyio.move_on_after(15):  # the client notices the broken connection (or is given up on)
                await ended.wait()
            tg.cancel_scope.cancel()

    anyio.run(main)
    for path in results.rglob("*.json"):
        json.loads(path.read_text())  # nothing torn
    _, url2 = http_server(results)

    async def after():
        async with Client(url2) as c:
            got = (await call(c, "get_run", run_id="run-001")).structured_content
            assert [r["status"] for r in got["run"]["recent"]] == ["correct", "interrupted"]
            nxt = await call(c, "evaluate", run_id="run-001", source=kernels["wrong"])
            assert nxt.structured_content["candidate_id"] == "c0003" and nxt.is_error
            assert (await call(c, "evaluate", run_id="run-001", candidate_id="c0001")).structured_content["correct"]
    anyio.run(after)


INSPECTOR = ROOT / "conformance" / "node_modules" / ".bin" / "mcp-inspector"  # the version package-lock.json pins


@pytest.mark.skipif(not INSPECTOR.is_file(), reason="the MCP Inspector CLI pinned in conformance/ is not installed: "
                    "run `npm ci --prefix conformance`")
def test_mcp_inspector_cli_lists_tools_and_evaluates(tmp_path):
    server = [sys.executable, "-m", "cudaopt_mcp.server", "--results", str(tmp_path / "results"), "--backend", "cpu"]

    def inspector(*args: str) -> dict:
        out = subprocess.run([str(INSPECTOR), "--cli", *server, *args], check=False, cwd=ROOT, capture_output=True, text=True,
                             timeout=180)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    tools = inspector("--method", "tools/list")["tools"]
    assert {t["name"] for t in tools} >= {"create_run", "evaluate", "compile", "get_run"}
    created = inspector("--method", "tools/call", "--tool-name", "create_run", "--tool-arg", "task=transpose")
    assert created["structuredContent"]["run_id"] == "run-001"
    evaluated = inspector("--method", "tools/call", "--tool-name", "evaluate", "--tool-arg", "run_id=run-001")
    assert evaluated["structuredContent"]["correct"] is True and not evaluated.get("isError")
