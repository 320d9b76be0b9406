"""``cudaopt optimize``: options, proposer choice, the loop, and what is printed.

Exit codes: 0 a correct candidate was found (and, when scored, confirmed on fresh inputs); 1 none was;
2 bad input or an unusable setup (missing extra or API key, server unreachable).
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from cudaopt_mcp.cli.local_server import LocalServer
from cudaopt_mcp.client.proposal import ProposerSettings
from cudaopt_mcp.client.proposers import choose, create_proposer, proposer_names

if TYPE_CHECKING:
    from cudaopt_mcp.client.loop_models import LoopSummary
    from cudaopt_mcp.client.proposers import Proposer


def add_optimize_arguments(parser: argparse.ArgumentParser, backends: list[str]) -> None:
    parser.add_argument("task", nargs="?", help="bundled task name or task folder (omit with --run)")
    parser.add_argument("--max-iterations", type=int, default=7, help="proposals after the baseline (default 7)")
    parser.add_argument("--time-budget", type=float, metavar="SECONDS", help="stop starting new iterations after this")
    parser.add_argument("--proposer", choices=["auto", *proposer_names()], default="auto",
                        help="auto (default): llm when OPENAI_API_KEY is set, else the tuner (no network needed)")
    parser.add_argument("--model", default="gpt-5-mini", help="llm: model name (default gpt-5-mini)")
    parser.add_argument("--reasoning-effort", choices=["minimal", "low", "medium", "high", "none"], default="medium",
                        help="llm: reasoning effort (default medium; 'none' sends none, for endpoints without it)")
    parser.add_argument("--base-url", help="llm: any OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 (vLLM)")
    parser.add_argument("--request-timeout", type=float, default=300.0, help="llm: seconds per request (default 300)")
    parser.add_argument("--server", metavar="URL", help="use a running MCP server (streamable HTTP, e.g. "
                                                        "http://127.0.0.1:8765/mcp) instead of serving in this process")
    parser.add_argument("--backend", choices=backends, help="backend of the server started here (default: cuda if a "
                                                            "GPU is present, else cpu)")
    parser.add_argument("--results", type=Path, default=Path("results"), help="run folders (default ./results)")
    parser.add_argument("--run", metavar="RUN_ID", help="continue this run instead of creating one")
    parser.add_argument("--seed", type=int, help="input seed for every evaluation of this invocation (default: random)")
    parser.add_argument("--warmup", type=int, help="warm-up launches per performance case while searching "
                                                   "(default: 3 on a GPU, the server's on cpu)")
    parser.add_argument("--reps", type=int, help="timed launches per performance case while searching (default: 30 on "
                                                 "a GPU, the server's on cpu); the best is confirmed with the server's "
                                                 "full plan (10 + 100 on a GPU)")
    parser.add_argument("--no-confirm", action="store_true", help="skip re-evaluating the best on fresh inputs")
    parser.add_argument("--full-timing", action="store_true",
                        help="time every candidate with the full plan (default: a case clearly slower than the best, "
                             "by over 10 %%, stops being timed early, and a slow kernel's case is timed for about "
                             "50 ms, at least 10 launches); with --server, the server decides (its --full-timing)")
    parser.add_argument("--compile-ahead", choices=["auto", "on", "off"], default="auto",
                        help="compile the tuner's next candidate while the current one is timed (auto: on a GPU "
                             "backend only; the cpu backend's clock is the host's CPU, which the compiler would share)")
    parser.add_argument("--ahead", type=int, metavar="N",
                        help="with compile-ahead: candidates chosen and compiled ahead, in parallel (default: the "
                             "host's cores, at most 4); the tuner counts the ones in flight as poor (TPE's constant liar)")
    parser.add_argument("--parallel", type=int, metavar="N",
                        help="candidates evaluated at once, each on its own worker (the tuner chooses them ahead; the "
                             "server started here gets N workers; default: one per visible GPU, 1 on cpu or with "
                             "--server)")
    parser.add_argument("--ray", metavar="ADDRESS",
                        help="the server started here runs its workers as Ray actors of this cluster ('local': one "
                             "started here; needs cudaopt[ray]); with --parallel N, N actors")
    parser.add_argument("--profile-every", type=int, metavar="N",
                        help="cuda: profile the best (Nsight Compute) every N iterations; default: after each improvement "
                             "(llm) or never (tuner); 0: never. The summary goes into the LLM's feedback")
    parser.add_argument("--no-report", dest="report", action="store_false",
                        help="do not write the run's report (report/report.html in the run folder) at the end")
    parser.add_argument("--json", action="store_true", help="print a JSON summary instead of the table")


def run_optimize(args: argparse.Namespace) -> int:
    refused = _refusal(args)
    if refused:
        _say(f"error: {refused}")
        return 2
    parallel = args.parallel or _default_parallel(args)
    # the input seed is chosen here, so the first evaluation's inputs can be drawn while the rest starts
    input_seed = args.seed if args.seed is not None else random.randrange(1, 2**31)
    local: LocalServer | None = None
    if not args.server:  # first: its workers start (and the first inputs are drawn) while the proposer and MCP load
        task_source = args.task or str(args.results / args.run / "task")
        local = LocalServer(args.results, args.backend, parallel if parallel > 1 or args.ray else None, args.ray,
                            args.full_timing, ahead=(task_source, input_seed),
                            baseline_timing=None if args.run else (args.warmup, args.reps))
    try:
        name, why = choose(args.proposer)
        settings = ProposerSettings(model=args.model, base_url=args.base_url, request_timeout_s=args.request_timeout,
                                    reasoning_effort=None if args.reasoning_effort == "none" else args.reasoning_effort,
                                    seed=args.seed)
        proposer = create_proposer(name, settings)  # ProposerUnavailable (a HarnessError) → exit 2 with its hint
        _say(f"proposer {name} ({why})")
        try:
            summary = _loop(args, proposer, name, parallel, local, input_seed)
        finally:
            proposer.close()
    finally:
        if local is not None:  # the command ends now: its workers are asked to exit, not waited for
            local.close(wait=False)
    if not args.server and args.report:
        from cudaopt_mcp.cli.report_command import report_after_run

        page = report_after_run(args.results, summary.run_id)
        if page is not None:
            _say(f"report: {page}")
    _result(summary, args.json)
    return 0 if summary.found_correct else 1


def _loop(args: argparse.Namespace, proposer: Proposer, proposer_name: str, parallel: int,
          local: LocalServer | None, seed: int) -> LoopSummary:
    import anyio  # the MCP client and the loop load only for this command

    from cudaopt_mcp.client.loop import optimise
    from cudaopt_mcp.client.loop_models import LoopConfig
    from cudaopt_mcp.client.session import open_http_session
    from cudaopt_mcp.client.terminal import Terminal

    config = LoopConfig(task=args.task, run_id=args.run, max_iterations=args.max_iterations,
                        time_budget_s=args.time_budget, seed=seed, results=args.results,
                        confirm=not args.no_confirm, warmup=args.warmup, reps=args.reps,
                        compile_ahead={"auto": None, "on": True, "off": False}[args.compile_ahead],
                        ahead=args.ahead, parallel=parallel,
                        # the tuner does not read profiles: it profiles only when asked
                        profile_every=0 if args.profile_every is None and proposer_name == "tuner"
                        else args.profile_every)

    async def main() -> LoopSummary:
        async with (local.session() if local is not None else open_http_session(args.server)) as session:
            summary = await optimise(session, proposer, config, Terminal(quiet=False))
            if args.server and args.report:  # the run folder is the server's: its report comes over MCP
                await _remote_report(session, summary.run_id, args.results)
            return summary

    try:
        return anyio.run(main)
    except BaseExceptionGroup as group:  # the MCP client's task groups wrap what went wrong
        raise _innermost(group) from None


def _refusal(args: argparse.Namespace) -> str | None:
    """What is wrong with the command line, before any work: the first problem, or None."""
    if bool(args.task) == bool(args.run):
        return "give a task, or --run RUN_ID to continue a run (not both)"
    if args.full_timing and args.server:
        return "--full-timing is the server's choice: start it with `cudaopt serve --full-timing`"
    if args.max_iterations < 0:
        return "--max-iterations must be 0 or more"
    if args.ahead is not None and not 1 <= args.ahead <= 32:
        return f"--ahead must be between 1 and 32, got {args.ahead}"
    if args.parallel is not None and not 1 <= args.parallel <= 64:
        return f"--parallel must be between 1 and 64, got {args.parallel}"
    gpus = _local_gpus(args)
    if args.parallel and args.parallel > 1 and gpus and args.parallel > len(gpus):  # two on one time each other
        return (f"--parallel {args.parallel} needs {args.parallel} GPUs, {len(gpus)} visible ({', '.join(gpus)}): one "
                "worker per GPU, as two on one would time each other's kernels")
    return None


def _default_parallel(args: argparse.Namespace) -> int:
    """One evaluation per visible GPU when this command starts the server on a GPU host; else one."""
    return max(1, len(_local_gpus(args)))


def _local_gpus(args: argparse.Namespace) -> list[str]:
    """The GPUs of the server this command starts, when it starts one on the cuda backend here; else none."""
    if args.server or args.backend == "cpu" or args.ray:
        return []
    from harness_tools.backends.cuda.backend import gpu_present, visible_gpus

    return visible_gpus() if gpu_present() else []


async def _remote_report(session, run_id: str, results: Path) -> None:
    from mcp import MCPError

    from cudaopt_mcp.client.report_fetch import fetch_report
    from cudaopt_mcp.errors import HarnessError

    try:
        page = await fetch_report(session, run_id, results / run_id / "report")
    except (HarnessError, MCPError, OSError) as exc:  # the run is done and kept: say so, do not fail it
        _say(f"the server's report of {run_id} could not be read: {str(exc)[:300]}")
        return
    _say(f"report: {page}")


def _result(summary: LoopSummary, as_json: bool) -> None:
    """The command's result, the only thing it writes to stdout: the JSON summary or the final table."""
    from cudaopt_mcp.client.terminal import final_table

    text = summary.model_dump_json(indent=2, exclude={"attempts": {"__all__": {"evaluation"}}}) if as_json \
        else final_table(summary)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _say(line: str) -> None:
    """A line for the user on stderr (stdout carries only the final table or JSON)."""
    print(f"cudaopt: {line}", file=sys.stderr)


def _innermost(group: BaseExceptionGroup) -> BaseException:
    """The first real exception inside (nested) exception groups: a refusal reads as itself."""
    first = group.exceptions[0]
    return _innermost(first) if isinstance(first, BaseExceptionGroup) else first
