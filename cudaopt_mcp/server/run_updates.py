"""Resource-updated events for runs (MCP 2026-07-28 ``subscriptions/listen``): the server claims
``resources.subscribe``, so a client listening to ``cudaopt://runs``, ``cudaopt://runs/{run_id}`` or its history
hears when a call changed them.

A ``ServerMiddleware``: after a ``tools/call`` of a tool that writes a run returns (a direct answer, or the
handle of a task that will write it later), and again when such a task ends, the run's URIs are published on
the server's subscription bus. Read-only tools publish nothing. (Tool, prompt and resource *lists* are fixed for
the server's lifetime, so their ``listChanged`` events never have cause to fire.)
"""

from __future__ import annotations

from typing import Any

from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated

from cudaopt_mcp.api import RUNS_URI, history_uri, run_uri

WRITES_RUN = frozenset({"create_run", "compile", "evaluate", "run", "time", "profile", "sanitize", "start_evaluation",
                        "cancel_job"})


class RunUpdates:
    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()

    async def changed(self, run_id: str | None) -> None:
        uris = [RUNS_URI] + ([run_uri(run_id), history_uri(run_id)] if run_id else [])
        for uri in uris:
            await self.bus.publish(ResourceUpdated(uri=uri))

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        result = await call_next(ctx)
        params = ctx.params if isinstance(ctx.params, dict) else {}
        if ctx.method == "tools/call" and params.get("name") in WRITES_RUN:
            run_id = (params.get("arguments") or {}).get("run_id")
            if run_id is None and isinstance(result, dict):  # create_run: the new id is in the answer
                run_id = (result.get("structuredContent") or {}).get("run_id")
            await self.changed(run_id if isinstance(run_id, str) else None)
        return result
