"""The ``cpu`` backend, parent side: CUDA C kernels compiled by g++ and run on the CPU in a worker.

For machines without a GPU (CI, laptops). NVRTC still compiles every candidate first (for sm_90), so
dialect errors are caught exactly as on a GPU; then g++ builds the same source against our runtime.
Timings are CPU wall-clock timings and are labelled so. It also offers a race check: one launch under
ThreadSanitizer with CUDA threads as TSan fibers (see cpu_racecheck).
"""

from __future__ import annotations

from ..execution import CaseRequest, RaceReport
from ..worker import WorkerDied, WorkerTimeout
from .cpu_build import BUILD_TIMEOUT_S, compiler
from .worker_backend import WorkerBackend

EXECUTOR = "harness_tools.backends.cpu_executor:CpuExecutor"


class CpuBackend(WorkerBackend):
    name = "cpu"

    def __init__(self, device: int = 0):
        compiler()  # a clear BackendUnavailable before any worker starts when g++ is missing
        super().__init__(EXECUTOR, device)

    def race_check(self, request: CaseRequest, timeout_s: float) -> RaceReport:
        """Run the case once under ThreadSanitizer and report data races between CUDA threads.

        Failure behaviour: races, a kernel error under the check, a build error or a run past
        ``timeout_s`` come back as a report (status ``races`` or ``error``); a worker that hangs or dies
        is replaced, as for :meth:`run_case`.
        """
        payload = {"request": request.model_dump(), "timeout_s": timeout_s}
        try:  # the executable's own timeout fires first; this one covers the build and a stuck worker
            result = self._worker.call("race_check", payload, timeout_s + 2 * BUILD_TIMEOUT_S + 30)
        except WorkerTimeout as exc:
            return RaceReport(status="error", message=f"race check: {exc}; a fresh worker takes the next request")
        except WorkerDied as exc:
            return RaceReport(status="error", message=f"race check: {exc}")
        return RaceReport.model_validate(result)
