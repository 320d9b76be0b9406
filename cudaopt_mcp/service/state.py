"""What one MCP server process owns: its configuration, the run store and one pool of execution backends.

The pool (:mod:`harness_tools.backends.pool`: one worker per visible GPU by default, each the only process
with a context on its device) starts on the first call that needs it and closes when the server shuts down.
Engine calls block, so tools run them in worker threads; each leases one worker for a whole candidate
(:meth:`ServerState.lease`), profilers and sanitizers take the pool to themselves (:meth:`ServerState.exclusive`),
and :meth:`RunStore.locked` serialises calls on one run.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cudaopt_mcp.service.evaluations_ahead import EvaluationsAhead
from cudaopt_mcp.service.hidden_seeds import HiddenSeeds
from cudaopt_mcp.service.runs import RunStore
from harness_tools import TimingPlan, available_backends, backend_traits, create_backend
from harness_tools.backends.contract import DeviceInfo
from harness_tools.backends.pool import BackendPool, PoolMember
from harness_tools.errors import BackendError
from harness_tools.run import cancellation

log = logging.getLogger("cudaopt.mcp")

Transport = Literal["stdio", "http", "inprocess"]
STOP_MARGIN = 0.10  # see ServerConfig.stop_margin
SEARCH_BUDGET_MS = 50.0  # see ServerConfig.search_budget_ms


def search_shortcuts(full_timing: bool) -> dict[str, float | None]:
    """ServerConfig's search-step shortcuts, or none of them (``--full-timing``)."""
    return {"stop_margin": None if full_timing else STOP_MARGIN,
            "search_budget_ms": None if full_timing else SEARCH_BUDGET_MS}


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
    stop_margin: float | None = STOP_MARGIN  # evaluate stops timing a case once clearly above the best's median
    # plus this fraction (service.early_stop); None: every evaluate times the full plan
    search_budget_ms: float | None = SEARCH_BUDGET_MS  # evaluate times a slow kernel's case for about this many ms
    # (never fewer than timing.MIN_BUDGET_REPS launches; its head-to-heads too); None: every planned launch
    workers: int | None = None  # None: one per visible GPU on cuda, one on cpu (with ray: the cluster's GPUs)
    ray_address: str | None = None  # workers as Ray actors in this cluster ('local': one started here)

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


def worker_pins(backend: str, workers: int | None) -> list[str | None]:
    """One entry per worker: on cuda the GPU each is pinned to (every visible one unless ``workers`` says
    fewer); on cpu ``workers`` unpinned workers (default one: a cpu kernel already uses every core)."""
    if workers is not None and workers < 1:
        raise BackendError(f"workers must be at least 1, got {workers}")
    if backend != "cuda":
        return [None] * (workers or 1)
    from harness_tools.backends.cuda.backend import visible_gpus

    gpus = visible_gpus()
    if len(gpus) <= 1 and not workers:
        return [None]  # one GPU: the worker sees what the server sees, as before pools
    if workers and workers > len(gpus):
        raise BackendError(f"{workers} workers asked for but {len(gpus)} GPU(s) visible ({', '.join(gpus) or 'none'}): "
                           "one worker per GPU")
    return list(gpus[:workers] if workers else gpus)


def _ray_backend_name(address: str, workers: int | None) -> str:
    from harness_tools.backends.ray_members import cluster_gpus

    # the first to connect starts a local cluster: with the workers' CPUs (with two, four actors never started)
    return "cuda" if cluster_gpus(address, workers) > 0 else "cpu"


def _ray_pool(backend: str, address: str, workers: int | None) -> BackendPool:
    """One Ray actor per worker: by default one per GPU of the cluster (cuda), or two (cpu)."""
    from harness_tools.backends.ray_members import RayMember, cluster_gpus, connect

    connect(address, workers)
    count = workers or (cluster_gpus(address, workers) if backend == "cuda" else 2)
    if count < 1:
        raise BackendError(f"the Ray cluster at {address} has no GPU for the cuda backend")
    log.info("starting the %s backend: %d Ray actor(s) at %s", backend, count, address)
    return BackendPool(lambda _pin: RayMember(backend), [None] * count)


