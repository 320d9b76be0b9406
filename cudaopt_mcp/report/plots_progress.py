"""How the search moved: the score per iteration with the best so far, and the latency distributions.

Figures are built with matplotlib's object interface (no pyplot: no global state, safe in a server thread).
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from cudaopt_mcp.report.axes_style import plain_log_labels
from cudaopt_mcp.report.run_reading import FAILURE_KINDS, CandidateData, RunData

KIND_STYLE = {  # marker and colour per failure kind, fixed so every report reads the same
    "wrong output": ("X", "#d62728"), "crashed": ("v", "#8c564b"), "timed out": ("s", "#9467bd"),
    "compile error": ("^", "#ff7f0e"), "refused": ("D", "#7f7f7f"), "unusable reply": ("P", "#bcbd22"),
    "error": ("*", "#17becf"),
}


def progress_figure(data: RunData, unit: str) -> Figure | None:
    """Score per iteration (log scale), the best so far as a step, the baseline, failures by kind along the top."""
    if not data.points:
        return None
    fig = Figure(figsize=(9, 4.2), layout="constrained")
    ax = fig.add_subplot()
    scored = [p for p in data.points if p.correct and p.score_ms]
    if scored:
        ax.scatter([p.index for p in scored], [p.score_ms for p in scored], s=22, color="#1f77b4", zorder=3,
                   label="correct candidate")
        xs, ys, best = [], [], None
        for p in sorted(scored, key=lambda q: q.index):
            best = p.score_ms if best is None else min(best, p.score_ms)
            xs.append(p.index)
            ys.append(best)
        xs.append(max(p.index for p in data.points))
        ys.append(ys[-1])
        ax.step(xs, ys, where="post", color="#2ca02c", linewidth=2, label="best so far")
        ax.set_yscale("log")
        plain_log_labels(ax.yaxis)
    baseline = _baseline_score(data)
    if baseline:
        ax.axhline(baseline, color="#555555", linestyle="--", linewidth=1, label=f"baseline {baseline:.4g} {unit}")
    top = max([p.score_ms for p in scored] + ([baseline] if baseline else []), default=1.0) * 1.25
    for kind in FAILURE_KINDS:
        failed = [p.index for p in data.points if p.kind == kind]
        if failed:
            marker, colour = KIND_STYLE[kind]
            ax.scatter(failed, [top] * len(failed), marker=marker, color=colour, s=40, zorder=4,
                       label=f"{kind} ({len(failed)})", clip_on=False)
    ax.set_xlabel("iteration (0: baseline)" if data.order == "the loop's journal" else "evaluation (history order)")
    ax.set_ylabel(f"score ({unit}, lower is better)")
    ax.set_title(f"{data.run.run_id} · {data.run.task}: score per iteration")
    ax.grid(True, which="both", alpha=0.25)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), framealpha=0.85)
    return fig


def _baseline_score(data: RunData) -> float | None:
    """The baseline as the search measured it (the points' scale), else its recorded score."""
    if data.baseline is None:
        return None
    searched = [p.score_ms for p in data.points if p.candidate_id == data.baseline.candidate_id and p.score_ms]
    return searched[0] if searched else data.baseline.score_ms


def latency_figure(data: RunData, unit: str, last: int = 3) -> Figure | None:
    """Per performance case, the timed samples of the baseline, the best and the last few timed candidates."""
    chosen = _chosen(data, last)
    cases: list[str] = []
    for _, candidate in chosen:
        for case in candidate.performance_cases():
            if case["name"] not in cases:
                cases.append(case["name"])
    if not cases:
        return None
    fig = Figure(figsize=(9, 1.2 + 2.3 * len(cases)), layout="constrained")
    axes = fig.subplots(len(cases), 1, squeeze=False)[:, 0]
    for ax, case_name in zip(axes, cases):
        labels, samples = [], []
        for label, candidate in chosen:
            case = next((c for c in candidate.performance_cases() if c["name"] == case_name), None)
            values = (case or {}).get("timing", {}).get("samples_ms") or []
            if values:
                labels.append(label)
                samples.append(values)
        if samples:
            ax.boxplot(samples, orientation="horizontal", tick_labels=labels, showfliers=True,
                       flierprops={"markersize": 3})
        ax.set_title(case_name, fontsize=9, loc="left")
        ax.set_xlabel(f"launch time ({unit})")
        ax.grid(True, axis="x", alpha=0.25)
    fig.suptitle("Latency per performance case (each timed launch of the latest evaluation)", fontsize=10)
    return fig


def _chosen(data: RunData, last: int) -> list[tuple[str, CandidateData]]:
    picked: list[tuple[str, CandidateData]] = []
    seen: set[str] = set()

    def add(label: str, candidate_id: str | None) -> None:
        candidate = data.candidates.get(candidate_id or "")
        if candidate is not None and candidate_id not in seen and candidate.performance_cases():
            seen.add(candidate_id)
            picked.append((label, candidate))

    add(f"baseline {data.baseline.candidate_id}" if data.baseline else "", data.baseline.candidate_id if data.baseline else None)
    add(f"best {data.best.candidate_id}" if data.best else "", data.best.candidate_id if data.best else None)
    recent = [p.candidate_id for p in reversed(data.points) if p.correct and p.candidate_id]
    for candidate_id in list(dict.fromkeys(recent))[:last]:
        add(candidate_id, candidate_id)
    return picked
