"""Resource limits and death-with-parent for the processes that touch candidate code.

Applied in the child between fork and exec (so they hold for the jail and everything it starts):

- ``PR_SET_PDEATHSIG`` = SIGKILL: the child dies when the thread that started it dies. Every jailed
  process is therefore started from one thread that lives as long as the interpreter
  (:func:`spawn_thread_popen`), never from a short-lived worker thread (anyio's idle out after 10 s).
- rlimits: address space (only where the program tolerates it: CUDA's unified memory and TSan reserve
  terabytes of virtual space), CPU seconds, bytes per written file, open files, core dumps off, and
  processes (``RLIMIT_NPROC`` counts per user and is not enforced for root, so a cgroup's ``pids.max``
  does that job where a cgroup can be made; see :func:`cgroup_for`).
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import resource
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from harness_tools.run.host_blas import HOST_BLAS
from harness_tools.run.jail_leftovers import kill_if
from harness_tools.run.lasting_thread import LastingThread

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_CGROUP_ROOTS = (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup"))


@dataclass(frozen=True)
class Limits:
    """None means: no limit of that kind. Sizes in bytes."""

    address_space: int | None = None
    cpu_seconds: int | None = None
    file_size: int | None = 8 << 30
    open_files: int = 4096
    processes: int | None = 256


def _preexec(limits: Limits, parent_pid: int, cgroup_procs: list[Path]):
    libc = ctypes.CDLL(None, use_errno=True)

    def apply() -> None:  # runs in the forked child: no locks, no logging
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(111)
        for path in cgroup_procs:
            try:
                path.write_text(str(os.getpid()))
            except OSError:
                pass
        pairs = [(resource.RLIMIT_CORE, 0), (resource.RLIMIT_NOFILE, limits.open_files)]
        if limits.address_space is not None:
            pairs.append((resource.RLIMIT_AS, limits.address_space))
        if limits.cpu_seconds is not None:
            pairs.append((resource.RLIMIT_CPU, limits.cpu_seconds))
        if limits.file_size is not None:
            pairs.append((resource.RLIMIT_FSIZE, limits.file_size))
        if limits.processes is not None and os.getuid() != 0:
            pairs.append((resource.RLIMIT_NPROC, limits.processes))
        for which, value in pairs:
            _soft, hard = resource.getrlimit(which)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (value, value))

    return apply


class _Cgroup:
    """A pids cgroup of our own (v1 ``pids`` hierarchy or v2 with the pids controller), removed at close."""

    def __init__(self, folder: Path):
        self.folder = folder

    @property
    def procs(self) -> Path:
        return self.folder / "cgroup.procs"

    def close(self) -> None:
        """After the jail's leader has exited: end what is left of the jail, then remove the cgroup (or as soon as
        its last process is gone). A killed jail's members normally die with it, by their parent-death signal; but
        bwrap sets that signal in its own child only after it has started it, so a jail killed in its first
        milliseconds (a spare worker stopped before a timed case) could leave bwrap's child and the interpreter
        under it running on, orphaned: 3 of 40 such stops on a 2-core host."""
        for _ in range(END_TRIES):
            if _remove(self.folder):
                return
            if not self._end_members():
                break  # nothing left to end, yet not removable yet: the next sweep tries again
            time.sleep(END_PAUSE_S)
        with _PENDING_LOCK:
            _PENDING.append(self.folder)

    def _end_members(self) -> bool:
        """SIGKILL every process still in the cgroup (each checked to be in it still); whether there was any."""
        try:
            pids = [int(p) for p in self.procs.read_text().split()]
        except (OSError, ValueError):
            return False
        for pid in pids:
            kill_if(pid, self._holds)
        return bool(pids)

    def _holds(self, pid: int) -> bool:
        return f"/{self.folder.name}\n" in Path(f"/proc/{pid}/cgroup").read_text()


END_TRIES, END_PAUSE_S = 50, 0.002  # a released cgroup's members are signalled and waited for about 0.1 s at most
_COUNTER = iter(range(1 << 62))
_PENDING: list[Path] = []
_PENDING_LOCK = threading.Lock()


def _remove(folder: Path) -> bool:
    try:
        folder.rmdir()
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _sweep(base: Path) -> None:
    """Remove our cgroups whose processes are gone: pending ones of ours, and those of dead processes."""
    with _PENDING_LOCK:
        _PENDING[:] = [f for f in _PENDING if not _remove(f)]
    for folder in base.glob("cudaopt-*-*"):
        owner = folder.name.split("-")[1]
        if owner.isdigit() and int(owner) != os.getpid() and not Path(f"/proc/{owner}").exists():
            _remove(folder)


def _sweep_at_exit() -> None:
    base = _BASE[0] if _BASE else None
    if base is not None:
        for _ in range(20):  # members of a jail killed just now need a moment to go
            _sweep(base)
            if not _PENDING:
                return
            time.sleep(0.05)


def _cgroup_base() -> Path | None:
    """Where a pids-limited cgroup can be made, probed once."""
    for root in _CGROUP_ROOTS:
        try:
            if root.name != "pids" and "pids" not in (root / "cgroup.controllers").read_text().split():
                continue
            current = next((line.split(":", 2)[2] for line in Path("/proc/self/cgroup").read_text().splitlines()
                            if (line.split(":", 2)[1] == "pids") == (root.name == "pids")
                            and (root.name == "pids" or line.startswith("0::"))), "/")
            base = root / current.lstrip("/")
            probe = base / f"cudaopt-probe-{os.getpid()}"
            probe.mkdir()
            ok = (probe / "pids.max").is_file()
            probe.rmdir()
            if ok:
                return base
        except (OSError, IndexError, StopIteration):
            continue
    return None


_BASE: list[Path | None] = []
_BASE_LOCK = threading.Lock()


def cgroup_available() -> Path | None:
    with _BASE_LOCK:
        if not _BASE:
            _BASE.append(_cgroup_base())
            atexit.register(_sweep_at_exit)
        return _BASE[0]


def cgroup_for(limits: Limits) -> _Cgroup | None:
    """A fresh cgroup with ``pids.max`` set, or None where none can be made (then NPROC is the only bound)."""
    base = cgroup_available() if limits.processes is not None else None
    if base is None:
        return None
    _sweep(base)
    folder = base / f"cudaopt-{os.getpid()}-{next(_COUNTER)}"
    try:
        folder.mkdir()
        (folder / "pids.max").write_text(str(limits.processes))
    except OSError as exc:
        log.debug("no cgroup for a jailed process: %s", exc)
        return None
    return _Cgroup(folder)


_SPAWNER = LastingThread("cudaopt-spawner")  # every limited child, so PDEATHSIG means "when this process dies"


def spawn_thread_popen(argv: list[str], limits: Limits, cgroup: _Cgroup | None = None, **kwargs) -> subprocess.Popen:
    """``subprocess.Popen`` from the long-lived spawner thread, with ``limits`` applied in the child."""
    procs = [cgroup.procs] if cgroup is not None else []
    # a preexec_fn means a real fork(), whose atfork handlers stop OpenBLAS's threads: never while a BLAS call runs
    with HOST_BLAS:  # (run.host_blas)
        return _SPAWNER.call(subprocess.Popen, argv, preexec_fn=_preexec(limits, os.getpid(), procs), **kwargs)