@dataclass
class ServerState:
    config: ServerConfig
    store: RunStore
    _pool: BackendPool | None = None
    _closed: bool = False
    _backend_name: str | None = None
    _backend_guard: threading.Lock = field(default_factory=threading.Lock)
    _name_guard: threading.Lock = field(default_factory=threading.Lock)
    _active: Counter[tuple[str, str]] = field(default_factory=Counter)  # calls working on each candidate
    _active_guard: threading.Condition = field(default_factory=threading.Condition)
    hidden_seeds: HiddenSeeds = field(default_factory=HiddenSeeds)  # each hidden check's seed, chosen one ahead
    ahead: EvaluationsAhead = field(default_factory=EvaluationsAhead)  # evaluations made before they are asked for

    @classmethod
    def open(cls, config: ServerConfig) -> ServerState:
        return cls(config=config, store=RunStore(config.results_dir))

    @property
    def backend_name(self) -> str:
        """The backend this server evaluates on (decided once, without starting a worker)."""
        with self._name_guard:  # not the pool's guard: naming the backend never waits for workers to start
            if self._backend_name is None:
                self._backend_name = self.config.backend or (
                    _ray_backend_name(self.config.ray_address, self.config.workers) if self.config.ray_address else default_backend_name())
            return self._backend_name

    def pool(self) -> BackendPool:
        """The server's workers, started on first use (raises BackendError when none can start)."""
        name = self.backend_name
        with self._backend_guard:
            if self._closed:
                raise BackendError("the server is shutting down")
            if self._pool is None:
                if self.config.ray_address:
                    self._pool = _ray_pool(name, self.config.ray_address, self.config.workers)
                else:
                    pins = worker_pins(name, self.config.workers)
                    log.info("starting the %s backend: %d worker(s)", name, len(pins))
                    self._pool = BackendPool(lambda pin: create_backend(name, **({"pin": pin} if pin else {})), pins)
            return self._pool

    def started_pool(self) -> BackendPool | None:
        """The workers if they have started, without waiting or starting them."""
        return self._pool

    def device_info(self) -> DeviceInfo:
        """The device every worker has (a pool holds one model)."""
        return self.pool().device_info()

    @contextlib.contextmanager
    def lease(self, avoid: frozenset[int] = frozenset(), on_wait: Callable[[], None] | None = None
              ) -> Iterator[PoolMember]:
        """One worker for one candidate's evaluation, waiting (cancellably) while all are busy (``on_wait`` first)."""
        with self.pool().lease(avoid, on_wait) as member:
            yield member

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[PoolMember]:
        """A worker while no other runs anything: for tools that start their own process on a GPU."""
        with self.pool().exclusive() as member:
            yield member

    def close(self, wait: bool = True) -> None:
        """Stop the workers; ``wait=False`` asks them to exit and does not wait: for a process about to end."""
        with self._backend_guard:  # a pool starting finishes first, and none starts after
            self._closed = True
            if self._pool is not None:
                log.info("closing the %s backend", self._backend_name)
                self._pool.close(wait)
                self._pool = None
        self.ahead.close()
        self.hidden_seeds.close()

    # ---- defaults that depend on the backend ------------------------------------------------------
    def timing_plan(self, warmup: int | None, reps: int | None, budget_ms: float | None = None) -> TimingPlan:
        traits = backend_traits(self.backend_name)
        return TimingPlan(warmup=warmup if warmup is not None else traits.default_warmup,
                          reps=reps if reps is not None else traits.default_reps, budget_ms=budget_ms)

    # ---- which candidates are being worked on in this process -------------------------------------
    @contextlib.contextmanager
    def working(self, run_id: str, candidate_id: str) -> Iterator[None]:
        """Mark a candidate as in progress here (so a missing record reads 'evaluating', not 'interrupted')."""
        with self._active_guard:
            self._active[(run_id, candidate_id)] += 1
        try:
            yield
        finally:
            with self._active_guard:
                self._active -= Counter({(run_id, candidate_id): 1})  # drops it at zero
                self._active_guard.notify_all()

    @contextlib.contextmanager
    def claimed(self, run_id: str, candidate_id: str) -> Iterator[None]:
        """:meth:`working`, after waiting (cancellably) while another call works on the candidate. Never call it
        under the run's lock: the call it waits for needs that lock to finish."""
        key = (run_id, candidate_id)
        with self._active_guard:
            while self._active[key] > 0:
                self._active_guard.wait(cancellation.POLL_S)
                cancellation.checkpoint()
            self._active[key] += 1
        try:
            yield
        finally:
            with self._active_guard:
                self._active -= Counter({key: 1})
                self._active_guard.notify_all()

    def is_active(self, run_id: str, candidate_id: str) -> bool:
        with self._active_guard:
            return self._active[(run_id, candidate_id)] > 0
