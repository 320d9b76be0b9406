"""Build a run's report: ``report/report.html`` (self-contained), ``report/report.md``, and every plot as SVG
and PNG beside them, in the run folder.

A report is rebuilt only when the run changed since it was written (the stamp covers the records it reads
and this module's version), so the MCP resource can serve it on every read.
"""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

from matplotlib import rc_context
from matplotlib.figure import Figure  # figures without pyplot: no display, no global state
from pydantic import BaseModel

from cudaopt_mcp.report.facts import run_facts
from cudaopt_mcp.report.importance import importance, top_pairs, tried_configurations
from cudaopt_mcp.report.page import Plot, render_page
from cudaopt_mcp.report.plots_errors import mismatch_figure, mismatch_panels
from cudaopt_mcp.report.plots_progress import latency_figure, progress_figure
from cudaopt_mcp.report.plots_roofline import case_rates, resources_figure, roofline_figure
from cudaopt_mcp.report.plots_space import importance_figure, pair_heatmaps
from cudaopt_mcp.report.run_reading import RunData, read_run
from cudaopt_mcp.report.summary_markdown import render_markdown
from cudaopt_mcp.service.progress import Progress, no_progress
from cudaopt_mcp.service.runs import RunStore, atomic_write

VERSION = 1  # bump when what a report shows changes: stale reports are rebuilt
FOLDER = "report"
HTML = "report.html"
MARKDOWN = "report.md"
STAMP = "stamp.json"
SVG_STYLE = {"svg.fonttype": "none", "svg.hashsalt": "cudaopt"}  # text stays text; ids are stable between builds
STAMPED = ("run.json", "history.jsonl", "optimize.jsonl", "optimize_summary.json", "best.json", "baseline.json")


class ReportFiles(BaseModel):
    folder: Path
    html: Path
    markdown: Path
    plots: list[str]
    rebuilt: bool


def ensure_report(store: RunStore, run_id: str, progress: Progress = no_progress) -> ReportFiles:
    """The run's report, rebuilt when the run changed since it was built."""
    folder = store.run_dir(run_id) / FOLDER
    stamp = _stamp(store.run_dir(run_id))
    try:
        kept = json.loads((folder / STAMP).read_text())
    except (OSError, ValueError):
        kept = None
    if kept and kept.get("stamp") == stamp and (folder / HTML).is_file() and (folder / MARKDOWN).is_file():
        return ReportFiles(folder=folder, html=folder / HTML, markdown=folder / MARKDOWN, plots=kept.get("plots", []),
                           rebuilt=False)
    return build_report(store, run_id, progress)


def build_report(store: RunStore, run_id: str, progress: Progress = no_progress) -> ReportFiles:
    """Read the run, draw every plot it has data for, write the page, the markdown and the images."""
    steps = 9
    progress(0, steps, f"reading {run_id}")
    run_dir = store.run_dir(run_id)
    stamp = _stamp(run_dir)
    data = read_run(store, run_id)
    folder = run_dir / FOLDER
    folder.mkdir(exist_ok=True)
    unit = "ms CPU" if data.run.backend == "cpu" else "ms"
    tried = tried_configurations(data) if data.params else []
    ranking = importance(data, tried) if tried else None
    rates = case_rates(data)
    facts = run_facts(data, ranking, rates)
    panels, without_map = mismatch_panels(data)
    drawn = [
        ("progress", "Score per iteration: each correct candidate, the best so far, the baseline; failures along the "
                     "top by kind", lambda: progress_figure(data, unit), "No evaluations to plot yet."),
        ("latency", "Latency distribution per performance case: baseline, best and the last few timed candidates",
         lambda: latency_figure(data, unit), "No timed performance case was recorded."),
        ("importance", "How much of the score's variance each tunable explains",
         lambda: importance_figure(ranking) if ranking else None, _no_importance(data, tried)),
        ("space", "Best score per cell for the most important parameter pairs",
         lambda: pair_heatmaps(data, tried, top_pairs(ranking, data.params), unit), _no_space(data, tried)),
        ("errors", "Binned mismatch maps of the latest wrong outputs", lambda: mismatch_figure(panels),
         "No candidate produced a wrong output." if not without_map else "No mismatch map was stored."),
        ("roofline", "Achieved FLOP/s and bytes/s of the best and the baseline against the GPU's measured peaks",
         lambda: roofline_figure(data, rates), "The task states no FLOPs or bytes (metrics), or nothing was timed."),
        ("resources", "Registers and spills of each candidate against its score", lambda: resources_figure(data, unit),
         "Fewer than two correct candidates with compile resources."),
    ]
    plots: dict[str, Plot] = {}
    for step, (name, caption, draw, absent) in enumerate(drawn, start=1):
        progress(step, steps, f"drawing {name}")
        plots[name] = _plot(folder, name, caption, draw(), absent)
    facts.missing += without_map
    shown = [name for name, plot in plots.items() if plot.svg]
    progress(steps - 1, steps, "writing the page")
    generated = f"cudaopt report of {run_id}, built {time.strftime('%Y-%m-%d %H:%M:%S')} from {data.order}."
    atomic_write(folder / HTML, render_page(facts, plots, generated))
    atomic_write(folder / MARKDOWN, render_markdown(facts, shown, HTML))
    atomic_write(folder / STAMP, json.dumps({"stamp": stamp, "plots": shown}))
    progress(steps, steps, "done")
    return ReportFiles(folder=folder, html=folder / HTML, markdown=folder / MARKDOWN, plots=shown, rebuilt=True)


def _plot(folder: Path, name: str, caption: str, fig: Figure | None, absent: str) -> Plot:
    for suffix in (".svg", ".png"):
        (folder / f"{name}{suffix}").unlink(missing_ok=True)  # a plot the run no longer has must not linger
    if fig is None:
        return Plot(name=name, caption=caption, absent=absent)
    with rc_context(SVG_STYLE):
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg")
        fig.set_layout_engine("none")  # laid out by the SVG's draw: the PNG keeps it (a second layout cost ~0.2 s)
        fig.savefig(folder / f"{name}.png", format="png", dpi=110)
    svg = buffer.getvalue()
    atomic_write(folder / f"{name}.svg", svg)
    return Plot(name=name, caption=caption, svg=svg[svg.index("<svg"):])  # inline: no XML prolog or doctype


def _no_importance(data: RunData, tried: list) -> str:
    if not data.params:
        return "The task has no tunables: no parameter space to show."
    return f"Too few correct configurations of the tunables ({sum(1 for t in tried if t.score_ms)}) to rank parameters."


def _no_space(data: RunData, tried: list) -> str:
    if not data.params:
        return "The task has no tunables."
    if sum(1 for values in data.params.values() if len(values) > 1) < 2:
        return "Fewer than two tunables take more than one value: no pairs to map."
    return "No configuration of the tunables was scored yet."


def _stamp(run_dir: Path) -> list:
    """What the report depends on: sizes and modification times of the run's records and folders."""
    entries: list = [VERSION]
    for name in STAMPED:
        entries.append(_file_state(run_dir / name))
    candidates = run_dir / "candidates"
    entries.append(sorted((p.name, *(_file_state(p / n) for n in ("compile.json", "evaluation.json", "profile.json")))
                          for p in candidates.iterdir()) if candidates.is_dir() else None)
    requests = run_dir / "requests"
    entries.append(sorted(p.name for p in requests.iterdir()) if requests.is_dir() else None)
    return json.loads(json.dumps(entries))


def _file_state(path: Path) -> list | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]
