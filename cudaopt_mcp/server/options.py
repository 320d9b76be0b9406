"""The command-line options of the server (``cudaopt serve``, ``python -m cudaopt_mcp.server``).

Kept apart from the MCP adapter so the CLI can add them without importing MCP.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from cudaopt_mcp.service.state import ServerConfig, search_shortcuts
from harness_tools import available_backends


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``cudaopt serve`` (also used by ``python -m cudaopt_mcp.server``)."""
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio",
                        help="stdio (default; what MCP clients launch) or streamable HTTP")
    parser.add_argument("--host", default="127.0.0.1",
                        help="HTTP bind address (default 127.0.0.1; any other needs $CUDAOPT_MCP_TOKEN)")
    parser.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765)")
    parser.add_argument("--results", type=Path, default=Path("results"), help="run folders live here (default ./results)")
    parser.add_argument("--backend", choices=available_backends(), help="default: cuda if a GPU is present, else cpu")
    parser.add_argument("--workers", type=_at_least_one, metavar="N",
                        help="evaluation workers: concurrent evaluate calls run on different ones, one candidate each "
                             "(default: one per visible GPU on cuda, each pinned to its GPU; one on cpu)")
    parser.add_argument("--ray", metavar="ADDRESS",
                        help="workers as Ray actors of this cluster, one GPU each (or one CPU on the cpu backend); "
                             "'auto' joins the local node's cluster, 'local' starts one here (needs cudaopt[ray])")
    parser.add_argument("--full-timing", action="store_true",
                        help="evaluate times every candidate with the full plan (default: a case clearly slower than "
                             "the run's best, by over 10 %%, stops being timed early, and a slow kernel's case is "
                             "timed for about 50 ms, at least 10 launches)")
    parser.add_argument("--task-root", type=Path, action="append", default=[], metavar="DIR",
                        help="folder whose task folders HTTP clients may load (repeatable; stdio clients may load any)")


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"at least 1 worker, got {value}")
    return value


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    return ServerConfig(results_dir=args.results, backend=args.backend, transport=args.transport,
                        task_roots=tuple(args.task_root), host=args.host, port=args.port,
                        workers=getattr(args, "workers", None), ray_address=getattr(args, "ray", None),
                        **search_shortcuts(getattr(args, "full_timing", False)))
