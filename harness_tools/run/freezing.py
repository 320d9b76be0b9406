"""Stopping a worker's processes (SIGSTOP) while it waits unused, and letting them go on (SIGCONT).

A stopped process runs nothing: neither its request loop nor a thread its kernel left behind, so a kept worker
takes no CPU time from the launches timed meanwhile. Only the leaves of the worker's process tree are stopped: the
interpreter that runs the executor (it starts no process, :mod:`harness_tools.run.jail_seccomp`); the jail's own
processes above it only wait for it, and a PID namespace's first process takes SIGCONT from outside only with a
handler installed. Found through ``/proc``: Linux only; elsewhere nothing is stopped (and nothing is kept).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

STOP_WAIT_S = 1.0  # a stop is asynchronous: wait this long at most until every leaf shows it


def leaves(pid: int) -> list[int]:
    """The processes under ``pid`` (itself included) that have no children, or [] where /proc cannot tell."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        kids = _children(current)
        if kids is None:
            return []
        if kids:
            todo.extend(kids)
        else:
            found.append(current)
    return found


def stop(pids: list[int]) -> bool:
    """SIGSTOP each of ``pids`` and wait until all are stopped; False when one could not be (it is let go again)."""
    try:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
    except OSError:
        resume(pids)
        return False
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline:
        if all(_state(pid) in ("T", "t") for pid in pids):
            return True
        time.sleep(0.002)
    resume(pids)
    return False


def resume(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError:
            pass  # gone: the caller's next request on it finds out


def _children(pid: int) -> list[int] | None:
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        return [int(k) for t in tasks for k in (t / "children").read_text().split()]
    except (OSError, ValueError):
        return None


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "?"
    return stat[stat.rindex(")") + 2:][:1]  # after "pid (comm) ": the comm may hold spaces and parentheses
