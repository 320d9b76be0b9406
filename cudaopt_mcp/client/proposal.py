"""What the optimisation loop and its proposers exchange (pydantic; no MCP and no execution here).

The loop owns the MCP session and evaluates; a proposer only looks at a :class:`ProposalContext` and
answers with a :class:`Proposal` (a candidate to evaluate) or a :class:`NoProposal` (why not). After
each evaluation the loop hands the proposer the :class:`Attempt` it produced.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from cudaopt_mcp.api import EvaluateOutput, Expr, LaunchSpec, LaunchStep, ScratchBuffer, TaskSummary


class Proposal(BaseModel):
    """One candidate. Omitted parts come from the task's baseline, as in the ``evaluate`` tool."""

    model_config = ConfigDict(extra="forbid")

    source: str | None = Field(None, description="complete CUDA C++ source")
    launch: LaunchSpec | None = None
    launches: list[LaunchStep] | None = Field(None, description="a launch sequence instead of one launch")
    scratch: list[ScratchBuffer] | None = Field(None, description="the sequence's scratch buffers")
    defines: dict[str, Expr] | None = None
    options: list[str] | None = None
    tunables: dict[str, int] | None = Field(None, description="a point of the task's own tunable kernel's space")
    note: str = Field("", max_length=500, description="one line: the idea behind this candidate")

    def tool_arguments(self) -> dict[str, Any]:
        """The candidate part of an ``evaluate`` call."""
        args = self.model_dump(mode="json", exclude_none=True, exclude={"note"})
        if self.note:
            args["note"] = self.note
        return args


class NoProposal(BaseModel):
    """The proposer has no candidate this time.

    ``unusable``: it tried (e.g. a model's reply could not be parsed); the iteration is spent and recorded.
    ``exhausted``: it has nothing new to offer (e.g. the tuner's space is used up); the loop stops.
    """

    kind: Literal["unusable", "exhausted"]
    reason: str


AttemptStatus = Literal["correct", "incorrect", "compile_error", "refused", "unusable_reply", "error"]


class Attempt(BaseModel):
    """One iteration's outcome, as the loop saw it (iteration 0 is the baseline)."""

    iteration: int
    proposal: Proposal | None = None
    candidate_id: str | None = None
    status: AttemptStatus
    correct: bool = False
    score_ms: float | None = None
    speedup_vs_baseline: float | None = None
    speedup_vs_best: float | None = None
    new_best: bool = False
    case_medians_ms: dict[str, float] = Field(default_factory=dict, description="per performance case, when timed")
    registers: int | None = None
    spill_bytes: int | None = None
    failure: str | None = Field(None, description="why it is not correct / not usable, with the evidence")
    elapsed_s: float = 0.0
    profile: str | None = Field(None, description="Nsight Compute summary, when this candidate was profiled")
    evaluation: EvaluateOutput | None = Field(None, description="the evaluate tool's structured result")

    @field_serializer("evaluation", when_used="unless-none")
    def _evaluation_as_sent(self, evaluation: EvaluateOutput) -> dict[str, Any]:
        # As the server sends it (no nulls), so the --json summary keeps the shape it had as a plain dict.
        return evaluation.model_dump(mode="json", exclude_none=True)


class ProposalContext(BaseModel):
    """Everything a proposer may look at; the loop builds a fresh one for every iteration."""

    run_id: str
    backend: str = Field(description="the run's backend; on 'cpu' scores are CPU wall clock")
    task: TaskSummary
    iteration: int = Field(description="1-based number of the proposal being asked for")
    max_iterations: int
    attempts: list[Attempt] = Field(description="every attempt of this run so far, oldest first (baseline first)")
    best: Attempt | None = None
    baseline: Attempt | None = None
    prompt: str = Field("", description="the server's 'optimize' prompt for this run, rendered now (reply form)")
    requests_dir: Path | None = Field(None, description="where a proposer that talks to a service stores each "
                                                        "request and response")


class ProposerSettings(BaseModel):
    """Options from the command line; each proposer reads the ones it understands."""

    model: str = "gpt-5-mini"
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = "medium"
    base_url: str | None = None
    request_timeout_s: float = 300.0
    max_retries: int = Field(4, description="retries of a request after 429/5xx/connection errors")
    retry_base_s: float = Field(1.0, description="first backoff; doubles per retry (a Retry-After header wins)")
    seed: int | None = None
