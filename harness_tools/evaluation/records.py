"""What an evaluation is asked for and what it returns: its configuration, each case's result, the overhead per
stage and the evaluation's result (stored by the service as evaluation.json)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from harness_tools.backends.contract import CaseRun, RaceReport
from harness_tools.backends.environment import Environment
from harness_tools.check.compare import OutputComparison
from harness_tools.check.device_compare import DEVICE_COMPARE_MIN_BYTES
from harness_tools.compile import CompileResult
from harness_tools.run.statistics import Interval
from harness_tools.run.timing import TimingPlan, TimingStats

CaseStatus = Literal["passed", "mismatch", "run_error", "corrupted", "race", "skipped"]


class EvaluationConfig(BaseModel):
    seed: int | None = Field(None, ge=0, lt=1 << 64, description="input seed; None draws a fresh one (it is recorded)")
    timing: TimingPlan | None = Field(TimingPlan(), description="None: launch and check, never time")
    stop_timing_above_ms: dict[str, float] = Field(
        default_factory=dict, description="per performance case: stop timing it early once its median is clearly "
        "above this many ms (the plan's stop_above_ms), e.g. the run's best there plus a margin")
    roles: list[Literal["validation", "performance"]] = Field(["validation", "performance"], max_length=2)
    timeout_s: float = Field(120.0, gt=0, description="budget of the whole evaluation: the compile plus every case "
                                                      "(each gets what is left); cases after it is spent are skipped")
    outputs_dir: str | None = Field(None, description="keep kernel outputs here (else a scratch dir is removed)")
    race_check: bool = Field(False, description="run each passing validation case once more under the backend's "
                                                "race check; a data race fails the case (cpu backend only for now)")
    verify: Literal["auto", "device", "host"] = Field(
        "auto", description="where outputs are compared with the oracle: 'auto' on the device (cuda) from "
        "device_compare_min_bytes on, 'device' every output it can, 'host' all on the host")
    device_compare_min_bytes: int = Field(DEVICE_COMPARE_MIN_BYTES, ge=0, description="(verify 'auto') smaller outputs are "
                                          "downloaded, compared on the host and kept; on the device only failures are")


class CaseResult(BaseModel):
    name: str
    role: Literal["validation", "performance"]
    sizes: dict[str, int]
    status: CaseStatus
    passed: bool
    message: str | None = None
    run: CaseRun | None = None
    outputs: list[OutputComparison] = Field(default_factory=list)
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    timing: TimingStats | None = None
    median_ms: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    races: RaceReport | None = Field(None, description="the race check's report, when one ran")
    rerun_differs: dict[str, int] | None = Field(
        None, description="a mismatch run again on the same inputs: per output, the elements whose bytes differed "
        "between the two runs (any: the result depends on thread timing, a race)")


class Overhead(BaseModel):
    """Wall time per stage of this evaluation, in milliseconds."""

    compile_ms: float = 0.0
    inputs_ms: float = 0.0
    reference_ms: float = 0.0
    load_ms: float = 0.0
    transfer_ms: float = Field(0.0, description="the worker's buffer set-up and output download and checks")
    validate_ms: float = 0.0
    time_ms: float = 0.0
    compare_ms: float = 0.0
    race_ms: float = 0.0
    total_ms: float = 0.0


class EvaluationResult(BaseModel):
    task: str
    backend: str
    seed: int
    input_scheme: int = Field(1, description="how the inputs follow from the seed (check.inputs.SCHEME): the same "
                              "seed and scheme draw the same inputs; a record from before this field reads 1")
    candidate: str = Field(description="content hash of the candidate")
    compile: CompileResult
    correct: bool
    cases: list[CaseResult] = Field(default_factory=list)
    score_ms: float | None = None
    score_ci: Interval | None = Field(None, description="confidence interval of the score (run.statistics)")
    failure: str | None = Field(None, description="the first thing that went wrong, in one line")
    hints: list[str] = Field(default_factory=list, description="where the evidence points (check.failure_hints)")
    environment: Environment
    overhead: Overhead
    retried: str | None = Field(None, description="why this evaluation is a second one, on another worker of the "
                                "pool: the first worker died or was lost mid-evaluation (what it measured is dropped)")

