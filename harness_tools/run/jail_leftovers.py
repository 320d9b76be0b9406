"""What a jail killed as it starts leaves running, found and ended when the jail is released.

bwrap sets its child's parent-death signal only once that child runs, so killing bwrap in its first milliseconds
(a cpu spare worker stopped before a timed case, a start cancelled) can leave the child, the init of the jail's pid
namespace, orphaned with the interpreter under it. Where the jail has a pids cgroup, its members are ended through
it (:meth:`harness_tools.run.jail_limits._Cgroup.close`). Everywhere, also where no cgroup can be made (root
without cgroup delegation, as on many GPU hosts), bwrap reports its child's pid on an ``--info-fd`` pipe; at release,
that child is ended if it still runs, and the whole pid namespace with it; a kill (``jail.end``) first waits a moment
for that report, so no child goes unnamed (killed before it, 2 of 30 orphans were). The sandboxed program never sees
the pipe (bwrap closes it in the child), so what is read there is bwrap's own word.
"""

from __future__ import annotations

import os
import re
import select
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

CHILD_PID = re.compile(rb'"child-pid":\s*(\d+)')
STARTED_WITHIN_S = 2.0  # bwrap clones its child within milliseconds of its own start: a pid started later is another


class InfoPipe:
    """The pipe bwrap writes its child's pid to; ``argv`` goes into bwrap's options, ``write_fd`` into pass_fds."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self._report = b""
        self._child: int | None = None
        self._leader_started: int | None = None
        self._lock = threading.Lock()  # a kill from a cancelling thread reads the pipe as a release may

    @property
    def argv(self) -> list[str]:
        return ["--info-fd", str(self.write_fd)]

    def spawned(self, leader_pid: int | None) -> None:
        """After the spawn (or its failure, with None): our copy of the write end goes; the leader's start noted."""
        self.write_fd = _closed(self.write_fd)
        self._leader_started = _start_ticks(leader_pid) if leader_pid is not None else None

    def await_child(self, wait_s: float) -> None:
        """Before the leader is killed: wait at most ``wait_s`` for bwrap to name its child (it does so as soon as it
        has cloned it, so a leader killed after this leaves no child whose pid is unknown)."""
        deadline = time.monotonic() + wait_s
        while True:
            with self._lock:
                self._take()
                fd, left = self.read_fd, deadline - time.monotonic()
            if self._child is not None or left <= 0 or fd < 0:
                return
            try:
                select.select([fd], [], [], min(left, 0.01))  # short: the fd may be closed by a release meanwhile
            except (OSError, ValueError):
                return

    def end_child(self) -> bool:
        """After the leader has exited: end bwrap's child if it still runs; whether it had to be ended."""
        with self._lock:
            self._take()
            self.read_fd = _closed(self.read_fd)
        pid, leader_started = self._child, self._leader_started
        if pid is None or leader_started is None:
            return False
        window = STARTED_WITHIN_S * os.sysconf("SC_CLK_TCK")

        def bwraps_child(p: int) -> bool:
            started = _start_ticks(p)
            return started is not None and 0 <= started - leader_started <= window and _name(p) == "bwrap"

        return kill_if(pid, bwraps_child)

    def close(self) -> None:
        """Without a look at the child (a spawn that failed)."""
        with self._lock:
            self.read_fd, self.write_fd = _closed(self.read_fd), _closed(self.write_fd)

    def _take(self) -> None:
        """(Under the lock.) What bwrap has written so far; the pipe is closed at its end (bwrap's child, orphaned, may still hold
        the write end: then what is there is all there will be)."""
        try:
            while self.read_fd >= 0:
                chunk = os.read(self.read_fd, 4096)
                if not chunk:
                    self.read_fd = _closed(self.read_fd)
                    break
                self._report += chunk
        except OSError:
            pass  # nothing more for now
        found = CHILD_PID.search(self._report)
        if found is not None:
            self._child = int(found.group(1))


def kill_if(pid: int, still_ours: Callable[[int], bool]) -> bool:
    """SIGKILL ``pid`` if ``still_ours(pid)``; whether it was signalled. The pid is opened as a pidfd before the
    check, so a number reused by another process meanwhile fails the check (it reads the new one) or the signal (the
    pidfd names the old one), and is never signalled."""
    try:
        handle = os.pidfd_open(pid)
    except OSError:
        return False  # gone already
    try:
        if not still_ours(pid):
            return False
        signal.pidfd_send_signal(handle, signal.SIGKILL)
        return True
    except OSError:
        return False  # ended meanwhile
    finally:
        os.close(handle)


def _closed(fd: int) -> int:
    """Close ``fd`` once (a second close could hit a number reused meanwhile); the value meaning closed."""
    if fd >= 0:
        try:
            os.close(fd)
        except OSError:
            pass
    return -1


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2:].split()  # after "pid (comm) ", which may itself hold spaces


def _start_ticks(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[19]) if fields and len(fields) > 19 else None  # field 22 of stat: starttime


def _name(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None
