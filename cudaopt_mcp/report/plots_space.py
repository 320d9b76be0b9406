"""Where in the tunable space the fast configurations are: importance bars and pair heatmaps.

A heatmap cell holds the best score among the tried configurations with those two values. Cells no valid
configuration reaches (the constraints exclude every completion) are hatched grey; cells that are valid but
were never tried are left white; cells tried only by failing candidates carry a red cross.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from cudaopt_mcp.report.axes_style import plain_log_labels
from cudaopt_mcp.report.importance import Importance, Scored
from cudaopt_mcp.report.run_reading import RunData

ANNOTATE_CELLS = 144  # write the score into cells up to a 12 x 12 grid


def importance_figure(ranking: Importance) -> Figure:
    fig = Figure(figsize=(6, 0.6 + 0.35 * len(ranking.names)), layout="constrained")
    ax = fig.add_subplot()
    names = list(reversed(ranking.names))
    ax.barh(names, [ranking.shares[n] for n in names], color="#1f77b4")
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the variance of log(score) its values explain (η²)")
    ax.set_title(f"Parameter importance ({ranking.scored} correct configurations)", fontsize=10)
    ax.grid(True, axis="x", alpha=0.25)
    return fig


def pair_heatmaps(data: RunData, tried: list[Scored], pairs: list[tuple[str, str]], unit: str) -> Figure | None:
    scores = [t.score_ms for t in tried if t.score_ms]
    if not pairs or not scores:
        return None
    norm = LogNorm(vmin=min(scores), vmax=max(max(scores), min(scores) * 1.0001))
    reachable = _reachable(data, pairs)
    fig = Figure(figsize=(5.2 * len(pairs), 4.6), layout="constrained")
    axes = fig.subplots(1, len(pairs), squeeze=False)[0]
    image = None
    for ax, (a, b) in zip(axes, pairs):
        image = _heatmap(ax, data, tried, a, b, norm, reachable.get((a, b)), unit)
    if image is not None:
        bar = fig.colorbar(image, ax=list(axes), shrink=0.85, label=f"best score in the cell ({unit})")
        plain_log_labels(bar.ax.yaxis)
    legend = "hatched: no valid configuration · white: valid, untried · ×: tried, never correct"
    if any(r is None for r in reachable.values()):
        legend += " · (the space is too large to list: untried and invalid are not told apart)"
    fig.suptitle(f"Best score per pair of the most important parameters\n{legend}", fontsize=9)
    return fig


def _heatmap(ax, data: RunData, tried: list[Scored], a: str, b: str, norm: LogNorm,
             reachable: set[tuple[int, int]] | None, unit: str):
    xs, ys = sorted(set(data.params[b])), sorted(set(data.params[a]))
    grid = np.full((len(ys), len(xs)), np.nan)
    failed = np.zeros_like(grid, dtype=bool)
    for t in tried:
        if a not in t.tunables or b not in t.tunables:
            continue
        i, j = ys.index(t.tunables[a]), xs.index(t.tunables[b])
        if t.score_ms:
            grid[i, j] = t.score_ms if math.isnan(grid[i, j]) else min(grid[i, j], t.score_ms)
        else:
            failed[i, j] = True
    image = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis_r", norm=norm, origin="lower", aspect="auto")
    annotate = grid.size <= ANNOTATE_CELLS
    for i, y in enumerate(ys):
        for j, x in enumerate(xs):
            if reachable is not None and (y, x) not in reachable:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="#dddddd", hatch="///", edgecolor="#999999",
                                       linewidth=0))
            elif not math.isnan(grid[i, j]) and annotate:
                ax.text(j, i, f"{grid[i, j]:.3g}", ha="center", va="center", fontsize=7,
                        color="white" if norm(grid[i, j]) > 0.5 else "black")
            elif failed[i, j] and math.isnan(grid[i, j]):
                ax.text(j, i, "×", ha="center", va="center", fontsize=11, color="#d62728")
    best = np.nanargmin(grid) if not np.all(np.isnan(grid)) else None
    if best is not None:
        i, j = np.unravel_index(best, grid.shape)
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="#d62728", linewidth=2))
    ax.set_xticks(range(len(xs)), [str(x) for x in xs], fontsize=8)
    ax.set_yticks(range(len(ys)), [str(y) for y in ys], fontsize=8)
    ax.set_xlabel(b)
    ax.set_ylabel(a)
    ax.set_title(f"{a} × {b} (red frame: fastest cell)", fontsize=9)
    return image


def _reachable(data: RunData, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], set[tuple[int, int]] | None]:
    """Per pair, the value pairs some valid configuration has; None when the space cannot be listed."""
    space = data.space()
    valid = space.valid() if space is not None else None
    if valid is None:
        return {pair: None for pair in pairs}
    index = {name: k for k, name in enumerate(space.names)}  # type: ignore[union-attr]
    return {(a, b): {(config[index[a]], config[index[b]]) for config in valid} for a, b in pairs}
