"""Who may talk to the HTTP server: loopback rules, DNS-rebinding protection on every loopback host, tokens elsewhere.

Real servers here listen on loopback addresses only (127.0.0.0/8, ::1), on a port the kernel picks
(``--port 0``); the address is read back from the server's start-up line.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from cudaopt_mcp.server.app import build_server
from cudaopt_mcp.server.transports import (
    BearerAuth,
    LowercaseHostOrigin,
    http_app,
    http_token,
    loopback_address,
    rebinding_protection,
)
from cudaopt_mcp.service.state import ServerConfig
from tests.server_process import stop_server

ROOT = Path(__file__).resolve().parents[3]
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
PING = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
TOKEN = "s3cr3t-" + "q" * 25
NO_TOKEN_ENV = {k: v for k, v in os.environ.items() if k != "CUDAOPT_MCP_TOKEN"}


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


needs_ipv6 = pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback on this machine")


class Served:
    """``cudaopt serve --transport http --host HOST --port 0`` as a subprocess; stderr goes to a file (never blocks)."""

    def __init__(self, tmp: Path, host: str, token: str | None = None):
        self.log = tmp / f"serve-{abs(hash(host))}.log"
        env = {**NO_TOKEN_ENV, **({"CUDAOPT_MCP_TOKEN": token} if token else {})}
        with self.log.open("wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "cudaopt_mcp.cli", "serve", "--transport", "http",
                                          "--host", host, "--port", "0", "--results", str(tmp / "results"),
                                          "--backend", "cpu"], env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = re.search(r"serving streamable HTTP at (http://(\S+?):(\d+)/mcp)( \(bound to (\S+?)\))?",
                              self.log.read_text())
            if found:
                self.url, self.name, self.port = found[1], found[2], int(found[3])
                self.bound = found[5] or self.name
                self._wait_listening()
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}: {self.log.read_text()}")
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server did not start within 60 s: {self.log.read_text()}")

    def _wait_listening(self) -> None:
        address = self.bound.strip("[]")
        for _ in range(100):
            try:
                with socket.create_connection((address, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"nothing listens on {self.bound}:{self.port}")

    def url_for(self, name: str) -> str:
        return f"http://{name}:{self.port}/mcp"

    def stop(self) -> None:
        stop_server(self.proc)


@pytest.fixture
def serve(tmp_path):
    started: list[Served] = []

    def start(host: str, token: str | None = None) -> Served:
        started.append(Served(tmp_path, host, token))
        return started[-1]

    yield start
    for s in started:
        s.stop()


async def _status(url: str, headers: dict[str, str], http: httpx2.AsyncClient | None = None) -> int:
    async with httpx2.AsyncClient(timeout=30) as own:
        return (await (http or own).post(url, headers={**MCP_HEADERS, **headers}, content=PING)).status_code


async def _tool_names(url: str, token: str | None = None) -> set[str]:
    if token is None:
        async with Client(url) as c:
            return {t.name for t in (await c.list_tools()).tools}
    authed = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30.0, read=300.0))
    async with authed, Client(streamable_http_client(url, http_client=authed)) as c:
        return {t.name for t in (await c.list_tools()).tools}


def _foreign_headers(s: Served) -> list[dict[str, str]]:
    """Host and Origin values a DNS-rebinding page (or a page of another local port) would send."""
    p, n = s.port, s.name
    return [{"Host": "evil.example"}, {"Host": f"evil.example:{p}"}, {"Host": f"{n}:{p + 1 if p < 65535 else 1}"},
            {"Host": f"{n}:{p}.evil.example"}, {"Host": n if p != 80 else "evil.example"},
            {"Origin": "http://evil.example"}, {"Origin": f"http://evil.example:{p}"}, {"Origin": "null"},
            {"Origin": f"http://{n}:{p + 1 if p < 65535 else 1}"}, {"Origin": f"http://{n}:{p}.evil.example"},
            {"Origin": f"https://evil.example:{p}"}]


# ---- the rules, without a server ----

@pytest.mark.parametrize(("host", "bound"), [
    ("127.0.0.1", "127.0.0.1"), ("127.0.0.2", "127.0.0.2"), ("127.255.255.254", "127.255.255.254"),
    ("localhost", "127.0.0.1"), ("LOCALHOST", "127.0.0.1"), ("LocalHost", "127.0.0.1"), ("localhost.", "127.0.0.1"),
    ("LOCALHOST.", "127.0.0.1"), ("::1", "::1"), ("[::1]", "::1"), ("0:0:0:0:0:0:0:1", "::1"),
    ("::ffff:127.0.0.1", "127.0.0.1"), ("[::ffff:127.0.0.2]", "127.0.0.2"), ("::FFFF:7f00:1", "127.0.0.1"),
    # all interfaces, other addresses, and names or spellings that only a resolver maps to loopback: need a token
    ("0.0.0.0", None), ("::", None), ("[::]", None), ("10.1.2.3", None), ("::ffff:10.0.0.1", None),
    ("::127.0.0.1", None), ("127.1", None), ("0x7f000001", None), ("2130706433", None), ("127.000.0.1", None),
    ("[127.0.0.1]", None), ("::1%lo", None), ("ip6-localhost", None), ("evil.localhost", None),
    ("localhost..", None), (" localhost", None), ("", None),
])
def test_which_hosts_count_as_loopback(host, bound, monkeypatch):
    monkeypatch.delenv("CUDAOPT_MCP_TOKEN", raising=False)
    assert loopback_address(host) == bound
    if bound is None:
        with pytest.raises(Exception, match="CUDAOPT_MCP_TOKEN"):
            http_token(host)
    else:
        assert http_token(host) is None


def test_rebinding_allow_lists_name_the_actual_port_only():
    s = rebinding_protection("127.0.0.2", 9000)
    assert s.enable_dns_rebinding_protection
    assert s.allowed_hosts == ["127.0.0.2:9000", "localhost:9000", "127.0.0.1:9000", "[::1]:9000"]
    assert s.allowed_origins == [f"http://{h}" for h in s.allowed_hosts]
    assert not any("*" in v for v in [*s.allowed_hosts, *s.allowed_origins])  # no wildcard ports
    assert rebinding_protection("LOCALHOST.", 5).allowed_hosts == ["localhost.:5", "127.0.0.1:5", "localhost:5",
                                                                   "[::1]:5"]
    assert rebinding_protection("::ffff:127.0.0.1", 5).allowed_hosts[0] == "[::ffff:127.0.0.1]:5"
    assert "[::1]" in rebinding_protection("[::1]", 80).allowed_hosts  # port 80: clients leave the port out
    for host in ("0.0.0.0", "::", "ip6-localhost"):
        assert not rebinding_protection(host, 9000).enable_dns_rebinding_protection


# ---- real servers on loopback ----

@pytest.mark.parametrize("host", ["127.0.0.2", "LOCALHOST", "localhost.", "::ffff:127.0.0.1",
                                  pytest.param("[::1]", marks=needs_ipv6)])
def test_loopback_server_refuses_foreign_host_and_origin_and_serves_clients(tmp_path, serve, host):
    s = serve(host)
    assert "bearer token" not in s.log.read_text()

    conn = s.url_for(s.bound)  # connect to the address; the Host header names the host as given ("localhost." may not resolve)
    given = {"Host": f"{s.name}:{s.port}"}

    async def main():
        for headers in _foreign_headers(s):
            want = 421 if "Host" in headers else 403
            assert await _status(conn, {**given, **headers}) == want, headers
        assert await _status(conn, {**given, "Origin": f"http://{s.name}:{s.port}"}) not in (401, 403, 421)
        # the same names in another letter case are the same names
        upper = {"Host": f"{s.name.upper()}:{s.port}", "Origin": f"HTTP://{s.name.upper()}:{s.port}"}
        assert await _status(conn, upper) not in (401, 403, 421)
        names = {s.bound, *([s.name] if not s.name.endswith(".") else []),
                 *(["localhost", "LOCALHOST"] if s.bound == "127.0.0.1" else [])}  # names that reach it
        for name in names:
            assert {"create_run", "evaluate", "get_run"} <= await _tool_names(s.url_for(name)), name
    anyio.run(main)


def test_127_0_0_2_binds_only_that_address(tmp_path, serve):
    s = serve("127.0.0.2")
    assert s.bound == "127.0.0.2"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", s.port), timeout=2).close()


def test_localhost_binds_127_0_0_1_and_says_so(tmp_path, serve):
    s = serve("LOCALHOST")
    assert (s.name, s.bound) == ("localhost", "127.0.0.1")
    assert "(bound to 127.0.0.1)" in s.log.read_text()


def test_token_on_loopback_adds_to_rebinding_protection(tmp_path, serve):
    s = serve("127.0.0.2", token=TOKEN)
    assert "bearer token required" in s.log.read_text()

    async def main():
        assert await _status(s.url, {}) == 401
        assert await _status(s.url, {"Authorization": "Bearer wrong"}) == 401
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert await _status(s.url, {**auth, "Host": "evil.example"}) == 421
        assert await _status(s.url, {**auth, "Origin": "http://evil.example"}) == 403
        assert "evaluate" in await _tool_names(s.url, token=TOKEN)
    anyio.run(main)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "[::]", "127.1", "ip6-localhost", "evil.localhost"])
def test_non_loopback_without_token_refuses_to_start(tmp_path, host):
    out = subprocess.run([sys.executable, "-m", "cudaopt_mcp.cli", "serve", "--transport", "http", "--host", host,
                          "--port", "0", "--results", str(tmp_path / "r"), "--backend", "cpu"],
                         check=False, env=NO_TOKEN_ENV, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert f"refusing to serve HTTP on non-loopback host {host!r} without a bearer token" in out.stderr
    assert "CUDAOPT_MCP_TOKEN" in out.stderr and "Traceback" not in out.stderr and out.stdout == ""


def test_busy_loopback_port_is_a_clear_error(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.2", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "cudaopt_mcp.server", "--transport", "http", "--host", "127.0.0.2",
                              "--port", str(port), "--results", str(tmp_path / "r"), "--backend", "cpu"],
                             check=False, env=NO_TOKEN_ENV, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and f"cannot listen on 127.0.0.2:{port}" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


# ---- a token on all interfaces, in process (no socket on a non-loopback address) ----

def test_token_on_all_interfaces_is_the_defence_not_host_checks(tmp_path, monkeypatch):
    """On a non-loopback bind the names clients use are not known, so Host/Origin are not checked; the token is."""
    monkeypatch.setenv("CUDAOPT_MCP_TOKEN", TOKEN)
    config = ServerConfig(results_dir=tmp_path / "r", transport="http", host="0.0.0.0", port=8765)
    app = http_app(build_server(config), config)
    assert isinstance(app, BearerAuth) and not isinstance(app.app, LowercaseHostOrigin)
    starlette = app.app

    async def main():
        async with starlette.router.lifespan_context(starlette):
            transport = httpx2.ASGITransport(app=app)
            async with httpx2.AsyncClient(transport=transport, base_url="http://server.example:8765") as http:
                url = "http://server.example:8765/mcp"
                assert await _status(url, {"Host": "evil.example"}, http) == 401
                assert await _status(url, {"Origin": "http://evil.example"}, http) == 401
                ok = await _status(url, {"Authorization": f"Bearer {TOKEN}", "Host": "server.example:8765"}, http)
                assert ok not in (401, 403, 421)
    anyio.run(main)
