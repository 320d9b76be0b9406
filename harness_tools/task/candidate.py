"""A candidate: kernel source + kernel name + launch configuration + ``#define``s + NVRTC options.

Candidates come from models and remote clients: the source (``MAX_SOURCE_BYTES``), the number and
size of defines and options are bounded when the candidate is built, and every launch it asks for is
checked against CUDA's limits before anything is allocated (:meth:`Candidate.launch_dims`).
"""

from __future__ import annotations

import hashlib
import json
import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harness_tools.errors import CandidateError
from harness_tools.task.expressions import Number, evaluate_expression, evaluate_int
from harness_tools.task.include_guard import check_define_value
from harness_tools.task.launches import (
    MAX_LAUNCHES,
    MAX_SCRATCH,
    ArgRef,
    KernelExpression,
    KernelProgram,
    LaunchSpec,
    LaunchStep,
    ScratchBuffer,
)
from harness_tools.task.spec import MAX_DEFINES, MAX_NAME_CHARS, MAX_SOURCE_BYTES, Expr, KernelSource, Task
from harness_tools.task.spec_fields import MAX_OPTIONS, CompileOption

# CUDA's launch limits (every architecture since sm_20; the per-kernel and per-device ones the worker checks)
MAX_BLOCK = (1024, 1024, 64)
MAX_THREADS_PER_BLOCK = 1024
MAX_GRID = ((1 << 31) - 1, 65535, 65535)
DEFAULT_MAX_SHARED_BYTES = 227 * 1024  # dynamic shared memory a block may opt in to on sm_90 (H100/H200)


class Candidate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(description="CUDA C++ source holding an extern \"C\" __global__ kernel")
    kernel_name: KernelExpression = Field(description="the kernel launched by 'launch' and by steps naming no kernel: a name "
                                                "or a C++ name expression such as 'gemm<128, 64>'")
    launch: LaunchSpec | None = None
    launches: list[LaunchStep] | None = Field(None, min_length=1, max_length=MAX_LAUNCHES)
    scratch: list[ScratchBuffer] = Field(default_factory=list, max_length=MAX_SCRATCH)
    defines: dict[str, Expr] = Field(default_factory=dict)
    options: list[CompileOption] = Field(default_factory=list)

    @model_validator(mode="after")
    def _program(self) -> Candidate:
        KernelProgram(launch=self.launch, launches=self.launches, scratch=self.scratch)  # the same rules as a task's
        return self

    @field_validator("source", mode="before")
    @classmethod
    def _size(cls, value: object) -> object:
        # characters first: a 1 GB string is refused without encoding it
        if isinstance(value, str) and (len(value) > MAX_SOURCE_BYTES or len(value.encode()) > MAX_SOURCE_BYTES):
            size = f"{len(value)} characters" if len(value) > MAX_SOURCE_BYTES else f"{len(value.encode())} bytes"
            raise ValueError(f"source has {size}; at most {MAX_SOURCE_BYTES} ({MAX_SOURCE_BYTES // 1024} KiB) are "
                             "accepted: generate less code (a loop instead of unrolled copies, fewer variants)")
        return value

    @field_validator("options", mode="before")
    @classmethod
    def _options_count(cls, value: object) -> object:
        if isinstance(value, list) and len(value) > MAX_OPTIONS:
            raise ValueError(f"{len(value)} NVRTC options; at most {MAX_OPTIONS} are accepted")
        return value

    @field_validator("defines", mode="before")
    @classmethod
    def _defines_count(cls, value: object) -> object:
        if isinstance(value, dict) and len(value) > MAX_DEFINES:
            raise ValueError(f"{len(value)} defines; at most {MAX_DEFINES} are accepted")
        return value

    @field_validator("defines")
    @classmethod
    def _defines(cls, value: dict[str, Expr]) -> dict[str, Expr]:
        for name, v in value.items():
            if len(name) > MAX_NAME_CHARS:
                raise ValueError(f"define name {name[:40]!r}... has {len(name)} characters; at most {MAX_NAME_CHARS}")
            problem = check_define_value(name, str(v))
            if problem:
                raise ValueError(problem)
        return value

    def digest(self) -> str:
        """Content hash: same source, defines, options and launches give the same id (a one-launch candidate
        hashes as it did before launch sequences existed, so stored runs keep their ids)."""
        fields = self.model_dump(mode="json")
        for name in ("launches", "scratch"):
            if not fields[name]:
                del fields[name]
        if fields["launch"] is None:
            del fields["launch"]
        return hashlib.sha256(json.dumps(fields, separators=(",", ":")).encode()).hexdigest()[:16]

    def steps(self) -> list[tuple[str, LaunchSpec, list[ArgRef] | None]]:
        """(kernel name, launch, explicit arguments or None for the task's signature) of every launch, in order."""
        if self.launches is None:
            assert self.launch is not None  # the validator guarantees one of them
            return [(self.kernel_name, self.launch, None)]
        return [(s.kernel or self.kernel_name, s, s.args) for s in self.launches]

    def kernel_names(self) -> list[str]:
        """Every kernel the program launches, each once, in order of first launch."""
        return list(dict.fromkeys(name for name, _, _ in self.steps()))

    def variables(self, sizes: dict[str, int]) -> dict[str, Number]:
        """Names visible to launch expressions: the case's sizes plus numeric defines."""
        names: dict[str, Number] = dict(sizes)
        for key, value in self.defines.items():
            if isinstance(value, (int, float)):
                names[key] = value
            elif isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value.strip()):
                names[key] = int(value)
        return names

    def launch_dims(self, sizes: dict[str, int], max_shared_bytes: int | None = None,
                    ) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
        """(grid, block, dynamic shared bytes) for one case; bad values raise CandidateError.

        Every value is checked against CUDA's limits here, before anything is allocated: block x, y <= 1024,
        z <= 64 and at most 1024 threads; grid x < 2**31, y, z <= 65535; dynamic shared memory at most
        ``max_shared_bytes`` (the device's opt-in limit; default that of sm_90, 227 KiB)."""
        return self.launch_plan(sizes, max_shared_bytes)[0][1]

    def launch_plan(self, sizes: dict[str, int], max_shared_bytes: int | None = None,
                    ) -> list[tuple[str, tuple[tuple[int, int, int], tuple[int, int, int], int]]]:
        """(kernel name, (grid, block, dynamic shared bytes)) of every launch for one case; see launch_dims."""
        names = self.variables(sizes)
        plan = []
        for index, (kernel, launch, _) in enumerate(self.steps()):
            where = f"launches.{index} ({kernel}): " if self.launches is not None else ""
            try:
                grid = _dims(launch.grid, names)
                block = _dims(launch.block, names)
                shared = evaluate_int(launch.shared_mem, names)
            except Exception as exc:  # ExpressionError or arithmetic: a malformed launch is the candidate's fault
                raise CandidateError(f"{where}launch configuration: {exc}") from None
            if any(d <= 0 for d in grid + block) or shared < 0:
                raise CandidateError(f"{where}launch configuration grid={grid} block={block} shared={shared} is not "
                                     "positive")
            problem = launch_problem(grid, block, shared, max_shared_bytes)
            if problem:
                raise CandidateError(f"{where}launch configuration: {problem}")
            plan.append((kernel, (grid, block, shared)))
        return plan


