"""The server as independent MCP clients see it: conformance/suite.mjs drives the official TypeScript SDK client
and the MCP Inspector CLI (both pinned in conformance/package-lock.json) over stdio and streamable HTTP.

The suite prints one PASS/FAIL line per check (docs/mcp_conformance.md maps them to the specification) and
exits non-zero when any fails; a failure here shows its whole output.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.server_process import stop_server

ROOT = Path(__file__).resolve().parents[3]
CONFORMANCE = ROOT / "conformance"
SUITE_TIMEOUT_S = 600  # a cancel that does not stop the work costs the spinning kernel's 60 s timeout

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (CONFORMANCE / "node_modules").is_dir(),
    reason="the conformance clients are not installed: run `npm ci --prefix conformance` (needs Node 20+)")


def run_suite(*target: str) -> None:
    out = subprocess.run(["node", str(CONFORMANCE / "suite.mjs"), *target], check=False, cwd=ROOT,
                         capture_output=True, text=True, timeout=SUITE_TIMEOUT_S)
    assert out.returncode == 0, f"conformance suite exited {out.returncode}:\n{out.stdout}\n{out.stderr[-4000:]}"


def test_conformance_over_stdio(tmp_path):
    run_suite("--", sys.executable, "-m", "cudaopt_mcp.server", "--backend", "cpu",
              "--results", str(tmp_path / "results"))


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host.strip("[]"), port), timeout=0.5):
            return True
    except OSError:
        return False


def serve_http(tmp_path: Path, log: Path) -> tuple[subprocess.Popen, str]:
    """``cudaopt serve`` on a port the kernel picks; its URL read back from the start-up line on stderr."""
    with log.open("wb") as err:  # a file, not a pipe: a chatty server never blocks on a full pipe
        proc = subprocess.Popen([sys.executable, "-m", "cudaopt_mcp.cli", "serve", "--transport", "http",
                                 "--port", "0", "--backend", "cpu", "--results", str(tmp_path / "results")],
                                cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"serving streamable HTTP at (http://(\S+?):(\d+)/mcp)", log.read_text())
        if found and _listening(found[2], int(found[3])):
            return proc, found[1]
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    stop_server(proc)
    raise RuntimeError(f"cudaopt serve did not start: {log.read_text()}")


def test_conformance_over_streamable_http(tmp_path):
    log = tmp_path / "serve.log"
    proc, url = serve_http(tmp_path, log)
    try:
        run_suite("--url", url)
    except AssertionError as failed:
        raise AssertionError(f"{failed}\nserver log (tail):\n{log.read_text()[-4000:]}") from None
    finally:
        stop_server(proc)
