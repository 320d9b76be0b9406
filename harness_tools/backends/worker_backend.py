"""A backend whose executor runs in a worker process: the shared parent-side half of cuda and cpu."""

from __future__ import annotations

from ..execution import CaseRequest, CaseRun, DeviceInfo
from ..worker import Worker, WorkerDied, WorkerTimeout


class WorkerBackend:
    """Forwards each case to ``executor`` (``module:Class``) in a worker; hangs and crashes become data."""

    name = "worker"

    def __init__(self, executor: str, device: int = 0):
        self._worker = Worker(executor, device)
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
