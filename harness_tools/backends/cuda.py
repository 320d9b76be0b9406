"""The ``cuda`` backend, parent side: forwards cases to a worker process that owns the GPU context.

This module must not import the CUDA driver: the process that uses it never creates a context.
"""

from __future__ import annotations

import glob
import shutil
import subprocess

from ..errors import BackendUnavailable
from ..execution import CaseRequest, CaseRun, DeviceInfo
from ..worker import Worker, WorkerDied, WorkerTimeout

EXECUTOR = "harness_tools.backends.cuda_executor:CudaExecutor"


def gpu_present() -> bool:
    """Whether an NVIDIA GPU looks usable, judged without touching the driver API."""
    if glob.glob("/dev/nvidia[0-9]*"):
        return True
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


class CudaBackend:
    name = "cuda"

    def __init__(self, device: int = 0):
        if not gpu_present():
            raise BackendUnavailable(
                "no NVIDIA GPU found on this machine (no /dev/nvidia* device, nvidia-smi lists none); "
                "run on a GPU host or choose another backend"
            )
        self._worker = Worker(EXECUTOR, device)
        self._info = DeviceInfo.model_validate(self._worker.start())

    def device_info(self) -> DeviceInfo:
        return self._info

    def run_case(self, request: CaseRequest, timeout_s: float) -> CaseRun:
        try:
            result = self._worker.call("run_case", request.model_dump(), timeout_s)
        except WorkerTimeout as exc:
            return CaseRun(status="timeout", error="TIMEOUT", message=f"{exc}; a fresh worker takes the next request",
                           worker_restarted=True)
        except WorkerDied as exc:
            return CaseRun(status="crashed", error="WORKER_DIED", message=str(exc), worker_restarted=True)
        return CaseRun.model_validate(result)

    def close(self) -> None:
        self._worker.close()
