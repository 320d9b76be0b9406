"""Shared pieces for the MCP server tests: kernels, a small task folder, a server process."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness_tools.task.loading import BUNDLED_DIR

ROOT = Path(__file__).resolve().parents[2]

# Copies rows instead of transposing: right on 1×1, wrong as soon as the matrix is not a single element.
WRONG_TRANSPOSE = """
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) out[(size_t)r * cols + c] = in[(size_t)r * cols + c];
}
"""

BROKEN_TRANSPOSE = """extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols)
{
    undefined_thing = 1;
}
"""

SLOW_TRANSPOSE = """
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols)
{
    volatile float sink = 0.0f;
    for (long long i = 0; i < 4000000000LL; ++i) sink += 1.0f;  // about a minute on a CPU: killed mid-run
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) out[(size_t)c * rows + r] = in[(size_t)r * cols + c] + sink * 0.0f;
}
"""


@pytest.fixture
def small_task(tmp_path) -> Path:
    """The bundled transpose task with tiny performance cases, so timing on the cpu backend is quick."""
    folder = tmp_path / "small_transpose"
    shutil.copytree(BUNDLED_DIR / "transpose", folder, ignore=shutil.ignore_patterns("__pycache__"))
    spec = json.loads((folder / "task.json").read_text())
    spec["name"] = "small_transpose"
    spec["cases"] = [
        {"name": "val_odd_33x65", "role": "validation", "sizes": {"rows": 33, "cols": 65}},
        {"name": "val_col_100x1", "role": "validation", "sizes": {"rows": 100, "cols": 1}},
        {"name": "perf_64x96", "role": "performance", "sizes": {"rows": 64, "cols": 96}},
        {"name": "perf_37x51", "role": "performance", "sizes": {"rows": 37, "cols": 51}},
    ]
    (folder / "task.json").write_text(json.dumps(spec, indent=1))
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """``python -m cudaopt_mcp.server`` as a real subprocess (its own session, so kill -9 takes its worker too)."""

    def __init__(self, *args: str, env: dict[str, str] | None = None):
        self.args = [sys.executable, "-m", "cudaopt_mcp.server", *args]
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None

    def start(self, port: int) -> ServerProcess:
        self.proc = subprocess.Popen(self.args, env=self.env, cwd=ROOT, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.proc.stderr.read().decode()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("server did not start listening within 60 s")

    def kill9(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill9()
        if self.proc:
            for stream in (self.proc.stdout, self.proc.stderr):
                stream.close()


@pytest.fixture
def http_server(tmp_path):
    """Start servers on fresh ports; every one started is stopped at the end of the test."""
    started: list[ServerProcess] = []

    def start(results: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[ServerProcess, str]:
        port = free_port()
        server = ServerProcess("--transport", "http", "--port", str(port), "--results", str(results),
                               "--backend", "cpu", *extra, env=env).start(port)
        started.append(server)
        return server, f"http://127.0.0.1:{port}/mcp"

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def kernels() -> dict[str, str]:
    return {"wrong": WRONG_TRANSPOSE, "broken": BROKEN_TRANSPOSE, "slow": SLOW_TRANSPOSE}
