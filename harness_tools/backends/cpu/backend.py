"""The ``cpu`` backend, parent side: CUDA C kernels compiled by g++ and run on the CPU in a worker.

For machines without a GPU (CI, laptops). NVRTC still compiles every candidate first (for sm_90), so
dialect errors are caught exactly as on a GPU; then g++ builds the same source against our runtime.
Timings are CPU wall-clock timings and are labelled so. It also offers a race check: one launch under
ThreadSanitizer with CUDA threads as TSan fibers (see cpu_racecheck).

Who does what, for the jail's sake: this process builds each kernel (g++ in a jail of its own that writes
only its build folder) and puts the library into the cache; the worker (jailed, the cache read-only)
loads and runs it. A worker runs one candidate's kernels only: a candidate is native code, and threads it
left behind must not see the next candidate's cases, so another candidate gets a fresh worker (about
0.3 s; one is started ahead after each timed case: :mod:`.spare_worker`). Its own kernels share one: a task with
per-case ``size_defines`` builds a library per case, and a worker per library made stencil's seven cases seven
starts (54 workers in a 4-iteration run). The owner is the request's (:attr:`CaseRequest.owner`, which the engine
sets: the candidate, apart for its hidden cases); a request without one (the reference kernel, external tools) has
its library alone. Race-check executables are built and run here, each in a jail of its own.
"""

from __future__ import annotations

import os

from harness_tools.backends.contract import CaseRequest, CaseRun, RaceReport
from harness_tools.backends.cpu.build import build_kernel, cache_root, compiler, compiler_home, kernel_cache, runtime_library
from harness_tools.backends.cpu.fault_lines import with_source_line
from harness_tools.backends.cpu.spare_worker import SpareWorker
from harness_tools.backends.cpu.translate import missing_constants, unsupported
from harness_tools.backends.protocols import BackendTraits
from harness_tools.backends.worker_backend import WorkerBackend
from harness_tools.run.jail import JailSpec, Limits
from harness_tools.run.scratch import inputs_root, scratch_root
from harness_tools.run.worker import Worker

EXECUTOR = "harness_tools.backends.cpu.executor:CpuExecutor"
# Measured: GPU techniques (shared-memory tiles, warp shuffles, vector loads) ran 2.5-30x slower than a naive
# kernel here, the reverse of a GPU's ranking.
CPU_TIMING_NOTE = ("cpu backend: timings are CPU wall clock and rank CPU execution, not GPU speed (GPU techniques "
                   "often run slower here than a naive kernel); use it for correctness and smoke tests, and a GPU "
                   "for speed")


def worker_jail() -> JailSpec:
    """The cpu worker runs native candidate code: it reads the runtime and built kernels, reads the inputs,
    and writes only the scratch folder. It starts no other process (threads only): a candidate's fork fails, where
    a process limit may not exist (root without a cgroup)."""
    runtime = runtime_library()  # built here, before any jail: the worker cannot write the cache
    return JailSpec(purpose="cpu worker",
                    read_only=(str(runtime.parent), str(kernel_cache()), str(inputs_root()), *compiler_home()),
                    writable=(str(scratch_root()),), env={"CUDAOPT_CPU_RUNTIME": str(runtime)}, spawns=False,
                    limits=Limits(address_space=memory_limit(), processes=64 + 2 * (os.cpu_count() or 1)))


def memory_limit() -> int:
    """The cpu worker's address space: ``CUDAOPT_CPU_MEMORY_MB``, default half the machine's memory (a worker
    running the bundled tasks peaks near 0.7 GB of address space; cases are checked against free memory first)."""
    given = os.environ.get("CUDAOPT_CPU_MEMORY_MB")
    if given:
        return int(given) << 20
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2


class CpuBackend(WorkerBackend):
    name = "cpu"
    traits = BackendTraits(clock="CPU wall clock", default_warmup=1, default_reps=10, profiler=False, min_gain=0.05,
                           timing_note=CPU_TIMING_NOTE,
                           buffers_in_host_memory=True, sanitizer="race-check")

    def __init__(self, device: int = 0):
        compiler()  # a clear BackendUnavailable before any worker starts when g++ is missing
        cache_root()
        super().__init__(EXECUTOR, device, spec=worker_jail())
        self._owner: str | None = None  # whose kernels the current worker has run
        self._spare = SpareWorker(self._worker)

    def run_case(self, request: CaseRequest, timeout_s: float) -> CaseRun:
        refused = unsupported(request.source)
        if refused:
            return CaseRun(status="invalid_launch", error="CPU_UNSUPPORTED", message="\n".join(refused))
        missing = missing_constants(request)
        if missing:
            return CaseRun(status="invalid_launch", message=f"the source declares no __constant__ symbol {missing[0]!r} "
                           "(the task fills it from one of its inputs); declare it at namespace scope")
        build = build_kernel(request)
        if not build.ok:
            return CaseRun(status="launch_error", error="CPU_COMPILE_ERROR", message=f"g++ rejected the kernel:\n{build.log}")
        owner = request.owner or f"library {build.path}"
        if self._owner not in (None, owner):  # a fresh worker: nothing of the last candidate's code survives
            last = self._worker
            self._worker = self._spare.take() or Worker(EXECUTOR, last.device, last.spec)
            last.close()
        self._owner = owner
        if request.timing is not None:
            self._spare.quiet()  # no interpreter starting beside timed launches
        run = self.forward(request, timeout_s, library=str(build.path))
        if request.timing is not None:
            self._spare.start()  # the next candidate's worker, while the loop chooses and builds it
        run.message = with_source_line(run.message, build.path)
        run.load_ms += build.build_ms
        return run

    def close(self) -> None:
        self._spare.close()
        super().close()

    def race_check(self, request: CaseRequest, timeout_s: float) -> RaceReport:
        """Run the case once under ThreadSanitizer and report data races between CUDA threads.

        Failure behaviour: races, a kernel error under the check, a build error or a run past
        ``timeout_s`` come back as a report (status ``races`` or ``error``).
        """
        from harness_tools.backends.cpu.racecheck import race_check  # only race checks need it

        return race_check(request, timeout_s)
