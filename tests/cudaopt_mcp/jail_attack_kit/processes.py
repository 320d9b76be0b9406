"""The host's processes and listening sockets, read from /proc: what a payload may have left behind or reached."""

from __future__ import annotations

import os
import secrets as _random
import socket
import time
from dataclasses import dataclass
from pathlib import Path


def proc_table() -> dict[int, tuple[int, str, int]]:
    """pid -> (ppid, state, start time) for every process visible here."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2:].split()
        table[int(entry)] = (int(rest[1]), rest[0], int(rest[19]))
    return table


def descendants(pid: int) -> dict[int, int]:
    """pid -> start time of every living descendant of ``pid``."""
    table = proc_table()
    found: dict[int, int] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, state, start) in table.items():
            if ppid == parent and child not in found and state != "Z":
                found[child] = start
                frontier.append(child)
    return found


def alive(processes: dict[int, int]) -> dict[int, str]:
    """Those of ``processes`` (pid -> start time) still running (not reaped, not zombies): pid -> cmdline."""
    table = proc_table()
    left = {}
    for pid, start in processes.items():
        row = table.get(pid)
        if row and row[2] == start and row[1] != "Z":
            try:
                left[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                left[pid] = "?"
    return left


def with_comm(comm: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/comm").read_text().strip() == comm[:15]:
                    state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state != "Z":
                        pids.append(int(entry))
            except OSError:
                pass
    return pids


def wait_gone(check, timeout_s: float):
    """Poll ``check()`` (a collection of what is left) until it is empty or ``timeout_s`` passed; the rest."""
    deadline = time.monotonic() + timeout_s
    left = check()
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = check()
    return left


def children_named(parent: int, needle: str) -> list[int]:
    out = []
    for pid, (ppid, state, _start) in proc_table().items():
        if ppid == parent and state != "Z":
            try:
                if needle in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                    out.append(pid)
            except OSError:
                pass
    return out


@dataclass
class Listeners:
    """A TCP listener on the host's 127.0.0.1 and an abstract unix socket in the host's network namespace."""

    tcp: socket.socket
    unix: socket.socket
    abstract: str

    @property
    def port(self) -> int:
        return self.tcp.getsockname()[1]

    def connections(self) -> list[str]:
        got = []
        for name, sock in (("tcp", self.tcp), ("unix", self.unix)):
            try:
                conn, _ = sock.accept()
                got.append(f"{name}: {conn.recv(64)!r}")
                conn.close()
            except BlockingIOError:
                pass
        return got

    def close(self) -> None:
        self.tcp.close()
        self.unix.close()


def listeners() -> Listeners:
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    tcp.setblocking(False)
    abstract = "jx-" + _random.token_hex(8)
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind("\0" + abstract)
    unix.listen(8)
    unix.setblocking(False)
    return Listeners(tcp, unix, abstract)
