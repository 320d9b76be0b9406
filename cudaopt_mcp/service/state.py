"""What one MCP server process owns: its configuration, the run store and ONE execution backend.

The backend (and with it the worker process that alone owns a device context) is created lazily on
the first call that needs it and closed when the server shuts down. Engine calls block, so tools run
them in worker threads; :attr:`ServerState.engine_lock` makes sure only one thread talks to the
backend at a time (one worker per GPU), and :meth:`RunStore.locked` serialises calls on one run.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cudaopt_mcp.service.runs import RunStore
from harness_tools import TimingPlan, available_backends, backend_traits, create_backend
from harness_tools.backends import ExecutionBackend
from harness_tools.errors import BackendError

log = logging.getLogger("cudaopt.mcp")

Transport = Literal["stdio", "http", "inprocess"]


@dataclass(frozen=True)
class ServerConfig:
    """How the server was started. ``transport`` decides what a client may do (see ``trusted_client``)."""

    results_dir: Path = Path("results")
    backend: str | None = None  # None: cuda when a GPU is present, else cpu
    transport: Transport = "stdio"
    task_roots: tuple[Path, ...] = ()  # folders an HTTP client may load task folders from
    host: str = "127.0.0.1"
    port: int = 8000
    sure_gain: float | None = None  # None: the backend's (BackendTraits.sure_gain); service.best skips its head-to-head beyond it

    @property
    def trusted_client(self) -> bool:
        """stdio (and in-process) clients are the user; an HTTP client is not (DESIGN.md §7)."""
        return self.transport != "http"


def default_backend_name() -> str:
    from harness_tools.backends.cuda.backend import gpu_present

    if gpu_present():
        return "cuda"
    if "cpu" in available_backends():
        log.warning("no GPU found; using the cpu backend (CPU timings)")
        return "cpu"
    raise BackendError("no NVIDIA GPU found on this machine and no CPU backend is installed")


@dataclass
class ServerState:
    config: ServerConfig
    store: RunStore
    engine_lock: threading.Lock = field(default_factory=threading.Lock)
    _backend: ExecutionBackend | None = None
    _backend_name: str | None = None
    _backend_guard: threading.Lock = field(default_factory=threading.Lock)
    _active: set[tuple[str, str]] = field(default_factory=set)
    _active_guard: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(cls, config: ServerConfig) -> ServerState:
        return cls(config=config, store=RunStore(config.results_dir))

    @property
    def backend_name(self) -> str:
        """The backend this server evaluates on (decided once, without starting a worker)."""
        with self._backend_guard:
            if self._backend_name is None:
                self._backend_name = self.config.backend or default_backend_name()
            return self._backend_name

    def backend(self) -> ExecutionBackend:
        """The one backend of this server, started on first use (raises BackendError when unusable)."""
        name = self.backend_name
        with self._backend_guard:
            if self._backend is None:
                log.info("starting the %s backend", name)
                self._backend = create_backend(name)
            return self._backend

    def close(self) -> None:
        with self._backend_guard:
            if self._backend is not None:
                log.info("closing the %s backend", self._backend.name)
                self._backend.close()
                self._backend = None

    # ---- defaults that depend on the backend ------------------------------------------------------
    def timing_plan(self, warmup: int | None, reps: int | None) -> TimingPlan:
        traits = backend_traits(self.backend_name)
        return TimingPlan(warmup=warmup if warmup is not None else traits.default_warmup,
                          reps=reps if reps is not None else traits.default_reps)

    # ---- which candidates are being worked on in this process -------------------------------------
    @contextlib.contextmanager
    def working(self, run_id: str, candidate_id: str) -> Iterator[None]:
        """Mark a candidate as in progress here (so a missing record reads 'evaluating', not 'interrupted')."""
        with self._active_guard:
            self._active.add((run_id, candidate_id))
        try:
            yield
        finally:
            with self._active_guard:
                self._active.discard((run_id, candidate_id))

    def is_active(self, run_id: str, candidate_id: str) -> bool:
        with self._active_guard:
            return (run_id, candidate_id) in self._active
