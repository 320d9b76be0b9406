"""The cudaopt MCP server: tools, resources and prompts over one run store and one backend.

    cudaopt-mcp                                     stdio (what MCP clients launch)
    cudaopt serve --transport http --port 8765     streamable HTTP at http://127.0.0.1:8765/mcp
    python -m cudaopt_mcp.server [serve options]    the same, without the console scripts

stdout carries the protocol only (stdio); every log line goes to stderr. Over HTTP the server binds
loopback by default, with DNS-rebinding protection; binding any other address needs a bearer token in
``$CUDAOPT_MCP_TOKEN`` (clients send ``Authorization: Bearer <token>``), and the server refuses to
start without one. An HTTP client is not the user: it may not send inline task specs (whose reference
is Python code) nor name task folders outside ``--task-root``.

Long calls: an evaluation runs every case of a candidate (a few seconds on a GPU; validation-only on
the cpu backend also takes seconds). Many clients cut a tool call at about 60 s, so keep per-case
``timeout_s`` and ``reps`` modest there; progress notifications are sent every ~2 s while one runs.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import logging
import sys
import threading
from collections.abc import AsyncIterator

import anyio
from mcp.server import MCPServer

from cudaopt_mcp.errors import ServeError
from cudaopt_mcp.server import completions, jobs, prompts, resources, tools
from cudaopt_mcp.server.options import add_serve_arguments, config_from_args
from cudaopt_mcp.server.run_updates import RunUpdates
from cudaopt_mcp.server.spec_errors import SpecErrors
from cudaopt_mcp.server.tasks import TasksExtension, TaskTable
from cudaopt_mcp.server.transports import is_loopback, serve_http
from cudaopt_mcp.service.state import ServerConfig, ServerState
from harness_tools import HarnessError
from harness_tools.run import jail

log = logging.getLogger("cudaopt.mcp")

INSTRUCTIONS = """cudaopt compiles, checks and times CUDA kernels. Typical loop: list_tasks → create_run(task) →
evaluate(run_id) for the baseline → evaluate(run_id, source=..., launch=...) for each idea → best(run_id).
Runs persist on disk: continue an earlier run with its run_id (list_runs shows them). Failing candidates come
back as error results with the evidence (compile log line, first mismatching element, CUDA error name).
Big artifacts (sources, logs, records, outputs) are cudaopt:// resources linked from the results."""


class _Shared:
    """The state shared by every session of one server object (one backend, however many clients)."""

    def __init__(self, config: ServerConfig, state: ServerState | None = None):
        self.config = config
        self.state = state
        self.owned = state is None  # a state handed in is its giver's to close
        self.users = 0
        self.lock = threading.Lock()

    def get(self) -> ServerState:
        if self.state is None:
            raise RuntimeError("the server is not running")
        return self.state


def build_server(config: ServerConfig, state: ServerState | None = None) -> MCPServer:
    """The server over ``config``; over ``state`` where one is given (already open, perhaps with its workers
    starting: the in-process server of ``cudaopt optimize``), which the caller then closes."""
    shared = _Shared(config, state)
    task_table = TaskTable()

    @contextlib.asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[ServerState]:
        with shared.lock:
            if shared.state is None:
                shared.state = ServerState.open(config)
                log.info("cudaopt MCP server: results in %s, transport %s", config.results_dir.resolve(), config.transport)
            shared.users += 1
            state = shared.state
        try:
            async with anyio.create_task_group() as group:  # where MCP tasks run: they outlive their request
                owner = task_table.group is None
                if owner:
                    task_table.group = group
                yield state
                if owner:
                    task_table.group = None
                group.cancel_scope.cancel()
        finally:
            with shared.lock:
                shared.users -= 1
                if shared.users == 0 and shared.state is not None and shared.owned:
                    shared.state.close()
                    shared.state = None

    spec_errors, updates = SpecErrors(), RunUpdates()
    task_table.on_end = updates.changed
    server = MCPServer("cudaopt", title="cudaopt: CUDA kernel optimisation", version=_version(),
                       instructions=INSTRUCTIONS, lifespan=lifespan, log_level="WARNING",
                       middleware=[spec_errors, updates], subscriptions=updates.bus,
                       extensions=[TasksExtension(task_table)])
    spec_errors.server = server
    tools.register(server)
    job_table = jobs.JobTable()
    job_table.on_end = updates.changed
    jobs.register(server, job_table)
    resources.register(server, shared.get)
    prompts.register(server)
    completions.register(server, shared.get)
    return server


def _version() -> str:
    try:
        return importlib.metadata.version("cudaopt")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def check_jail(config: ServerConfig) -> None:
    """Say at start whether candidate code is jailed; refuse HTTP off loopback when it is not."""
    state = jail.require_active()
    _say(state.describe())
    if state.active:
        return
    if config.transport == "http" and not is_loopback(config.host):
        raise ServeError(f"refusing to serve HTTP on {config.host!r}: remote clients' kernels would run unjailed "
                         f"({state.detail}); make the jail work (cudaopt doctor says why not) or bind a loopback host")
    _say("WARNING: candidate code runs unjailed, with this user's rights: serve only kernels you trust")


def _say(line: str) -> None:
    """A line for the operator on stderr: with the stdio transport, stdout carries protocol messages only."""
    print(f"cudaopt-mcp: {line}", file=sys.stderr, flush=True)


def serve(config: ServerConfig) -> int:
    """Run the server until the client disconnects (stdio) or it is interrupted (HTTP)."""
    check_jail(config)
    server = build_server(config)
    if config.transport == "http":
        serve_http(server, config)
    else:
        server.run("stdio")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``cudaopt-mcp`` and ``python -m cudaopt_mcp.server``."""
    parser = argparse.ArgumentParser(prog="cudaopt-mcp", description="The cudaopt MCP server (stdio by default).")
    parser.add_argument("-v", "--verbose", action="store_true", help="log to stderr at INFO level")
    add_serve_arguments(parser)
    args = parser.parse_args(argv)
    return run_serve(args)


def run_serve(args: argparse.Namespace) -> int:
    """``cudaopt serve``: configure logging (stderr only), then serve; 2 when it cannot start."""
    logging.basicConfig(level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING, stream=sys.stderr,
                        format="cudaopt-mcp: %(message)s")
    try:
        return serve(config_from_args(args))
    except (ServeError, HarnessError) as exc:
        _say(f"error: {exc}")
        return 2
    except KeyboardInterrupt:
        return 0
