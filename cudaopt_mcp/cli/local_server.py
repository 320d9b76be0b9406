"""The server ``cudaopt optimize`` talks to when it is given no ``--server``: in this process, over the MCP SDK's
in-memory transport.

The loop still goes through the server's tools, resources and prompts as any client does (the same
:class:`~cudaopt_mcp.client.session.Session`); only the second interpreter is gone, with its imports (the MCP
SDK alone is about a second of them). The workers start first, in a thread, while this process imports the
client and the server: a cuda worker's start (jail, interpreter, CUDA context, the device's peaks) then
overlaps the imports instead of sitting inside the baseline's evaluation. A worker that cannot start is not an
error here: the first call that needs it starts it again and reports why it cannot.

This process is the server's, so it creates no CUDA context either: only the jailed workers do.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import AsyncIterator
from pathlib import Path

from cudaopt_mcp.service.state import STOP_MARGIN, ServerConfig, ServerState

log = logging.getLogger("cudaopt")


class LocalServer:
    """An open server state whose workers are starting; :meth:`session` serves it, :meth:`close` ends it."""

    def __init__(self, results: Path, backend: str | None, workers: int | None, ray: str | None,
                 full_timing: bool = False):
        self.config = ServerConfig(results_dir=results, backend=backend, transport="inprocess", workers=workers,
                                   ray_address=ray, stop_margin=None if full_timing else STOP_MARGIN)
        self.state = ServerState.open(self.config)
        threading.Thread(target=self._start_workers, name="cudaopt-workers", daemon=True).start()

    def _start_workers(self) -> None:
        try:
            self.state.device_info()  # starts the pool; the first worker measures its floor and peaks
        except Exception as exc:  # noqa: BLE001 - the first call that needs a worker meets this again, and says it
            log.debug("the workers did not start ahead of the first call: %s", exc)

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[object]:
        from mcp import Client  # imported here, after the workers' thread has started

        from cudaopt_mcp.client.session import Session
        from cudaopt_mcp.server.app import build_server, check_jail

        check_jail(self.config)
        server = build_server(self.config, self.state)
        async with Client(server) as client:
            yield Session(client, f"in-process server (results in {self.config.results_dir})")

    def close(self) -> None:
        """Stop the workers (a start still under way finishes first, then they are stopped)."""
        self.state.close()
