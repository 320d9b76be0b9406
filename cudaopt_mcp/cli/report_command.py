"""``cudaopt report RUN``: build a run's report and say where it is."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from cudaopt_mcp.errors import RunError


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="a run id (in --results) or a run folder")
    parser.add_argument("--results", type=Path, default=Path("results"), help="run folders (default ./results)")
    parser.add_argument("--out", type=Path, metavar="FILE.html", help="also copy the HTML page here")
    parser.add_argument("--markdown", action="store_true", help="print the markdown summary to standard output")


def run_report(args: argparse.Namespace) -> int:
    from cudaopt_mcp.report.build import build_report  # plotting loads only for this command
    from cudaopt_mcp.service.runs import RUN_ID, RunStore

    results, run_id = _locate(args.run, args.results)
    if not RUN_ID.match(run_id):
        raise RunError(f"{args.run!r} is neither a run id (like run-001) nor a run folder")
    files = build_report(RunStore(results), run_id, progress=_stderr_progress)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(files.html, args.out)
    if args.markdown:
        print(files.markdown.read_text(), end="")
    else:
        print(args.out or files.html)
    return 0


def report_after_run(results: Path, run_id: str) -> Path | None:
    """The report of a run that ``cudaopt optimize`` just ran here; None (and why on stderr) when it cannot be built."""
    from cudaopt_mcp.report.build import build_report
    from cudaopt_mcp.service.runs import RunStore

    try:
        return build_report(RunStore(results), run_id).html
    except (RunError, OSError, ValueError) as exc:
        print(f"cudaopt: the report of {run_id} could not be built: {exc}", file=sys.stderr)
        return None


def _locate(run: str, results: Path) -> tuple[Path, str]:
    """(results folder, run id) from a run id or a run folder path."""
    path = Path(run)
    if (path / "run.json").is_file():
        return path.resolve().parent, path.resolve().name
    if not (results / run / "run.json").is_file() and len(path.parts) > 1:
        raise RunError(f"{run} is not a run folder (no run.json in it)")
    return results, run


def _stderr_progress(done: float, total: float, message: str) -> None:
    print(f"cudaopt report: [{int(done)}/{int(total)}] {message}", file=sys.stderr, flush=True)
