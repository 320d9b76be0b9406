"""How a kernel program is launched: one launch of one kernel, or a sequence of launches over the task's
buffers plus scratch buffers the program declares.

A task's baseline, its tunable kernel and every candidate are a :class:`KernelProgram`: either ``launch``
(the entry kernel, called with the task's signature) or ``launches``, a list of :class:`LaunchStep` each
naming its kernel, grid, block, dynamic shared memory and arguments: task params, scratch buffers or
computed scalars (:class:`ScalarValue`). The whole sequence is one unit: checked once after it, timed as
one. Kernel names may be C++ name expressions (``gemm<128, 64>``, ``ns::kernel``): NVRTC instantiates and
lowers them, so templated kernels need no ``extern "C"``.

Everything here comes from task files, models and remote clients, and is bounded (``MAX_LAUNCHES``,
``MAX_SCRATCH``); sizes of scratch buffers are checked per case against :func:`scratch_limit` before
anything is allocated.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from harness_tools.task.dtypes import DType, is_float
from harness_tools.task.spec_fields import Expr, ParamName, Strict

MAX_LAUNCHES = 16
MAX_SCRATCH = 16
MAX_LAUNCH_ARGS = 64
MAX_KERNEL_NAME_CHARS = 256
MIN_SCRATCH_LIMIT = 256 << 20  # a candidate's scratch may always take this much per case
SCRATCH_FACTOR = 2  # ... or twice the case's task buffers, whichever is more
RESERVED_KERNEL_PREFIX = "cudaopt_"

_SCOPED = r"(?:::)?[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*"
# template arguments: numbers, names (defines, types), arithmetic, nested <...>, casts; no braces, quotes or ;
_NAME_EXPRESSION = re.compile(rf"{_SCOPED}(?:\s*<[A-Za-z0-9_ ,+\-*/%()<>:.&|~!?^]*>)?", re.ASCII)


def base_name(expression: str) -> str:
    """The function's own name in a name expression: ``ns::gemm<1, 2>`` -> ``gemm``."""
    return expression.split("<", 1)[0].strip().rsplit("::", 1)[-1]


def is_plain_name(expression: str) -> bool:
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", expression, re.ASCII) is not None


def _check_expression(value: str) -> str:
    if len(value) > MAX_KERNEL_NAME_CHARS or not _NAME_EXPRESSION.fullmatch(value) or value.count("<") != value.count(">"):
        raise ValueError(f"kernel {value[:80]!r} must be a kernel name (an identifier) or a C++ name expression such as "
                         f"'gemm<128, 64>' or 'ns::kernel' (at most {MAX_KERNEL_NAME_CHARS} characters; template "
                         "arguments of numbers, names and arithmetic)")
    return value


def _check_kernel_name(value: str) -> str:
    if base_name(_check_expression(value)).startswith(RESERVED_KERNEL_PREFIX):
        raise ValueError(f"kernel names starting with {RESERVED_KERNEL_PREFIX!r} are the engine's own (its helper "
                         "kernels run in the same process, and Nsight Compute selects kernels by name)")
    return value


# A name anything outside the engine gives (task files, clients' launches): not one of the engine's own kernels.
KernelName = Annotated[str, AfterValidator(_check_kernel_name)]
# Any well-formed name: what a Candidate holds (the engine builds candidates of its own helper kernels too).
KernelExpression = Annotated[str, AfterValidator(_check_expression)]


class LaunchSpec(Strict):
    """Grid, block and dynamic shared memory as expressions over sizes, tunables and defines."""

    grid: list[Expr] = Field(min_length=1, max_length=3)
    block: list[Expr] = Field(min_length=1, max_length=3)
    shared_mem: Expr = 0


class ScalarValue(Strict):
    """A scalar argument computed for one launch, e.g. the number of partial sums the first pass wrote."""

    value: Expr = Field(description="expression over the case's sizes and numeric defines")
    dtype: DType

    @model_validator(mode="after")
    def _scalar_dtype(self) -> ScalarValue:
        if self.dtype in ("bfloat16", "float16") or self.dtype.startswith("float8"):
            raise ValueError(f"a computed scalar argument is int or float32/float64, not {self.dtype}")
        return self

    @property
    def floating(self) -> bool:
        return is_float(self.dtype)


ArgRef = ParamName | ScalarValue


class LaunchStep(LaunchSpec):
    """One launch of a sequence."""

    kernel: KernelName | None = Field(None, description="kernel (or name expression) to launch; default: the "
                                                        "program's kernel")
    args: list[ArgRef] | None = Field(None, max_length=MAX_LAUNCH_ARGS,
                                      description="arguments in order: task params and scratch buffers by name, or "
                                                  "{\"value\": expr, \"dtype\": \"int32\"}; default: the task's signature")


class ScratchBuffer(Strict):
    """Device memory the program uses between its launches: poisoned (or set to ``initial``) before the sequence,
    its surroundings checked after it like every buffer's, never compared."""

    name: ParamName
    dtype: DType
    count: Expr = Field(description="elements, as an expression over the case's sizes and numeric defines")
    initial: float | None = Field(None, description="value it starts at (else poisoned, like outputs)")


class KernelProgram(Strict):
    """``launch`` (one launch of ``kernel`` with the task's signature) or ``launches``, plus ``scratch``."""

    kernel: KernelName | None = Field(None, description="kernel name or name expression; default: the task's "
                                                        "kernel_name")
    launch: LaunchSpec | None = None
    launches: list[LaunchStep] | None = Field(None, min_length=1, max_length=MAX_LAUNCHES)
    scratch: list[ScratchBuffer] = Field(default_factory=list, max_length=MAX_SCRATCH)

    @model_validator(mode="after")
    def _one_way_to_launch(self) -> KernelProgram:
        if (self.launch is None) == (self.launches is None):
            raise ValueError("give either 'launch' (one launch of the kernel) or 'launches' (a sequence), "
                             + ("not both" if self.launch is not None else "one of them"))
        names = [b.name for b in self.scratch]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"scratch buffer names {twice} repeat")
        if self.launches is None and self.scratch:
            raise ValueError("scratch buffers are used by a launch sequence: give 'launches' that name them in 'args'")
        return self


def scratch_limit(task_buffer_bytes: int) -> int:
    """Bytes of scratch a program may allocate in a case whose task buffers take ``task_buffer_bytes``."""
    return max(MIN_SCRATCH_LIMIT, SCRATCH_FACTOR * task_buffer_bytes)
