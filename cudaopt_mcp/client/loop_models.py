"""What the loop of ``cudaopt optimize`` is given (:class:`LoopConfig`) and what it returns (:class:`LoopSummary`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from cudaopt_mcp.client.proposal import Attempt

# While searching on a GPU, 3 + 30 launches rank configurations as well as 10 + 100 (cold-L2 medians vary by
# well under 1 % on the H200) at a third of the timing cost; the best is confirmed with the server's full plan.
GPU_SEARCH_TIMING = {"warmup": 3, "reps": 30}


def search_timing(warmup: int | None, reps: int | None, backend: str) -> dict[str, int]:
    """The timing arguments of the loop's search steps (the baseline's first evaluation is one) on ``backend``."""
    chosen = {k: v for k, v in (("warmup", warmup), ("reps", reps)) if v is not None}
    return {**GPU_SEARCH_TIMING, **chosen} if backend == "cuda" else chosen


class LoopConfig(BaseModel):
    task: str | None = Field(None, description="bundled task name or task folder (None when continuing a run)")
    run_id: str | None = None
    max_iterations: int = Field(7, ge=0)
    time_budget_s: float | None = Field(None, gt=0)
    seed: int | None = None
    results: Path = Path("results")
    confirm: bool = True
    warmup: int | None = Field(None, ge=0, description="warm-up launches per performance case while searching")
    reps: int | None = Field(None, ge=1, description="timed launches per performance case while searching "
                                                     "(the confirmation of the best uses the server's full plan)")
    compile_ahead: bool | None = Field(None, description="compile a ProposesAhead proposer's next candidate while the "
                                       "current one runs (None: on GPU backends; the cpu backend times on the "
                                       "host's CPU, which the compiler would share)")
    ahead: int | None = Field(None, ge=1, le=32, description="how many candidates are chosen and compiled ahead "
                              "(compiles run in parallel on the server's compiler pool); None: the host's cores, "
                              "at most 4")
    parallel: int = Field(1, ge=1, le=64, description="evaluations in flight at once (a ProposesAhead proposer's "
                          "next candidates, chosen ahead); the server runs each on a worker of its pool")
    profile_every: int | None = Field(None, ge=0, description="profile the best every N iterations when it changed "
                                                               "(None: after each improvement; 0: never; cuda only)")


class LoopSummary(BaseModel):
    run_id: str
    task: str
    backend: str
    clock: str | None = None
    proposer: str
    proposer_detail: str
    seed: int
    stopped: str
    baseline: Attempt | None = None
    best: Attempt | None = None
    confirmation: Attempt | None = Field(None, description="the best candidate re-evaluated on fresh inputs")
    attempts: list[Attempt]
    best_kernel: str | None = Field(None, description="path (a server here) or URI (--server) of the exported best kernel")
    found_correct: bool
    elapsed_s: float
    usage: dict[str, Any] | None = None
