"""What a caller gives the service for one evaluation, typed once: the candidate (:class:`CandidateArgs`)
and how its cases are run and timed (:class:`TimingArgs`). The MCP tools build them from their flat
parameters; every service function takes them as they are.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from harness_tools.task.spec import Expr, LaunchSpec, LaunchStep, ScratchBuffer

Role = Literal["validation", "performance"]


class CandidateArgs(BaseModel):
    """A new candidate: each part left out comes from the task's baseline (or its tunable kernel)."""

    source: str | None = None
    kernel: str | None = None
    launch: LaunchSpec | None = None
    launches: list[LaunchStep] | None = None
    scratch: list[ScratchBuffer] | None = None
    defines: dict[str, Expr] | None = None
    options: list[str] | None = None
    tunables: dict[str, int] | None = None

    def given(self) -> list[str]:
        """The parts the caller gave, by name."""
        return sorted(name for name, value in self if value is not None)


class TimingArgs(BaseModel):
    """Which cases run, on which inputs, timed how, within what budget (None: the server's defaults)."""

    roles: list[Role] | None = None
    seed: int | None = None
    warmup: int | None = None
    reps: int | None = None
    timeout_s: float = Field(120.0, gt=0)