def launch_problem(grid: tuple[int, int, int], block: tuple[int, int, int], shared: int,
                   max_shared_bytes: int | None = None) -> str | None:
    """What is outside CUDA's launch limits in this configuration (None: nothing)."""
    axes = "xyz"
    for i, (b, limit) in enumerate(zip(block, MAX_BLOCK)):
        if b > limit:
            return f"block {block}: {axes[i]} = {b} exceeds CUDA's limit of {limit}"
    threads = block[0] * block[1] * block[2]
    if threads > MAX_THREADS_PER_BLOCK:
        return (f"block {block} has {threads} threads; CUDA allows at most {MAX_THREADS_PER_BLOCK} threads per "
                "block: give each thread more work or use more blocks")
    for i, (g, limit) in enumerate(zip(grid, MAX_GRID)):
        if g > limit:
            return f"grid {grid}: {axes[i]} = {g} exceeds CUDA's limit of {limit}: loop over the excess in the kernel"
    limit = max_shared_bytes if max_shared_bytes is not None else DEFAULT_MAX_SHARED_BYTES
    if shared > limit:
        return f"{shared} bytes of dynamic shared memory exceed the {limit} bytes ({limit / 1024:g} KiB) a block may use"
    return None


def _dims(exprs: list[Expr], names: dict[str, Number]) -> tuple[int, int, int]:
    values = [evaluate_int(e, names) for e in exprs] + [1] * (3 - len(exprs))
    return values[0], values[1], values[2]


def _program_fields(task: Task, program: KernelProgram) -> dict:
    return {"kernel_name": program.kernel or task.spec.kernel_name, "launch": program.launch,
            "launches": program.launches, "scratch": list(program.scratch)}


def from_kernel_source(task: Task, kernel: KernelSource, source: str | None = None) -> Candidate:
    return Candidate(
        source=source if source is not None else task.read(kernel.source),
        defines=dict(kernel.defines),
        options=list(kernel.options),
        **_program_fields(task, kernel),
    )


def baseline(task: Task) -> Candidate:
    """The task's baseline kernel with its default launch configuration."""
    return from_kernel_source(task, task.spec.baseline)


def tuned(task: Task, config: dict[str, int]) -> Candidate:
    """The task's tunable kernel with one configuration of its tunables as ``#define``s."""
    tun = task.spec.tunables
    if tun is None:
        raise CandidateError(f"task {task.name!r} has no tunables")
    unknown = set(config) - set(tun.params)
    if unknown:
        raise CandidateError(f"unknown tunables {sorted(unknown)}; known: {sorted(tun.params)}")
    missing = set(tun.params) - set(config)
    if missing:  # launch expressions and constraints may use any of them: a partial point is not a point of the space
        raise CandidateError(f"missing tunables {sorted(missing)}: give every one of {sorted(tun.params)} "
                             f"(values: {', '.join(f'{k} {v}' for k, v in tun.params.items())})")
    return Candidate(source=task.read(tun.source), defines=dict(config), options=list(tun.options),
                     **_program_fields(task, tun))


def for_case(candidate: Candidate, task: Task, sizes: dict[str, int]) -> Candidate:
    """``candidate`` with the task's per-case ``size_defines`` for these sizes added to its defines (compiled
    once per distinct set of values); a candidate that sets one of them itself raises CandidateError."""
    size_defines = task.spec.size_defines
    if not size_defines:
        return candidate
    clash = sorted(set(size_defines) & set(candidate.defines))
    if clash:
        raise CandidateError(f"defines {clash} are set per case by the task (size_defines: "
                             f"{', '.join(f'{k} = {size_defines[k]}' for k in clash)}); remove them from the candidate")
    values = {name: evaluate_expression(expr, sizes) for name, expr in size_defines.items()}
    return candidate.model_copy(update={"defines": {**candidate.defines, **values}})
