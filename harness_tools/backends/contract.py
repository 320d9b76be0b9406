"""The messages between the engine and an execution backend: one case, launched once, maybe timed.

These are plain pydantic models so they cross the process boundary to the worker as dicts.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from harness_tools.run.timing import TimingPlan, TimingStats

# What a backend writes before a launch: outputs filled with POISON_BYTE (NaN bytes for floats) unless the
# task gives an initial value, and a poisoned tail of TAIL_BYTES after every input buffer.
POISON_BYTE = 0xFF
TAIL_BYTES = 4096

RunStatus = Literal["ok", "launch_error", "crashed", "timeout", "invalid_launch"]


class ArgSpec(BaseModel):
    """One kernel argument, in signature order."""

    name: str
    kind: Literal["buffer", "scalar"]
    dtype: str
    shape: list[int] = Field(default_factory=list)
    role: Literal["in", "out", "inout"] | None = None
    initial: float | None = None
    input_file: str | None = Field(None, description=".npy holding the input data (in/inout buffers)")
    value: int | float | None = None


class CaseRequest(BaseModel):
    kernel_name: str
    cubin: bytes = Field(b"", description="for GPU backends: the NVRTC cubin")
    source: str = Field("", description="for source-level backends (cpu): the include-guarded source")
    defines: dict[str, str] = Field(default_factory=dict)
    options: list[str] = Field(default_factory=list, description="the candidate's extra NVRTC options")
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int = 0
    args: list[ArgSpec]
    output_dir: str
    timing: TimingPlan | None = None


class CaseRun(BaseModel):
    status: RunStatus
    error: str | None = Field(None, description="CUDA error name, e.g. CUDA_ERROR_ILLEGAL_ADDRESS")
    message: str | None = None
    outputs: dict[str, str] = Field(default_factory=dict, description="buffer name → .npy path")
    modified_inputs: list[str] = Field(default_factory=list)
    overruns: list[str] = Field(default_factory=list, description="buffers whose poisoned tail was overwritten")
    timing: TimingStats | None = None
    load_ms: float = 0.0
    setup_ms: float = Field(0.0, description="allocating the buffers and filling the inputs")
    run_ms: float = 0.0
    collect_ms: float = Field(0.0, description="downloading the outputs and checking tails and inputs")
    time_ms: float = 0.0
    worker_restarted: bool = False


class DeviceInfo(BaseModel):
    backend: str
    name: str
    arch: str
    sm_count: int | None = None
    l2_bytes: int | None = None
    memory_bytes: int | None = None
    memory_free_bytes: int | None = Field(None, description="free device memory when the worker started, after its own "
                                          "allocations (cuMemGetInfo); cases that need more are refused")
    max_shared_per_block_optin: int | None = None
    driver_version: str | None = None
    bindings_version: str | None = None
    timing_floor_ms: float | None = Field(
        None, description="median event time of an empty kernel, timed exactly as candidates are: the launch and event "
        "overhead inside every timing on this device (Nsight Compute's kernel duration excludes it)")


class Access(BaseModel):
    """One side of a data race, as the race check saw it."""

    line: int | None = Field(None, description="kernel.cu line of the innermost kernel frame (None: unknown)")
    kind: Literal["read", "write"]
    atomic: bool = False
    size: int = Field(0, description="bytes accessed")
    memory: Literal["shared", "global", "local", "unknown"] = "unknown"
    variable: str | None = Field(None, description="buffer argument, __shared__ or __device__ variable")
    offset: int | None = Field(None, description="byte offset of the access within `variable`")
    thread: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = Field(None, description="None where it cannot be known for sure")


class Race(BaseModel):
    """Two accesses from different CUDA threads, at least one a write, with no barrier or warp
    operation (or atomic) ordering them. ``first`` is the one with the lower line."""

    first: Access
    second: Access
    count: int = Field(1, description="race reports with this pair of lines on this memory")


class RaceReport(BaseModel):
    status: Literal["clean", "races", "error"]
    races: list[Race] = Field(default_factory=list)
    message: str | None = None
    log_excerpt: str | None = Field(None, description="the sanitizer's output, capped")
    build_ms: float = 0.0
    run_ms: float = 0.0
    cached: bool = False
