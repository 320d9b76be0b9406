"""Where in an output a wrong candidate is wrong: the binned mismatch maps its comparison stored.

An output is viewed as rows × columns (rows: all but the last dimension, columns: the last one) and
binned to a small grid; a cell's colour is the share of its elements outside tolerance, so a missing tile
edge shows as a stripe and an off-by-one as a diagonal or a band.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from cudaopt_mcp.report.run_reading import RunData
from harness_tools.check.mismatch_map import MismatchMap

MAX_PANELS = 6


def mismatch_panels(data: RunData) -> tuple[list[tuple[str, dict]], list[str]]:
    """(title, map) of the latest failing outputs that carry a map, and a line for each that does not."""
    panels: list[tuple[str, dict]] = []
    without: list[str] = []
    for candidate_id in sorted(data.candidates, reverse=True):
        for case, output in data.candidates[candidate_id].failed_outputs():
            name = f"{candidate_id} · {case} · {output.get('buffer', '?')}"
            grid = output.get("mismatch_map")
            if grid and grid.get("mismatches"):
                if len(panels) < MAX_PANELS:
                    panels.append((name, output))
            elif len(without) < MAX_PANELS:
                where = "compared on the device" if output.get("compared_on") == "device" else "compared on the host"
                without.append(f"{name}: {output.get('mismatches', '?')} of {output.get('elements', '?')} elements wrong, "
                               f"no map stored ({where}, recorded before maps existed or without one)")
    return panels, without


def mismatch_figure(panels: list[tuple[str, dict]]) -> Figure | None:
    if not panels:
        return None
    columns = min(3, len(panels))
    rows = (len(panels) + columns - 1) // columns
    fig = Figure(figsize=(4.4 * columns, 3.8 * rows), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    image = None
    for ax, (title, output) in zip(axes, panels):
        grid = MismatchMap.model_validate(output["mismatch_map"])  # its rows are stored as lines of counts
        wrong = np.asarray(grid.mismatches, dtype=float)
        nonfinite = np.asarray(grid.nonfinite, dtype=float)
        elements = np.maximum(np.asarray(grid.elements, dtype=float), 1)
        # a NaN or Inf where the reference is finite is also outside tolerance: it is in `mismatches` too
        image = ax.imshow(np.minimum(wrong / elements, 1.0), cmap="Reds", vmin=0, vmax=1, origin="upper", aspect="auto",
                          interpolation="nearest")
        view = grid.view_shape
        ax.set_xlabel(f"columns (last dimension, {view[1]}), {wrong.shape[1]} bins")
        ax.set_ylabel(f"rows ({view[0]}), {wrong.shape[0]} bins")
        first = output.get("first_mismatch") or {}
        detail = f"{int(wrong.sum())} wrong of {output.get('elements', '?')}"
        if nonfinite.sum():
            detail += f", {int(nonfinite.sum())} NaN/Inf"
        if first.get("index") is not None:
            detail += f"; first at {first.get('index')}"
        ax.set_title(f"{title}\n{detail}", fontsize=8)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    if image is not None:
        fig.colorbar(image, ax=list(axes[:len(panels)]), shrink=0.8, label="share of the cell's elements wrong")
    fig.suptitle("Where the wrong elements are (latest failing outputs)", fontsize=10)
    return fig
