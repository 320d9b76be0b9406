"""The servers under attack (stdio, in-process, HTTP) and a session that sends candidates to them."""

from __future__ import annotations

import base64
import contextlib
import io
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tests.cudaopt_mcp.jail_attack_kit.leaks import Secrets, secret_hits
from tests.cudaopt_mcp.jail_attack_kit.payloads import kernel
from tests.cudaopt_mcp.jail_attack_kit.processes import children_named, proc_table
from tests.cudaopt_mcp.jail_attack_kit.tasks import ROOT, jailbox_task, twin_task
from tests.server_process import stop_server


@dataclass
class Attack:
    """One evaluate call and everything it produced that a client or the log can see."""

    result: dict
    texts: list[str]
    leak: bytes = b""
    outputs: dict[str, bytes] = field(default_factory=dict)

    @property
    def ran(self) -> bool:
        return b"JX-BEGIN" in self.leak and b"JX-END" in self.leak


def decode_npy(data: bytes) -> bytes:
    return np.load(io.BytesIO(data), allow_pickle=False).tobytes()


class Session:
    """An MCP client session held open in a blocking portal, so several tests share one server."""

    def __init__(self, portal, client, *, kind: str, results: Path, task: Path, stderr: Path | None,
                 server_pid: int | None, secrets: Secrets, twin: Path | None = None):
        self.portal, self.client, self.kind = portal, client, kind
        self.results, self.task, self.twin, self.stderr = results, task, twin, stderr
        self.server_pid, self.secrets = server_pid, secrets
        self.transcript: list[str] = []
        self.run_ids: dict[str, str] = {}
        self.port: int | None = None  # the HTTP server's

    def call(self, tool: str, wait_s: float = 120, **args):
        """Call ``tool`` with ``args``; TimeoutError when no answer came within ``wait_s``."""
        async def go():
            import anyio

            with anyio.fail_after(wait_s):
                return await self.client.call_tool(tool, args)

        result = self.portal.call(go)
        self.transcript.append(result.model_dump_json())
        return result

    def read(self, uri: str) -> bytes:
        result = self.portal.call(self.client.read_resource, uri)
        self.transcript.append(result.model_dump_json())
        content = result.contents[0]
        return base64.b64decode(content.blob) if getattr(content, "blob", None) else content.text.encode()

    def run_id(self, task: Path | None = None, fresh: bool = False) -> str:
        task = task or self.task
        if fresh or str(task) not in self.run_ids:
            created = self.call("create_run", task=str(task))
            assert not created.is_error, created.content
            self.run_ids[str(task)] = created.structured_content["run_id"]
        return self.run_ids[str(task)]

    def attack(self, source: str, run_id: str | None = None, timeout_s: float = 30, **args) -> Attack:
        """Evaluate ``source``; read back every artifact and kept output of the candidate."""
        run_id = run_id or self.run_id()
        result = self.call("evaluate", run_id=run_id, source=source, roles=["validation"], timeout_s=timeout_s, **args)
        out = result.structured_content or {}
        texts = [result.model_dump_json()]
        attack = Attack(result=out, texts=texts)
        cid = out.get("candidate_id")
        if cid:
            for artifact in ("kernel.cu", "compile.log", "evaluation.json", "candidate.json"):
                with contextlib.suppress(Exception):
                    texts.append(self.read(f"cudaopt://runs/{run_id}/candidates/{cid}/{artifact}").decode(errors="replace"))
            for case in out.get("outputs_kept") or []:
                for buffer in ("out", "a", "b"):
                    with contextlib.suppress(Exception):
                        raw = self.read(f"cudaopt://runs/{run_id}/candidates/{cid}/outputs/{case}/{buffer}")
                        attack.outputs[f"{case}/{buffer}"] = raw
                        if buffer == "out":
                            attack.leak += decode_npy(raw)
        for uri in (f"cudaopt://runs/{run_id}", f"cudaopt://runs/{run_id}/history", "cudaopt://runs"):
            with contextlib.suppress(Exception):
                texts.append(self.read(uri).decode(errors="replace"))
        return attack

    def hits(self, *items) -> list[str]:
        files = [self.stderr] if self.stderr else []
        return secret_hits(self.secrets, *self.transcript, *items, folders=[self.results, self.secrets.folder],
                           files=files)

    def stderr_text(self) -> str:
        return self.stderr.read_text(errors="replace") if self.stderr else ""

    def alive(self) -> bool:
        if self.server_pid is None:
            return True
        row = proc_table().get(self.server_pid)
        return row is not None and row[1] != "Z"

    def reset_worker(self) -> None:
        """End the worker (and any thread or child a payload left in it): the next call starts a fresh one."""
        self.attack(kernel("    fflush(stdout); fflush(stderr); _exit(0);"))


