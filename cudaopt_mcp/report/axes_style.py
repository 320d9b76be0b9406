"""How the report's plots label log-scale axes: plain numbers (3, 4, 6, 10), not 6×10⁰."""

from __future__ import annotations

from matplotlib.ticker import FuncFormatter

PLAIN = FuncFormatter(lambda value, _: f"{value:g}")
# minor ticks: only 2, 3 and 5 times a power of ten, so a span of several decades stays legible
SOME = FuncFormatter(lambda value, _: f"{value:g}" if f"{value:e}"[0] in "235" else "")


def plain_log_labels(axis) -> None:
    """Label major and minor ticks of a log axis with plain numbers."""
    axis.set_major_formatter(PLAIN)
    axis.set_minor_formatter(SOME)
