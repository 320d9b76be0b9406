"""Execution backends: where a compiled candidate runs.

A backend is anything with the :class:`ExecutionBackend` shape, registered by name. Backends are
looked up lazily so that importing the engine never imports a driver.
"""

from __future__ import annotations

import importlib
from typing import Protocol

from harness_tools.backends.contract import CaseRequest, CaseRun, DeviceInfo
from harness_tools.errors import BackendError


class ExecutionBackend(Protocol):
    """Runs one case of a compiled candidate.

    Failure behaviour: the kernel's own failures (launch errors, crashes, hangs past the timeout,
    invalid launch configurations) come back as a :class:`CaseRun` with that status and the error
    name, and the backend is usable again for the next request. Only a backend that cannot work on
    this machine raises (:class:`~harness_tools.errors.BackendUnavailable`).
    """

    name: str

    def device_info(self) -> DeviceInfo: ...

    def run_case(self, request: CaseRequest, timeout_s: float) -> CaseRun: ...

    def close(self) -> None: ...


_REGISTRY: dict[str, str] = {
    "cuda": "harness_tools.backends.cuda.backend:CudaBackend",
    "cpu": "harness_tools.backends.cpu.backend:CpuBackend",
}


def register(name: str, target: str) -> None:
    """Register ``module:Class`` under ``name`` (the class is imported only when first used)."""
    _REGISTRY[name] = target


def available_backends() -> list[str]:
    return sorted(_REGISTRY)


def create_backend(name: str, **options) -> ExecutionBackend:
    if name not in _REGISTRY:
        raise BackendError(f"unknown backend {name!r}; available: {', '.join(available_backends())}")
    module_name, _, cls_name = _REGISTRY[name].partition(":")
    cls = getattr(importlib.import_module(module_name), cls_name)
    return cls(**options)
