"""The messages between the engine and an execution backend: one case, launched once, maybe timed.

These are plain pydantic models so they cross the process boundary to the worker as dicts.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from harness_tools.run.timing import TimingPlan, TimingStats

# ---- what a backend writes around and into every buffer before a launch (docs/oracle.md) ----------------
# Three patterns that no copy can carry from one to another:
# * outputs without a declared `initial` are prefilled with POISON_BYTE (NaN for every float width, -1/max
#   for integers): an element the kernel leaves unwritten reads as NaN and fails the comparison;
# * the bytes around an input (front pad, slack, tail) hold INPUT_TAIL_WORDS[dtype], a signalling NaN for
#   floats (arithmetic on it gives NaN; on the cpu it is quietened, so even `x[n] *= 1` changes its bits)
#   and 0xA5.. for integers (a large magnitude: used as an index it lands far away and faults);
# * the bytes around an output or inout buffer hold WRITABLE_TAIL_WORD, an ordinary finite value.
# The input words are made of the bytes 7D, BD, F7, 7F, A5 and the writable word of 5A only, so bytes copied
# (at any width or offset) from an input's surroundings or from a prefilled output into a writable tail
# always change it, and so does a NaN any arithmetic produces. Each word is 32 bits whose period divides
# its dtype's size, tiled from the start of each region (regions start on element boundaries).
POISON_BYTE = 0xFF
INPUT_TAIL_WORDS = {"bfloat16": 0x7FBD7FBD, "float16": 0x7D7D7D7D, "float32": 0x7FBD7D7D, "float64": 0x7FF77D7D,
                    "float8_e4m3": 0x7F7F7F7F, "float8_e5m2": 0x7D7D7D7D}  # fp8: docs/dtypes.md
INTEGER_INPUT_TAIL_WORD = 0xA5A5A5A5
WRITABLE_TAIL_WORD = 0x5A5A5A5A
TAIL_BYTES = 4096

# Where a buffer sits in memory (CaseRequest.placement):
# * "tail": as cudaMalloc places it, 256-byte aligned, followed by at least TAIL_BYTES of tail pattern
#   (cuda: cuMemAlloc(n + TAIL_BYTES); cpu: slack < 256 bytes, then a guard page). Writes past the end show
#   as a changed tail; reads past the end see the pattern. Timed cases use it: their buffers keep the
#   alignment production code gets, so timings are not skewed by placement.
# * "guard": the data ends GUARD_ALIGN-aligned at most GUARD_ALIGN - 1 bytes before an inaccessible page
#   (cuda: the next granule of the reserved address range is unmapped; cpu: a PROT_NONE page), so a read or
#   write just past the end faults. The start stays GUARD_ALIGN-aligned because float4/int4/double2 loads
#   need 16-byte alignment; the (< 16 byte) slack between the end and the page holds the tail pattern and
#   is checked like a tail. Validation cases use it.
Placement = Literal["tail", "guard"]
TAIL_ALIGN = 256
# An output compared on the device that fails is downloaded too when it is at most this big: the failure's evidence
# (kept in the run folder, read again by the same-inputs re-run), as the host comparison would have had it.
EVIDENCE_BYTES = 64 << 20
GUARD_ALIGN = 16


def tail_word(dtype: str, role: str | None) -> int:
    """The 32-bit pattern around a buffer of ``dtype`` with ``role`` (see above)."""
    if role != "in":
        return WRITABLE_TAIL_WORD
    return INPUT_TAIL_WORDS.get(dtype, INTEGER_INPUT_TAIL_WORD)


def tail_pattern(word: int, nbytes: int) -> np.ndarray:
    """``nbytes`` bytes of ``word`` (little-endian) tiled from the start, as every backend fills a region."""
    return np.full(-(-nbytes // 4), word, dtype="<u4").view(np.uint8)[:nbytes]


def placement_alignment(placement: Placement) -> int:
    return GUARD_ALIGN if placement == "guard" else TAIL_ALIGN


RunStatus = Literal["ok", "launch_error", "crashed", "timeout", "invalid_launch"]


class BinGrid(BaseModel):
    """An output seen as a ``view_rows`` × ``view_cols`` matrix (its last dimension as columns, all others as rows),
    cut into ``rows`` × ``cols`` bins: element (r, c) falls in bin (r·rows // view_rows, c·cols // view_cols).
    The rule choosing it is :func:`harness_tools.check.mismatch_map.bin_grid`; host and device bin alike."""

    view_rows: int = Field(ge=0)
    view_cols: int = Field(ge=0)
    rows: int = Field(ge=1)
    cols: int = Field(ge=1)


class DeviceCheck(BaseModel):
    """Compare this output where it lies, with the reference the device holds (backends that can: the cuda one;
    its worker keeps the reference masked, harness_tools.backends.cuda.device_verifier).

    The reference is the float64 oracle in its device form (:mod:`harness_tools.check.device_reference`): ``hi``
    (float32, or float64 for float64 and wide-integer outputs) plus, for float32 outputs, the rest ``ref - hi``
    as bfloat16 in ``lo``. That form is within ``rel_bound·|ref| + abs_bound`` of the float64 value; an element
    whose verdict that could change is counted as undecided, and when the undecided ones could change the
    output's verdict the output is downloaded and compared on the host after all."""

    key: str = Field(description="names the reference (task, spec, oracle, case, seed): kept copies are reused by it")
    hi_file: str = Field(description=".npy of the reference's leading part")
    lo_file: str | None = Field(None, description=".npy of the rest, bfloat16 bits as uint16 (float32 outputs)")
    atol: float
    rtol: float
    max_mismatches: int = 0
    rel_bound: float = Field(0.0, ge=0, description="how far the device form may be from the float64 reference, "
                                                    "relative to it")
    abs_bound: float = Field(0.0, ge=0, description="... and in absolute terms (subnormal rests)")
    bins: BinGrid | None = Field(None, description="how to bin the output's mismatches when it fails (None: no map)")


class DeviceComparison(BaseModel):
    """What the device's comparison of one output found (only these numbers cross to the host)."""

    elements: int
    mismatches: int = Field(description="elements outside tolerance, judged against the device form")
    certain: int = Field(description="mismatches that stay mismatches whatever the reference's last bits are")
    possible: int = Field(description="mismatches plus the passing elements that the last bits could fail")
    nonfinite: int = Field(description="NaN or Inf where the reference is finite")
    nans: int
    infs: int
    max_abs_err: float
    max_rel_err: float
    first_index: int | None = None
    first_got: float | None = None
    first_expected: float | None = None
    decided: bool = Field(description="the verdict holds whatever the reference's last bits are; when False the "
                                      "output was downloaded so the host decides")
    bin_mismatches: list[list[int]] | None = Field(
        None, description="mismatches per bin of DeviceCheck.bins (rows × cols); only for a decided failure")
    bin_nonfinite: list[list[int]] | None = Field(
        None, description="NaN or Inf where the reference is finite, per bin; with bin_mismatches")
    compare_ms: float = 0.0

    def fails(self, check: DeviceCheck) -> bool:
        """Whether the output fails ``check`` by this count: beyond its mismatch budget, or NaN/Inf where the
        reference is finite (the host's verdict when decided)."""
        return self.nonfinite > 0 or self.mismatches > check.max_mismatches


class ArgSpec(BaseModel):
    """One buffer or scalar of a case: a task param, a scratch buffer, or a scalar computed for one launch."""

    name: str
    kind: Literal["buffer", "scalar"]
    dtype: str
    shape: list[int] = Field(default_factory=list)
    role: Literal["in", "out", "inout", "scratch"] | None = Field(
        None, description="scratch: the program's own buffer (poisoned or `initial`, checked around, never compared)")
    initial: float | None = None
    input_file: str | None = Field(None, description=".npy holding the input data (in/inout buffers)")
    value: int | float | None = None
    constant: str | None = Field(None, description="the __constant__ symbol this input fills (then no launch passes it)")
    check: DeviceCheck | None = Field(None, description="outputs: compare on the device instead of downloading (a "
                                      "failure of at most EVIDENCE_BYTES is downloaded as well)")


class KernelLaunch(BaseModel):
    """One launch of a sequence: which kernel, its configuration, and its arguments as indices into ``args``."""

    kernel_name: str = Field(description="as written: a name or C++ name expression (source-level backends call it)")
    symbol: str = Field(description="the entry point in the cubin (the lowered name of a name expression)")
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int = 0
    args: list[int] = Field(description="indices into CaseRequest.args, in the kernel's parameter order")


class CaseRequest(BaseModel):
    cubin: bytes = Field(b"", description="for GPU backends: the NVRTC cubin")
    source: str = Field("", description="for source-level backends (cpu): the include-guarded source")
    defines: dict[str, str] = Field(default_factory=dict)
    options: list[str] = Field(default_factory=list, description="the candidate's extra NVRTC options")
    launches: list[KernelLaunch] = Field(min_length=1, description="launched in order on one stream; checked after "
                                                                   "the last, timed as one unit")
    args: list[ArgSpec]
    output_dir: str
    timing: TimingPlan | None = None
    placement: Placement = Field("tail", description="where buffers sit: 'guard' ends each at an inaccessible page "
                                 "(validation), 'tail' keeps cudaMalloc's alignment with a checked tail (timing)")
    owner: str = Field("", description="whose code this is: the candidate before per-case defines and the task's "
                       "cases (check.case_request.request_owner; a cpu worker runs one owner's kernels only); empty: "
                       "this request's kernel alone")


class CaseRun(BaseModel):
    status: RunStatus
    error: str | None = Field(None, description="CUDA error name, e.g. CUDA_ERROR_ILLEGAL_ADDRESS")
    message: str | None = None
    outputs: dict[str, str] = Field(default_factory=dict, description="buffer name → .npy path")
    comparisons: dict[str, DeviceComparison] = Field(default_factory=dict,
                                                     description="buffer name → the device's comparison (DeviceCheck)")
    modified_inputs: list[str] = Field(default_factory=list)
    overruns: list[str] = Field(default_factory=list, description="buffers whose surroundings (front pad, slack, "
                                "tail) changed: a write "
                                     "outside the buffer")
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
    uuid: str | None = Field(None, description="the GPU's UUID as nvidia-smi prints it (GPU-...); None on the cpu backend")
    pinned_to: str | None = Field(None, description="the host GPU the worker was pinned to (its CUDA_VISIBLE_DEVICES "
                                  "entry); None: it saw what the server saw")
    pool_slot: int | None = Field(None, description="which worker of the server's pool measured (0-based); None: no pool")
    timing_floor_ms: float | None = Field(
        None, description="median event time of an empty kernel, timed exactly as candidates are: the launch and event "
        "overhead inside every timing on this device (Nsight Compute's kernel duration excludes it)")
    peak_copy_gbps: float | None = Field(
        None, description="measured, not the datasheet's: device-memory copy bandwidth in GB/s (1e9 bytes/s, bytes "
        "read plus bytes written) of a float4 grid-stride copy between two 256 MiB buffers, median of 5 launches")
    peak_fp32_tflops: float | None = Field(
        None, description="measured, not the datasheet's: FP32 fused multiply-add throughput in TFLOP/s (an FMA "
        "counts as 2 FLOPs) of independent FMA chains in registers filling the device, median of 5 launches")


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
