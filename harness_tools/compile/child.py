"""NVRTC in a process of its own: candidate source is hostile, and a source that makes the compiler hang
or crash must cost that process only, never the caller (an MCP server, say).

Persistent children (the same :class:`~harness_tools.run.worker.Worker` machinery as the backends), one per compile
running at once, compile on request; a compile that outlasts its timeout kills its child, and that child's next
request starts a fresh one. The
child is jailed (:mod:`harness_tools.run.jail`): NVRTC reads any file it can see, so it sees only the
interpreter, its packages and the CUDA headers; no network; its address space is bounded
(``CUDAOPT_COMPILE_MEMORY_MB``, default 4096), so a template explosion stops there, not at the host's limit.
"""

from __future__ import annotations

import atexit
import os
import threading

from harness_tools.compile.nvrtc import cuda_include_dir, nvrtc_version, run_nvrtc
from harness_tools.errors import WorkerDied, WorkerTimeout
from harness_tools.run.jail import JailSpec, Limits
from harness_tools.run.worker import Worker, close_side_by_side

DEFAULT_TIMEOUT_S = float(os.environ.get("CUDAOPT_COMPILE_TIMEOUT_S", "60"))
MEMORY_MB = int(os.environ.get("CUDAOPT_COMPILE_MEMORY_MB", "4096"))
EXECUTOR = "harness_tools.compile.child:NvrtcExecutor"


def compiler_jail() -> JailSpec:
    """NVRTC's jail: the CUDA headers read-only, nothing writable but its private /tmp. One BLAS thread: NumPy
    comes in with our task models, and OpenBLAS reserves buffers per core at its import, which on a 16-core host
    took the whole of a 512 MB limit (the child died before its first compile). NVRTC is a library (ptxas
    included): the child starts no process, so none may start (a source that subverts the compiler gets no fork)."""
    include = cuda_include_dir()
    return JailSpec(purpose="nvrtc", read_only=(include,) if include else (), env={"OPENBLAS_NUM_THREADS": "1"},
                    limits=Limits(address_space=MEMORY_MB << 20, processes=64), spawns=False)


class NvrtcExecutor:
    """Runs inside the child: one NVRTC compile per request."""

    def __init__(self, device: int):
        self.version = nvrtc_version()
        self.dead = False

    def info(self) -> dict:
        return {"nvrtc": self.version}

    def compile(self, payload: dict) -> dict:
        result = run_nvrtc(payload["source"], payload["options"], payload["arch"], payload["kernels"],
                            payload["version"])
        if not result.ok and "out of memory" in result.full_log.lower():
            note = (f"\nNVRTC ran out of memory: this compile may use at most {MEMORY_MB} MiB "
                    "(CUDAOPT_COMPILE_MEMORY_MB); a source that needs more (a template or unrolling explosion) is stopped there")
            result = result.model_copy(update={"log": result.log + note, "full_log": result.full_log + note})
        # full_log and cubin are excluded from dumps on purpose; they must cross the pipe all the same.
        return {**result.model_dump(), "full_log": result.full_log, "cubin": result.cubin}


class Ticket:
    """A compile's place in the queue for a child. An urgent one (an evaluation's, a hidden check's: something waits
    on it now) takes the next free child before any that is not (the loop's compiles ahead); a waiter may make a
    queued compile urgent (:meth:`_CompileService.hurry`) when it turns out to be waiting on it."""

    __slots__ = ("urgent",)

    def __init__(self, urgent: bool = True):
        self.urgent = urgent


