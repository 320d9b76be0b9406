"""The bounded argument types of the MCP tools: every argument a remote client sends has a cap (string
length, list and dict sizes, number ranges), so a huge argument is a validation error naming it, never a
long stall. Re-exported by :mod:`cudaopt_mcp.api`, where the result models live.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from harness_tools.task.candidate import MAX_OPTIONS
from harness_tools.task.launches import MAX_LAUNCHES, MAX_SCRATCH, KernelName, LaunchStep, ScratchBuffer
from harness_tools.task.spec import (
    MAX_CASES,
    MAX_DEFINES,
    MAX_NAME_CHARS,
    MAX_SOURCE_BYTES,
    MAX_TUNABLES,
    Expr,
    LaunchSpec,
)

MAX_ID_CHARS = 32
MAX_PATH_CHARS = 4096
MAX_INLINE_FILES, MAX_INLINE_BYTES = 16, 512 * 1024
MAX_NOTE_CHARS = 500

Name = Annotated[str, Field(max_length=MAX_NAME_CHARS)]
RunId = Annotated[str, Field(max_length=MAX_ID_CHARS, description="run id returned by create_run, e.g. 'run-001'")]
CandidateId = Annotated[str, Field(max_length=MAX_ID_CHARS,
                                   description="candidate id returned by compile or evaluate, e.g. 'c0003'")]
StoredCandidateId = Annotated[str | None, Field(max_length=MAX_ID_CHARS, description="re-evaluate this stored "
                                                "candidate instead of passing a new one")]
JobId = Annotated[str, Field(max_length=MAX_ID_CHARS, description="job id returned by start_evaluation, e.g. 'job-0001'")]
Source = Annotated[str | None, Field(max_length=MAX_SOURCE_BYTES,
                                     description='complete CUDA C++ source with the task\'s extern "C" __global__ '
                                                 f"kernel (at most {MAX_SOURCE_BYTES // 1024} KiB); omit to use the "
                                                 "task's baseline kernel")]
Launch = Annotated[LaunchSpec | None, Field(description="grid/block/shared_mem as expressions over the case sizes and "
                                                        "numeric defines, e.g. {\"grid\": [\"ceil_div(n, 256)\"], "
                                                        "\"block\": [256]}; omit for the task's baseline launch")]
Kernel = Annotated[KernelName | None, Field(description="the kernel 'launch' launches, if not the task's kernel_name: a "
                                                       "name or a C++ name expression such as 'gemm<128, 64>' (then "
                                                       "no extern \"C\" is needed)")]
Launches = Annotated[list[LaunchStep] | None, Field(max_length=MAX_LAUNCHES, description=(
    "instead of launch: a sequence of launches timed as one unit, e.g. [{\"kernel\": \"partial\", \"grid\": "
    "[\"ceil_div(n, 256)\"], \"block\": [256], \"args\": [\"x\", \"sums\", \"n\"]}, {\"kernel\": \"final\", "
    "\"grid\": [1], \"block\": [256], \"args\": [\"sums\", \"out\", {\"value\": \"ceil_div(n, 256)\", "
    "\"dtype\": \"int32\"}]}]; args name task params or scratch buffers (default: the task's signature)"))]
Scratch = Annotated[list[ScratchBuffer] | None, Field(max_length=MAX_SCRATCH, description=(
    "device buffers the launches share, e.g. [{\"name\": \"sums\", \"dtype\": \"float32\", \"count\": "
    "\"ceil_div(n, 256)\"}]: poisoned (or `initial`), bounds-checked, at most twice the task's buffers (256 MiB "
    "at least)"))]
Defines = Annotated[dict[Name, Expr] | None, Field(max_length=MAX_DEFINES,
                                                   description="#defines added to the baseline's, e.g. {\"TILE\": 32}")]
Options = Annotated[list[Annotated[str, Field(max_length=64)]] | None,
                    Field(max_length=MAX_OPTIONS, description="extra NVRTC options, e.g. ['--use_fast_math', "
                                                              "'--maxrregcount=64'] (architecture and includes are set "
                                                              "by us)")]
Tunables = Annotated[dict[Name, Annotated[int, Field(ge=-(1 << 63), lt=1 << 63)]] | None,
                     Field(max_length=MAX_TUNABLES, description="instead of source: the task's own tunable kernel at "
                                                                "this point of its space, e.g. {\"TILE\": 32, \"ROWS\": 8}")]
Note = Annotated[str | None, Field(description="one line on the idea behind this candidate (kept in the history)",
                                   max_length=MAX_NOTE_CHARS)]
Roles = Annotated[list[Literal["validation", "performance"]] | None,
                  Field(max_length=2, description="which cases to run; default: validation+performance on a GPU, "
                                                  "validation only on the cpu backend")]
Seed = Annotated[int | None, Field(ge=0, lt=1 << 63, description="input seed (default: a fresh one, recorded in the "
                                                                 "result)")]
Warmup = Annotated[int | None, Field(ge=0, le=1000, description="warm-up launches per performance case (default 10; cpu 1)")]
Reps = Annotated[int | None, Field(ge=1, le=10000, description="timed launches per performance case (default 100; cpu 5)")]
Timeout = Annotated[float, Field(gt=0, le=600, description="seconds for the whole call: the compile and every case "
                                                          "(each case gets what is left; cases after it is spent are "
                                                          "skipped and say so); the default 30 lets a hang answer "
                                                          "within the ~60 s many clients allow")]
TaskRef = Annotated[str | None, Field(max_length=MAX_PATH_CHARS,
                                      description="bundled task name (see list_tasks) or a task folder path")]
InlineSpec = Annotated[dict[str, Any] | None, Field(max_length=32, description="inline task.json content (local stdio "
                                                                               "clients only)")]
InlineFiles = Annotated[dict[Annotated[str, Field(max_length=128)], Annotated[str, Field(max_length=MAX_INLINE_BYTES)]]
                        | None, Field(max_length=MAX_INLINE_FILES,
                                      description="files an inline spec names: {file name: text}")]
CaseArg = Annotated[str | None, Field(max_length=MAX_NAME_CHARS,
                                      description="performance case to profile (default: the first)")]
PageCursor = Annotated[str | None, Field(max_length=200, description="next_cursor of the previous page; omit for "
                                                                    "the first page")]
CaseList = Annotated[list[Name] | None, Field(max_length=MAX_CASES, description="validation cases (default: all)")]
