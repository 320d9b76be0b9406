"""How a long service call reports its stages: ``progress(done, total, message)``, relayed to MCP clients."""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[float, float, str], None]


def no_progress(done: float, total: float, message: str) -> None:
    pass
