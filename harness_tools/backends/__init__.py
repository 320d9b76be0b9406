"""Execution backends: where a compiled candidate runs.

A backend is anything with the :class:`ExecutionBackend` shape (:mod:`.protocols`), registered by name.
Backends are looked up lazily so that importing the engine never imports a driver; the messages they
take and give are in :mod:`.contract`.
"""

from __future__ import annotations

import importlib

from harness_tools.backends.protocols import BackendTraits, ExecutionBackend, RaceChecker
from harness_tools.errors import BackendError

__all__ = ["BackendTraits", "ExecutionBackend", "RaceChecker", "available_backends", "backend_traits",
           "create_backend", "register"]

_REGISTRY: dict[str, str] = {
    "cuda": "harness_tools.backends.cuda.backend:CudaBackend",
    "cpu": "harness_tools.backends.cpu.backend:CpuBackend",
}


def register(name: str, target: str) -> None:
    """Register ``module:Class`` under ``name`` (the class is imported only when first used)."""
    _REGISTRY[name] = target


def available_backends() -> list[str]:
    return sorted(_REGISTRY)


def _backend_class(name: str) -> type:
    if name not in _REGISTRY:
        raise BackendError(f"unknown backend {name!r}; available: {', '.join(available_backends())}")
    module_name, _, cls_name = _REGISTRY[name].partition(":")
    return getattr(importlib.import_module(module_name), cls_name)


def backend_traits(name: str) -> BackendTraits:
    """What backend ``name`` offers, without starting it (its module imports no driver)."""
    return _backend_class(name).traits


def create_backend(name: str, **options) -> ExecutionBackend:
    return _backend_class(name)(**options)