class _CompileService:
    """Up to ``CUDAOPT_COMPILE_WORKERS`` compiler children (default: the host's cores, at most 8), started as
    compiles run at once: the loop compiles the next candidates while the GPU times the current one. When every
    child is busy, an urgent compile (:class:`Ticket`) gets the next free one: on a cold H100 run of matmul, a new
    best's hidden-size compile waited behind the compiles made ahead for later candidates (0.46-0.60 s checks
    against 0.02 s warm)."""

    def __init__(self):
        self._free = threading.Condition()
        self._idle: list[Worker] = []
        self._started = 0
        self._starting = 0  # started ahead, not ready yet: a compile waits for one rather than start another
        self._queued: list[Ticket] = []  # compiles waiting for a child

    @staticmethod
    def capacity() -> int:
        try:
            return max(1, int(os.environ.get("CUDAOPT_COMPILE_WORKERS", "")))
        except ValueError:
            return max(1, min(8, os.cpu_count() or 1))

    def compile(self, payload: dict, timeout_s: float, ticket: Ticket | None = None) -> tuple[dict | None, str | None]:
        """(result dict, None) or (None, why the compiler process failed)."""
        worker = self._take(ticket or Ticket())
        try:
            return worker.call("compile", payload, timeout_s), None
        except WorkerTimeout:
            return None, f"NVRTC did not finish within {timeout_s:g} s; the compile was aborted"
        except WorkerDied as exc:
            return None, (f"NVRTC stopped on this source ({exc}): it hit its memory limit of {MEMORY_MB} MiB "
                          "(CUDAOPT_COMPILE_MEMORY_MB) or crashed; a source that needs more (a template or "
                          "unrolling explosion) is stopped there")
        finally:
            with self._free:  # a killed child restarts on its next call
                self._idle.append(worker)
                self._free.notify_all()  # all: the first woken may have to let an urgent compile go first

    def _take(self, ticket: Ticket) -> Worker:
        with self._free:
            self._queued.append(ticket)
            try:
                while not self._may_take(ticket):
                    self._free.wait()
            finally:
                self._queued.remove(ticket)
                self._free.notify_all()  # one that only waited for this urgent compile to go first may go now
            if self._idle:
                return self._idle.pop()
            self._started += 1
        return Worker(EXECUTOR, spec=compiler_jail())

    def _may_take(self, ticket: Ticket) -> bool:
        """A child is free (or may be started) and no urgent compile waits, unless this is one."""
        free = bool(self._idle) or (self._started < self.capacity() and not self._starting)
        return free and (ticket.urgent or not any(t.urgent for t in self._queued))

    def hurry(self, ticket: Ticket) -> None:
        """Make a compile urgent, queued or running: something now waits on it."""
        with self._free:
            if not ticket.urgent:
                ticket.urgent = True
                self._free.notify_all()

    def start_ahead(self, count: int) -> list[threading.Thread]:
        """Start up to ``count`` children now, each in a thread (a jailed interpreter's start, 0.6-1.0 s on the H200
        host), so the first compiles (a cold run's baseline compiles one variant per case at once) find them
        ready; return the threads. A child that cannot start is dropped: the compile that needs one starts it
        again and reports why."""
        with self._free:
            count = max(0, min(count, self.capacity() - self._started))
            self._started += count
            self._starting += count
        threads = [threading.Thread(target=self._start_one, name="cudaopt-nvrtc-start", daemon=True)
                   for _ in range(count)]
        for thread in threads:
            thread.start()
        return threads

    def _start_one(self) -> None:
        worker = Worker(EXECUTOR, spec=compiler_jail())
        try:
            worker.start()
        except Exception:  # noqa: BLE001 - the compile that needs a child starts one and reports why it cannot
            worker.kill()
            with self._free:
                self._started -= 1
                self._starting -= 1
                self._free.notify_all()
            return
        with self._free:
            self._idle.append(worker)
            self._starting -= 1
            self._free.notify_all()

    def close(self, wait: bool = True) -> None:
        """Close the idle children side by side; ``wait=False`` at the interpreter's exit, which ends them anyway."""
        with self._free:  # children still starting ahead join the idle list when they are up, as before
            idle, self._idle, self._started = self._idle, [], self._starting
        close_side_by_side([worker.close for worker in idle], wait)


SERVICE = _CompileService()


def start_compilers_ahead() -> int:
    """Start a quarter of the host's cores' worth of compiler children now (at most the service's capacity), for
    a command about to compile: ``cudaopt optimize`` on a GPU host, while it imports. Return how many started."""
    return len(SERVICE.start_ahead((os.cpu_count() or 1) // 4))


def compile_workers() -> int:
    """How many compiles may run at once (CUDAOPT_COMPILE_WORKERS, default the host's cores, at most 8)."""
    return _CompileService.capacity()
atexit.register(SERVICE.close, wait=False)
