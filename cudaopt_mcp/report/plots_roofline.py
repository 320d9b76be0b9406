"""How close to the hardware: the roofline of the best and the baseline, and compile resources against score.

Achieved FLOP/s and bytes/s come from the task's metrics (flops, bytes) over each performance case's median;
the ceilings are the peaks the worker measured on the same GPU (a copy kernel and an FMA kernel), not a
datasheet. Where no peaks were measured (the cpu backend, older records) the points stand without them.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from pydantic import BaseModel

from cudaopt_mcp.report.axes_style import plain_log_labels
from cudaopt_mcp.report.run_reading import CandidateData, RunData


class CaseRate(BaseModel):
    label: str
    case: str
    median_ms: float | None
    tflops: float | None
    gbps: float | None
    pct_flops: float | None = None
    pct_bandwidth: float | None = None


def peaks(data: RunData) -> tuple[float | None, float | None]:
    device = data.environment().get("device") or {}
    return device.get("peak_fp32_tflops"), device.get("peak_copy_gbps")


def case_rates(data: RunData) -> list[CaseRate]:
    """Achieved rates per performance case of the baseline and the best."""
    peak_tflops, peak_gbps = peaks(data)
    rates = []
    for label, record in (("baseline", data.baseline), ("best", data.best)):
        candidate = data.candidates.get(record.candidate_id) if record else None
        if candidate is None or (label == "baseline" and data.best and record.candidate_id == data.best.candidate_id):
            continue
        for case in candidate.performance_cases():
            tflops, gbps = case.get("tflops"), case.get("gbps")
            rates.append(CaseRate(label=f"{label} {candidate.candidate_id}", case=case["name"],
                                  median_ms=case.get("median_ms"), tflops=tflops, gbps=gbps,
                                  pct_flops=100 * tflops / peak_tflops if tflops and peak_tflops else None,
                                  pct_bandwidth=100 * gbps / peak_gbps if gbps and peak_gbps else None))
    return rates


def roofline_figure(data: RunData, rates: list[CaseRate]) -> Figure | None:
    both = [r for r in rates if r.tflops and r.gbps]
    if not both:
        return _bandwidth_figure(data, rates)
    peak_tflops, peak_gbps = peaks(data)
    fig = Figure(figsize=(8, 5), layout="constrained")
    ax = fig.add_subplot()
    intensity = [1000 * r.tflops / r.gbps for r in both]  # FLOP per byte
    low, high = min(intensity) / 10, max(intensity) * 10
    if peak_tflops and peak_gbps:
        ridge = 1000 * peak_tflops / peak_gbps
        low, high = min(low, ridge / 4), max(high, ridge * 4)  # the ridge point is always in view
        xs = sorted({low, min(max(ridge, low), high), high})
        ax.plot(xs, [min(peak_tflops, x * peak_gbps / 1000) for x in xs], color="#333333", linewidth=2,
                label=f"measured peaks: {peak_gbps:.0f} GB/s, {peak_tflops:.1f} TFLOP/s")
    for label, marker in (("baseline", "o"), ("best", "*")):
        chosen = [(x, r) for x, r in zip(intensity, both) if r.label.startswith(label)]
        if chosen:
            ax.scatter([x for x, _ in chosen], [r.tflops for _, r in chosen], marker=marker, s=90 if marker == "*" else 40,
                       label=f"{chosen[0][1].label} (per performance case)", zorder=3)
            below = marker == "*"  # the best's labels under its points, the baseline's over: no overlap
            for k, (x, r) in enumerate(sorted(chosen, key=lambda item: item[1].tflops)):
                offset = -(10 + 9 * k) if below else 4 + 9 * k
                ax.annotate(r.case, (x, r.tflops), fontsize=7, xytext=(6, offset), textcoords="offset points",
                            arrowprops={"arrowstyle": "-", "color": "#999999", "linewidth": 0.5})
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    achieved = [r.tflops for r in both]
    ax.set_ylim(min(achieved) / 4, max(achieved + ([peak_tflops] if peak_tflops else [])) * 2.5)
    plain_log_labels(ax.xaxis)
    plain_log_labels(ax.yaxis)
    ax.set_xlabel("arithmetic intensity (FLOP per byte, from the task's metrics)")
    ax.set_ylabel("achieved TFLOP/s")
    note = "" if peak_tflops and peak_gbps else " (no measured peaks on this backend)"
    ax.set_title(f"Roofline{note}", fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8)
    return fig


def _bandwidth_figure(data: RunData, rates: list[CaseRate]) -> Figure | None:
    moved = [r for r in rates if r.gbps]
    if not moved:
        return None
    _, peak_gbps = peaks(data)
    fig = Figure(figsize=(8, 0.8 + 0.4 * len(moved)), layout="constrained")
    ax = fig.add_subplot()
    ax.barh([f"{r.label} · {r.case}" for r in moved], [r.gbps for r in moved], color="#1f77b4")
    if peak_gbps:
        ax.axvline(peak_gbps, color="#333333", linewidth=2, label=f"measured copy peak {peak_gbps:.0f} GB/s")
        ax.legend(fontsize=8)
    ax.set_xlabel("achieved GB/s (the task states bytes, not FLOPs)")
    ax.set_title("Bandwidth against the measured peak", fontsize=10)
    return fig


def resources_figure(data: RunData, unit: str) -> Figure | None:
    """Registers and spilled bytes of every compiled candidate against its best correct score."""
    scores: dict[str, float] = {}
    for p in data.points:
        if p.correct and p.score_ms and p.candidate_id:
            scores[p.candidate_id] = min(scores.get(p.candidate_id, p.score_ms), p.score_ms)
    rows = [(c, scores[c.candidate_id]) for c in data.candidates.values()
            if c.candidate_id in scores and c.resources and c.resources.registers is not None]
    if len(rows) < 2:
        return None
    fig = Figure(figsize=(10, 4), layout="constrained")
    left, right = fig.subplots(1, 2)
    _scatter(left, rows, lambda c: c.resources.registers, "registers per thread")
    _scatter(right, rows, lambda c: c.resources.spill_bytes, "spilled bytes (stores + loads)")
    right.set_xscale("symlog", linthresh=8)
    for ax in (left, right):
        ax.set_ylabel(f"score ({unit})")
        ax.set_yscale("log")
        plain_log_labels(ax.yaxis)
        ax.grid(True, which="both", alpha=0.25)
    fig.suptitle("Compile resources against score (red: spills)", fontsize=10)
    return fig


def _scatter(ax, rows: list[tuple[CandidateData, float]], value, label: str) -> None:
    colours = ["#d62728" if c.resources.spill_bytes else "#1f77b4" for c, _ in rows]  # type: ignore[union-attr]
    ax.scatter([value(c) for c, _ in rows], [s for _, s in rows], c=colours, s=24)
    ax.set_xlabel(label)
