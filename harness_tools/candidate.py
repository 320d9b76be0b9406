"""A candidate: kernel source + kernel name + launch configuration + ``#define``s + NVRTC options."""

from __future__ import annotations

import hashlib
import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .errors import CandidateError
from .expressions import Number, evaluate_int
from .include_guard import check_define_value
from .spec import Expr, KernelSource, LaunchSpec, Task

MAX_SOURCE_BYTES = 512 * 1024

# NVRTC options a candidate may add. Everything that names files or the architecture is ours to set.
_ALLOWED_OPTIONS = re.compile(
    r"^(--use_fast_math|-use_fast_math|--ftz=(true|false)|--prec-div=(true|false)|--prec-sqrt=(true|false)"
    r"|--fmad=(true|false)|--extra-device-vectorization|-lineinfo|--generate-line-info"
    r"|--maxrregcount=\d{1,3}|-maxrregcount=\d{1,3}|-std=c\+\+(14|17|20)|--std=c\+\+(14|17|20)"
    r"|--restrict|--dopt=(on|off)|-default-device|--split-compile=\d)$"
)


class Candidate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(description="CUDA C++ source holding an extern \"C\" __global__ kernel")
    kernel_name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    launch: LaunchSpec
    defines: dict[str, Expr] = Field(default_factory=dict)
    options: list[str] = Field(default_factory=list)

    @field_validator("source")
    @classmethod
    def _size(cls, value: str) -> str:
        if len(value.encode()) > MAX_SOURCE_BYTES:
            raise ValueError(f"source is larger than {MAX_SOURCE_BYTES} bytes")
        return value

    @field_validator("options")
    @classmethod
    def _options(cls, value: list[str]) -> list[str]:
        for option in value:
            if not _ALLOWED_OPTIONS.match(option):
                raise ValueError(
                    f"NVRTC option {option!r} is not accepted (architecture, include paths and pre-includes are "
                    "set by the engine; use 'defines' for macros)"
                )
        return value

    @field_validator("defines")
    @classmethod
    def _defines(cls, value: dict[str, Expr]) -> dict[str, Expr]:
        for name, v in value.items():
            problem = check_define_value(name, str(v))
            if problem:
                raise ValueError(problem)
        return value

    def digest(self) -> str:
        """Content hash: same source, defines, options and launch give the same id."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:16]

    def variables(self, sizes: dict[str, int]) -> dict[str, Number]:
        """Names visible to launch expressions: the case's sizes plus numeric defines."""
        names: dict[str, Number] = dict(sizes)
        for key, value in self.defines.items():
            if isinstance(value, (int, float)):
                names[key] = value
            elif isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
                names[key] = int(value)
        return names

    def launch_dims(self, sizes: dict[str, int]) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
        """(grid, block, dynamic shared bytes) for one case; bad values raise CandidateError."""
        names = self.variables(sizes)
        try:
            grid = _dims(self.launch.grid, names)
            block = _dims(self.launch.block, names)
            shared = evaluate_int(self.launch.shared_mem, names)
        except Exception as exc:  # ExpressionError or arithmetic: a malformed launch is the candidate's fault
            raise CandidateError(f"launch configuration: {exc}") from None
        if any(d <= 0 for d in grid + block) or shared < 0:
            raise CandidateError(f"launch configuration grid={grid} block={block} shared={shared} is not positive")
        return grid, block, shared


def _dims(exprs: list[Expr], names: dict[str, Number]) -> tuple[int, int, int]:
    values = [evaluate_int(e, names) for e in exprs] + [1] * (3 - len(exprs))
    return values[0], values[1], values[2]


def from_kernel_source(task: Task, kernel: KernelSource, source: str | None = None) -> Candidate:
    return Candidate(
        source=source if source is not None else task.read(kernel.source),
        kernel_name=task.spec.kernel_name,
        launch=kernel.launch,
        defines=dict(kernel.defines),
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
    return Candidate(
        source=task.read(tun.source), kernel_name=task.spec.kernel_name, launch=tun.launch, defines=dict(config)
    )