def server_args(results: Path, *extra: str) -> list[str]:
    return ["-m", "cudaopt_mcp.server", "--results", str(results), "--backend", "cpu", "-v", *extra]


def server_env(secrets: Secrets, **extra: str) -> dict[str, str]:
    return {**os.environ, **secrets.env(), "CUDAOPT_JAIL": "require", **extra}


@contextlib.contextmanager
def stdio_session(tmp: Path, secrets: Secrets, **env: str):
    """A real ``python -m cudaopt_mcp.server`` over stdio, its stderr in a file."""
    from anyio.from_thread import start_blocking_portal
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    results, stderr = tmp / "results", tmp / "server-stderr.log"
    task, twin = jailbox_task(tmp / "tasks"), twin_task(tmp / "tasks")
    params = StdioServerParameters(command=sys.executable, args=server_args(results), env=server_env(secrets, **env),
                                   cwd=str(ROOT))
    with stderr.open("w") as errlog, start_blocking_portal() as portal, \
            portal.wrap_async_context_manager(Client(stdio_client(params, errlog=errlog))) as client:
        pids = [p for p in children_named(os.getpid(), "cudaopt_mcp.server") if str(results) in
                Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")]
        session = Session(portal, client, kind="stdio", results=results, task=task, twin=twin, stderr=stderr,
                          server_pid=pids[0] if pids else None, secrets=secrets)
        try:
            yield session
        finally:
            if session.server_pid and session.alive() and not _responsive(session):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(session.server_pid, signal.SIGKILL)


def _responsive(session: Session) -> bool:
    try:
        session.call("list_tasks", wait_s=10)
        return True
    except Exception:  # noqa: BLE001 - any failure to answer means: kill it
        return False


@contextlib.contextmanager
def inprocess_session(tmp: Path, secrets: Secrets):
    """The server in this very process (the SDK's in-process transport); the secrets in our environment."""
    import pytest
    from anyio.from_thread import start_blocking_portal
    from mcp import Client

    from cudaopt_mcp.server.app import build_server
    from cudaopt_mcp.service.state import ServerConfig

    results = tmp / "results"
    task, twin = jailbox_task(tmp / "tasks"), twin_task(tmp / "tasks")
    with pytest.MonkeyPatch.context() as mp:
        for name, value in secrets.env().items():
            mp.setenv(name, value)
        server = build_server(ServerConfig(results_dir=results, backend="cpu", transport="inprocess"))
        with start_blocking_portal() as portal, portal.wrap_async_context_manager(Client(server)) as client:
            yield Session(portal, client, kind="inprocess", results=results, task=task, twin=twin, stderr=None,
                          server_pid=None, secrets=secrets)


class HttpServer:
    """``python -m cudaopt_mcp.server --transport http`` on 127.0.0.1 with a bearer token, stderr in a file."""

    def __init__(self, tmp: Path, secrets: Secrets, task_root: Path):
        self.port = _free_port()
        self.results, self.stderr = tmp / "results", tmp / "server-stderr.log"
        args = [sys.executable, *server_args(self.results, "--transport", "http", "--port", str(self.port),
                                             "--task-root", str(task_root))]
        self._err = self.stderr.open("w")
        self.proc = subprocess.Popen(args, env=server_env(secrets), cwd=ROOT, stdin=subprocess.DEVNULL,
                                     stdout=self._err, stderr=self._err, start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.stderr.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def stop(self) -> None:
        stop_server(self.proc)
        self._err.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.asynccontextmanager
async def _http_client(url: str, token: str):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=300))
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


@contextlib.contextmanager
def http_session(tmp: Path, secrets: Secrets):
    from anyio.from_thread import start_blocking_portal

    tasks = tmp / "tasks"
    task, twin = jailbox_task(tasks), twin_task(tasks)
    server = HttpServer(tmp, secrets, tasks)
    try:
        with start_blocking_portal() as portal, \
                portal.wrap_async_context_manager(_http_client(server.url, secrets.mcp_token)) as client:
            session = Session(portal, client, kind="http", results=server.results, task=task, twin=twin,
                              stderr=server.stderr, server_pid=server.proc.pid, secrets=secrets)
            session.port = server.port
            yield session
    finally:
        server.stop()
