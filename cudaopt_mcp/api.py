"""What the MCP tools take and return: bounded argument types, and pydantic result models (so every
tool publishes an ``outputSchema``).

Every argument has a cap (string length, list and dict sizes, number ranges), so a huge argument from a
remote client is a validation error naming the argument, never a long stall. Every result model is
self-sufficient (some clients show the model only ``structuredContent``) and bounded: sources, full
logs, outputs and timing samples stay behind ``cudaopt://`` resource URIs.

The URI vocabulary lives here too: the templates the server registers and the functions that build
each URI, so server links, resource routes and clients cannot drift apart.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field

from cudaopt_mcp.api_arguments import (  # noqa: F401  (re-exported: the tools' argument types)
    MAX_ID_CHARS,
    MAX_INLINE_BYTES,
    MAX_INLINE_FILES,
    MAX_NOTE_CHARS,
    MAX_PATH_CHARS,
    CandidateId,
    CaseArg,
    CaseList,
    Defines,
    InlineFiles,
    InlineSpec,
    JobId,
    Kernel,
    Launch,
    Launches,
    Name,
    Note,
    Options,
    PageCursor,
    Reps,
    Roles,
    RunId,
    Scratch,
    Seed,
    Source,
    StoredCandidateId,
    TaskRef,
    Timeout,
    Tunables,
    Warmup,
)
from harness_tools.compile.nvrtc import CompileStatus
from harness_tools.inspect.ncu_summary import ProfileSummary
from harness_tools.inspect.profile import ProfileStatus
from harness_tools.inspect.sanitize import SanitizeStatus
from harness_tools.task.launches import LaunchStep, ScratchBuffer
from harness_tools.task.spec import (
    Expr,
    LaunchSpec,
)

CandidateStatus = Literal["compiled", "compile_error", "refused", "correct", "incorrect", "evaluating",
                          "interrupted", "new", "cancelled"]


class TaskListing(BaseModel):
    name: str
    kernel_name: str
    summary: str = Field(description="first sentence of the task description")
    validation_cases: int
    performance_cases: int
    tunables: list[str]


class ListTasksOutput(BaseModel):
    tasks: list[TaskListing]
    hint: str


class ParamInfo(BaseModel):
    name: str
    kind: Literal["buffer", "scalar"]
    dtype: str
    role: str | None = None
    shape: list[Expr] | None = None
    value: Expr | None = None
    initial: float | None = None


class CaseInfo(BaseModel):
    name: str
    role: Literal["validation", "performance"]
    sizes: dict[str, int]
    backends: list[str] | None = Field(None, description="backends the case runs on (absent: all)")


class ToleranceInfo(BaseModel):
    atol: Expr
    rtol: float


class TaskSummary(BaseModel):
    name: str
    description: str
    kernel_name: str
    signature: str = Field(description='the exact extern "C" __global__ signature a candidate must have')
    params: list[ParamInfo]
    cases: list[CaseInfo]
    tolerance: dict[str, ToleranceInfo] = Field(description="per dtype: pass when |out-ref| <= atol + rtol*|ref|")
    reference: str = Field(description="kind of oracle: numpy (float64), torch (float64), cuda (reference kernel) "
                                       "or stored")
    baseline_launch: LaunchSpec | None = Field(None, description="None where the baseline is a launch sequence")
    baseline_defines: dict[str, Expr]
    baseline_kernel: str | None = Field(None, description="the baseline's kernel where it is not kernel_name")
    baseline_launches: list[LaunchStep] | None = None
    baseline_scratch: list[ScratchBuffer] = Field(default_factory=list)
    size_defines: dict[str, Expr] = Field(default_factory=dict, description="#defines the task sets per case")
    constants: dict[str, str] = Field(default_factory=dict, description="input buffer -> the __constant__ symbol "
                                                                        "it fills (not a kernel argument)")
    tunables: dict[str, list[int]] | None = None
    tunable_constraints: list[str] = Field(default_factory=list)
    tunable_defaults: dict[str, int] | None = Field(None, description="the kernel's own values (#ifndef defaults), "
                                                    "used by the tuner as its first point; a tunable with none is left out")
    baseline_source_uri: str


class BudgetInfo(BaseModel):
    max_candidates: int | None = None
    used: int
    remaining: int | None = None


class BestInfo(BaseModel):
    candidate_id: str
    score_ms: float
    backend: str
    seed: int
    speedup_vs_baseline: float | None = None
    source_uri: str


class CandidateBrief(BaseModel):
    candidate_id: str
    status: CandidateStatus
    note: str | None = None
    score_ms: float | None = None
    registers: int | None = None
    failure: str | None = None


class RunInfo(BaseModel):
    run_id: str
    task: str
    task_origin: str
    backend: str = Field(description="backend the run was created on")
    server_backend: str = Field(description="backend this server evaluates on now")
    created: str
    budget: BudgetInfo
    best: BestInfo | None = None
    baseline_score_ms: float | None = None
    candidates: int
    recent: list[CandidateBrief] = Field(description="the last candidates, newest last")
    uri: str


class CreateRunOutput(BaseModel):
    run_id: str
    backend: str
    task: TaskSummary
    next_step: str


class GetRunOutput(BaseModel):
    run: RunInfo
    task: TaskSummary
    history_digest: list[str] = Field(description="the last events, one line each")


class ListRunsOutput(BaseModel):
    runs: list[RunInfo] = Field(description="one page of runs, oldest first")
    total: int = Field(0, description="runs in the store")
    next_cursor: str | None = Field(None, description="pass as cursor for the next page (absent: last page)")
    next_uri: str | None = Field(None, description="the next page as a resource")


class CompileOutput(BaseModel):
    run_id: str
    candidate_id: str
    ok: bool
    status: CompileStatus
    arch: str
    first_error: str | None = None
    log_excerpt: str = Field(description="start of the filtered compile log; the full log is at log_uri")
    log_truncated: bool
    registers: int | None = None
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None
    stack_bytes: int | None = None
    static_shared_bytes: int | None = None
    compile_ms: float
    cached: bool
    reused: bool = Field(description="an identical candidate already existed in this run; its id is returned")
    source_uri: str
    log_uri: str


def _json_number(value: Any) -> Any:
    """JSON has no NaN or infinity (pydantic would send null, which the schema's number refuses): name them."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


# A value a kernel produced or an error computed from it: a number, or "NaN" / "Infinity" / "-Infinity".
KernelValue = Annotated[float | Literal["NaN", "Infinity", "-Infinity"], BeforeValidator(_json_number)]


class MismatchInfo(BaseModel):
    buffer: str
    index: list[int]
    got: KernelValue
    expected: KernelValue


class CaseOutcome(BaseModel):
    name: str
    role: Literal["validation", "performance"]
    status: str = Field(description="passed, mismatch, run_error, corrupted or skipped")
    passed: bool
    message: str | None = None
    error: str | None = Field(None, description="CUDA error name / TIMEOUT / WORKER_DIED when the launch failed")
    max_abs_err: KernelValue | None = None
    max_rel_err: KernelValue | None = None
    mismatches: int | None = None
    elements: int | None = None
    first_mismatch: MismatchInfo | None = None
    median_ms: float | None = None
    min_ms: float | None = None
    iqr_ms: float | None = None
    cv: float | None = None
    median_ci_ms: list[float] | None = Field(None, description="95 % confidence interval of the median [low, high]")
    reps: int | None = None
    planned_reps: int | None = Field(None, description="the plan's timed launches, when fewer (reps) were timed")
    timing_stopped: str | None = Field(None, description="why fewer than the planned launches were timed: clearly "
                                       "slower than the run's best on this case, or a slow kernel timed for the "
                                       "search's budget (the time step times in full)")
    timing_cut: Literal["slower_than_best", "budget"] | None = Field(None, description="which of the two cut it")
    tflops: float | None = None
    gbps: float | None = None


class CompileBrief(BaseModel):
    ok: bool
    status: str
    registers: int | None = None
    spill_store_bytes: int | None = None
    static_shared_bytes: int | None = None
    first_error: str | None = None
    log_excerpt: str | None = Field(None, description="only when compilation failed")


class EvaluateOutput(BaseModel):
    run_id: str
    candidate_id: str
    step: Literal["evaluate", "run", "time"]
    correct: bool = Field(description="every case that ran passed")
    failure: str | None = None
    hints: list[str] | None = Field(None, description="where the evidence of a failure points (an unguarded edge, "
                                                      "a race, unwritten elements, a fault)")
    backend: str
    clock: str | None = Field(None, description="cuda-events, or cpu-wall-clock on the cpu backend")
    seed: int | None = None
    roles: list[str]
    compile: CompileBrief
    cases: list[CaseOutcome]
    score_ms: float | None = Field(None, description="geomean of performance medians; only when all passed")
    score_ci_ms: list[float] | None = Field(None, description="confidence interval of the score [low, high]: a "
                                                              "difference inside it is noise")
    baseline_score_ms: float | None = None
    speedup_vs_baseline: float | None = None
    best_before_ms: float | None = None
    speedup_vs_best: float | None = None
    new_best: bool = False
    best_score_ms: float | None = Field(None, description="the run's best score after this call: a crowned "
                                                          "candidate's head-to-head measurement, not this one")
    best_decision: str | None = Field(None, description="why this result did or did not become the run's best")
    agrees_with_best: bool | None = Field(None, description="on a re-measurement of the best: whether it agrees, within "
                                                            "the noise, with the best's recorded score")
    outputs_kept: list[str] = Field(default_factory=list, description="cases whose outputs are stored")
    record_uri: str | None = None
    source_uri: str
    elapsed_s: float


class HiddenVerdict(BaseModel):
    """A candidate on the task's hidden cases (correctness only). Names classes, never a size: the sizes stay
    in a private record, so a kernel cannot be tuned to them."""

    passed: bool = Field(description="every hidden case passed (a candidate that did not is never the best)")
    checked: int = Field(description="how many hidden cases ran")
    failed_classes: list[str] = Field(default_factory=list, description="classes of the hidden cases that did not "
                                                                        "pass, e.g. 'odd', 'tile+1', 'task-hidden'")
    message: str


class CompareOutput(BaseModel):
    run_id: str
    candidate_id: str
    source_record: str = Field(description="which stored record the statistics come from")
    seed: int
    correct: bool
    cases: list[CaseOutcome]
    record_uri: str


class ProfileOutput(BaseModel):
    run_id: str
    candidate_id: str
    available: bool
    backend: str
    status: ProfileStatus
    reason: str = Field(description="what happened, or why there is no profile and what to do")
    case: str | None = Field(None, description="the performance case whose launch was profiled")
    summary: ProfileSummary | None = None
    summary_text: str | None = Field(None, description="the summary as a few lines a model can act on")
    report_uri: str | None = Field(None, description="the full Nsight Compute report (.ncu-rep, binary)")
    details_uri: str | None = Field(None, description="every section and rule of the report, as CSV")
    elapsed_s: float = 0.0


class SanitizeOutput(BaseModel):
    run_id: str
    candidate_id: str
    backend: str
    status: SanitizeStatus
    message: str
    cases: list[str] = Field(description="the validation cases that were checked")
    findings: int
    text: str = Field(description="findings with their source lines, per tool")
    record_uri: str
    elapsed_s: float


class HistoryOutput(BaseModel):
    run_id: str
    total: int
    offset: int
    events: list[dict[str, Any]]
    next_offset: int | None = None
    next_cursor: str | None = Field(None, description="pass as cursor for the next page (absent: last page)")


class BestOutput(BaseModel):
    run_id: str
    best: BestInfo | None = None
    kernel: str | None = None
    launch: LaunchSpec | None = None
    launches: list[LaunchStep] | None = None
    scratch: list[ScratchBuffer] = Field(default_factory=list)
    defines: dict[str, Expr] | None = None
    correct_candidates: list[str] = Field(description="ids of the newest candidates whose latest record is correct")
    correct_total: int | None = Field(None, description="how many candidates are correct (more than listed: the "
                                                        "newest are listed)")
    note: str | None = None


# ---- resource URIs -----------------------------------------------------------------------------------
# The server registers these templates; every link and every client read is built from them.
RUNS_URI = "cudaopt://runs"
RUN_TEMPLATE = RUNS_URI + "/{run_id}"
HISTORY_TEMPLATE = RUN_TEMPLATE + "/history"
BEST_EXPORT_TEMPLATE = RUN_TEMPLATE + "/best/{name}"
TASK_FILE_TEMPLATE = RUN_TEMPLATE + "/task/{name}"
ARTIFACT_TEMPLATE = RUN_TEMPLATE + "/candidates/{candidate_id}/{artifact}"
OUTPUT_TEMPLATE = RUN_TEMPLATE + "/candidates/{candidate_id}/outputs/{case}/{buffer}"
REPORT_TEMPLATE = RUN_TEMPLATE + "/report"  # the run's report page (HTML), built on demand
REPORT_MARKDOWN_TEMPLATE = RUN_TEMPLATE + "/report.md"  # its compact markdown summary
BEST_EXPORTS = ("best_kernel.cu", "best_launch.json")


def run_uri(run_id: str) -> str:
    return RUN_TEMPLATE.format(run_id=run_id)


def history_uri(run_id: str) -> str:
    return HISTORY_TEMPLATE.format(run_id=run_id)


def best_export_uri(run_id: str, name: str) -> str:
    """``name``: one of :data:`BEST_EXPORTS`."""
    return BEST_EXPORT_TEMPLATE.format(run_id=run_id, name=name)


def task_file_uri(run_id: str, name: str) -> str:
    return TASK_FILE_TEMPLATE.format(run_id=run_id, name=name)


def artifact_uri(run_id: str, candidate_id: str, name: str) -> str:
    return ARTIFACT_TEMPLATE.format(run_id=run_id, candidate_id=candidate_id, artifact=name)


def output_uri(run_id: str, candidate_id: str, case: str, buffer: str) -> str:
    """A kept output of a candidate's latest run (``outputs_kept`` lists the cases)."""
    return OUTPUT_TEMPLATE.format(run_id=run_id, candidate_id=candidate_id, case=case, buffer=buffer)
