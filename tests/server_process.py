"""Ending a server subprocess the tests started (in its own session): politely, then its whole group."""

from __future__ import annotations

import os
import signal
import subprocess


def stop_server(proc: subprocess.Popen, grace_s: float = 30.0) -> None:
    """SIGTERM and wait; if it does not end in ``grace_s``, SIGKILL its process group (its workers with it)."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=grace_s)
