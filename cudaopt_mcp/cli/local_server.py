"""The server ``cudaopt optimize`` talks to when it is given no ``--server``: in this process, over the MCP SDK's
in-memory transport.

The loop still goes through the server's tools, resources and prompts as any client does (the same
:class:`~cudaopt_mcp.client.session.Session`); only the second interpreter is gone, with its imports (the MCP
SDK alone is about a second of them). The workers start first, in a thread, while this process imports the
client and the server: a cuda worker's start (jail, interpreter, CUDA context, the device's peaks) then
overlaps the imports instead of sitting inside the baseline's evaluation. On cuda a quarter of the host's cores'
worth of compiler children start too (a cold run's baseline compiles one variant per case at once). A worker that
cannot start is not an error here: the first call that needs it starts it again and reports why it cannot.

On a GPU, when the first step is a new run's baseline, that evaluation and its hidden check are made too, on the
worker as soon as it is up and each case as soon as its inputs are drawn (:func:`~cudaopt_mcp.service.seed_ahead.
evaluate_ahead`); the step takes the result when it comes (on the H100, the MCP side was ready 1.6-1.9 s after the
command started, the worker 0.6 s earlier). The GPU's clock is not the host's, which the imports keep busy; the cpu
backend's is, so it measures its baseline when asked, as before.

This process is the server's, so it creates no CUDA context either: only the jailed workers do.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

from cudaopt_mcp.service.state import ServerConfig, ServerState, search_shortcuts
from harness_tools.compile.child import start_compilers_ahead

log = logging.getLogger("cudaopt")


class LocalServer:
    """An open server state whose workers are starting; :meth:`session` serves it, :meth:`close` ends it."""

    def __init__(self, results: Path, backend: str | None, workers: int | None, ray: str | None,
                 full_timing: bool = False, ahead: tuple[str, int] | None = None,
                 baseline_timing: tuple[int | None, int | None] | None = None):
        """``ahead``: (task, seed) of the first evaluation, whose inputs and oracle are then made meanwhile;
        ``baseline_timing``: (warmup, reps) asked for when that first evaluation is a new run's baseline."""
        self.config = ServerConfig(results_dir=results, backend=backend, transport="inprocess", workers=workers,
                                   ray_address=ray, **search_shortcuts(full_timing))
        self.state = ServerState.open(self.config)
        self.drawn: list[str] | None = None  # the cases made ahead, once made
        threading.Thread(target=self._start_workers, name="cudaopt-workers", daemon=True).start()
        if ahead is not None:
            threading.Thread(target=self._draw_ahead, args=ahead, name="cudaopt-draw-ahead", daemon=True).start()
        # not with Ray: its backend is named by connecting to the cluster, which only the workers' thread may wait for
        if ahead is not None and baseline_timing is not None and ray is None and self._on_gpu():
            self.state.ahead.arm()  # before any step can ask: a step that asks first evaluates for itself
            threading.Thread(target=self._evaluate_ahead, args=(*ahead, *baseline_timing), name="cudaopt-evaluate-ahead",
                             daemon=True).start()

    def _on_gpu(self) -> bool:
        try:
            return self.state.backend_name == "cuda"
        except Exception:  # noqa: BLE001 - no backend at all: the first call says why
            return False

    def _start_workers(self) -> None:
        try:
            if self.state.backend_name == "cuda":  # a cold run's baseline compiles a variant per case at once
                start_compilers_ahead()
            self.state.device_info()  # starts the pool; the first worker measures its floor and peaks
        except Exception as exc:  # noqa: BLE001 - the first call that needs a worker meets this again, and says it
            log.debug("the workers did not start ahead of the first call: %s", exc)

    def _draw_ahead(self, task_source: str, seed: int) -> None:
        from cudaopt_mcp.service.seed_ahead import draw_ahead
        from harness_tools import resolve_task

        started = time.perf_counter()
        try:
            self.drawn = draw_ahead(self.state, resolve_task(task_source), seed)
        except Exception as exc:  # noqa: BLE001 - the evaluation meets this again, and reports it
            log.debug("the first evaluation's inputs were not made ahead: %s", exc)
            return
        log.info("inputs and oracle of %d case(s) made ahead in %.2f s", len(self.drawn), time.perf_counter() - started)

    def _evaluate_ahead(self, task_source: str, seed: int, warmup: int | None, reps: int | None) -> None:
        from cudaopt_mcp.client.loop_models import search_timing
        from cudaopt_mcp.service.seed_ahead import evaluate_ahead
        from harness_tools import resolve_task

        try:
            task = resolve_task(task_source)
        except Exception as exc:  # noqa: BLE001 - the run's creation meets this again, and reports it
            self.state.ahead.disarm()
            log.debug("the baseline was not evaluated ahead: %s", exc)
            return
        timing = search_timing(warmup, reps, self.state.backend_name)
        evaluate_ahead(self.state, task, seed, timing.get("warmup"), timing.get("reps"))

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[object]:
        from mcp import Client  # imported here, after the workers' thread has started

        from cudaopt_mcp.client.session import Session
        from cudaopt_mcp.server.app import build_server, check_jail

        check_jail(self.config)
        server = build_server(self.config, self.state)
        async with Client(server) as client:
            yield Session(client, f"in-process server (results in {self.config.results_dir})")

    def close(self, wait: bool = True) -> None:
        """Stop the workers (a start still under way finishes first, then they are stopped). ``wait=False``: asked
        to exit, not waited for (on the H100, waiting for the workers' and compilers' exits one after the other was
        0.7-1.2 s of every short ``optimize``); for a command about to end, whose jailed workers die with it anyway."""
        self.state.close(wait)
