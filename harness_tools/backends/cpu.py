"""The ``cpu`` backend, parent side: CUDA C kernels compiled by g++ and run on the CPU in a worker.

For machines without a GPU (CI, laptops). NVRTC still compiles every candidate first (for sm_90), so
dialect errors are caught exactly as on a GPU; then g++ builds the same source against our runtime.
Timings are CPU wall-clock timings and are labelled so.
"""

from __future__ import annotations

from .cpu_build import compiler
from .worker_backend import WorkerBackend

EXECUTOR = "harness_tools.backends.cpu_executor:CpuExecutor"


class CpuBackend(WorkerBackend):
    name = "cpu"

    def __init__(self, device: int = 0):
        compiler()  # a clear BackendUnavailable before any worker starts when g++ is missing
        super().__init__(EXECUTOR, device)
