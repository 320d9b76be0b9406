"""Task specs: what a kernel computes, on which cases, against which reference, and how to launch it.

A task is a folder holding ``task.json`` plus the files it names (baseline kernel, ``reference.py``,
tunable kernel, stored outputs). :func:`load_task` validates everything up front and raises
:class:`~harness_tools.errors.TaskSpecError` naming the file, the field and what is wrong.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from . import expressions
from .errors import ExpressionError, TaskSpecError

DType = Literal[
    "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"
]
Expr = int | float | str
CTYPES: dict[str, str] = {
    "float16": "__half", "float32": "float", "float64": "double", "int8": "signed char", "int16": "short",
    "int32": "int", "int64": "long long", "uint8": "unsigned char", "uint16": "unsigned short",
    "uint32": "unsigned int", "uint64": "unsigned long long",
}


def numpy_dtype(dtype: str) -> np.dtype:
    return np.dtype(dtype)


def is_float(dtype: str) -> bool:
    return dtype.startswith("float")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class InputDistribution(Strict):
    """How fresh inputs are drawn. Never zeros: partial computation must be visible."""

    dist: Literal["uniform", "normal", "randint"] = "uniform"
    low: float = -1.0
    high: float = 1.0
    mean: float = 0.0
    std: float = 1.0


class BufferParam(Strict):
    kind: Literal["buffer"] = "buffer"
    name: str
    dtype: DType
    shape: list[Expr] = Field(min_length=1)
    role: Literal["in", "out", "inout"]
    initial: float | None = Field(None, description="value outputs start at (else they are poisoned)")
    init: InputDistribution | None = Field(None, description="distribution of inputs (in/inout)")


class ScalarParam(Strict):
    kind: Literal["scalar"] = "scalar"
    name: str
    dtype: DType
    value: Expr


Param = Annotated[BufferParam | ScalarParam, Field(discriminator="kind")]


class Case(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    role: Literal["validation", "performance"]
    sizes: dict[str, int]
    backends: list[Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")]] | None = Field(
        None, min_length=1, description="the backends this case runs on (default: all); e.g. GPU-sized performance "
                                        "cases ['cuda'] and a CPU-sized one ['cpu']")

    def runs_on(self, backend: str) -> bool:
        return self.backends is None or backend in self.backends


class LaunchSpec(Strict):
    """Grid, block and dynamic shared memory as expressions over sizes, tunables and defines."""

    grid: list[Expr] = Field(min_length=1, max_length=3)
    block: list[Expr] = Field(min_length=1, max_length=3)
    shared_mem: Expr = 0


class KernelSource(Strict):
    source: str = Field(description="file name inside the task folder")
    launch: LaunchSpec
    defines: dict[str, Expr] = Field(default_factory=dict)


class NumpyReference(Strict):
    kind: Literal["numpy"] = "numpy"
    file: str = "reference.py"
    function: str = "reference"


class KernelReference(Strict):
    kind: Literal["cuda"] = "cuda"
    source: str
    kernel: str
    launch: LaunchSpec
    defines: dict[str, Expr] = Field(default_factory=dict)


class StoredReference(Strict):
    """Fixed inputs and expected outputs: ``<dir>/<case>/<buffer>.npy`` for every buffer."""

    kind: Literal["stored"] = "stored"
    dir: str = "expected"


Reference = Annotated[NumpyReference | KernelReference | StoredReference, Field(discriminator="kind")]


class Tolerance(Strict):
    """An element passes when ``|out - ref| <= atol + rtol * |ref|``; atol may use size symbols."""

    atol: Expr = 0.0
    rtol: float = 0.0


class Tunables(Strict):
    """A parameterised kernel and its search space (``#define``s the tuner sets)."""

    source: str
    params: dict[str, list[int]] = Field(min_length=1)
    constraints: list[str] = Field(default_factory=list)
    launch: LaunchSpec


class Metrics(Strict):
    flops: Expr | None = None
    bytes: Expr | None = None


RESERVED_KERNEL_PREFIX = "cudaopt_"


class TaskSpec(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str
    kernel_name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    params: list[Param] = Field(min_length=1)
    sizes: list[str] = Field(min_length=1)
    cases: list[Case] = Field(min_length=1)
    reference: Reference
    tolerance: dict[str, Tolerance] = Field(default_factory=dict)
    baseline: KernelSource
    tunables: Tunables | None = None
    metrics: Metrics | None = None

    @field_validator("kernel_name")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value.startswith(RESERVED_KERNEL_PREFIX):
            raise ValueError(f"kernel names starting with {RESERVED_KERNEL_PREFIX!r} are the engine's own (its helper "
                             "kernels run in the same process, and Nsight Compute selects kernels by name)")
        return value

    @field_validator("tolerance")
    @classmethod
    def _known_dtypes(cls, value: dict[str, Tolerance]) -> dict[str, Tolerance]:
        for dtype in value:
            if dtype not in CTYPES:
                raise ValueError(f"unknown dtype {dtype!r} (known: {sorted(CTYPES)})")
        return value

    # ---- helpers used by the engine -------------------------------------------------------------
    @property
    def buffers(self) -> list[BufferParam]:
        return [p for p in self.params if isinstance(p, BufferParam)]

    @property
    def outputs(self) -> list[BufferParam]:
        return [p for p in self.buffers if p.role != "in"]

    def cases_for(self, roles: list[str], backend: str) -> list[Case]:
        """The cases of these roles that run on ``backend``: validation cases first, then performance."""
        return [c for role in ("validation", "performance") if role in roles
                for c in self.cases if c.role == role and c.runs_on(backend)]

    def default_roles(self, backend: str) -> list[Literal["validation", "performance"]]:
        """Every role on a GPU; on the cpu backend performance cases only where some are sized for it
        (they name 'cpu' in ``backends``): the others are GPU-sized and would take minutes on a CPU."""
        if backend != "cpu" or any(c.role == "performance" and c.backends and "cpu" in c.backends
                                   for c in self.cases):
            return ["validation", "performance"]
        return ["validation"]

    def case(self, name: str) -> Case:
        for c in self.cases:
            if c.name == name:
                return c
        raise KeyError(f"task {self.name!r} has no case {name!r}; cases: {[c.name for c in self.cases]}")

    def shape_of(self, buffer: BufferParam, sizes: dict[str, int]) -> tuple[int, ...]:
        return tuple(expressions.evaluate_int(e, sizes) for e in buffer.shape)


class Task(BaseModel):
    """A loaded task: the validated spec plus the folder its files live in."""

    model_config = ConfigDict(frozen=True)

    spec: TaskSpec
    folder: Path

    def read(self, name: str) -> str:
        return (self.folder / name).read_text()

    @property
    def name(self) -> str:
        return self.spec.name


TASK_FILE = "task.json"
BUNDLED_DIR = Path(__file__).parent / "tasks"


def load_task(folder: str | Path) -> Task:
    """Load and validate a task folder; every problem raises TaskSpecError naming file and field."""
    folder = Path(folder)
    path = folder / TASK_FILE
    if not path.is_file():
        raise TaskSpecError(str(path), "-", "no task.json in this folder")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise TaskSpecError(str(path), f"line {exc.lineno} column {exc.colno}", f"invalid JSON: {exc.msg}") from None
    spec = spec_from_dict(raw, str(path))
    _check_files(spec, folder, str(path))
    _check_expressions(spec, str(path))
    return Task(spec=spec, folder=folder.resolve())


def spec_from_dict(raw: object, source: str) -> TaskSpec:
    """Validate a spec (from task.json or inline); the error names ``source``, the field and the problem."""
    try:
        spec = TaskSpec.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(task)"
        more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
        raise TaskSpecError(source, field, err["msg"] + more) from None
    problem = _inconsistency(spec)
    if problem:
        raise TaskSpecError(source, *problem)
    return spec


def _inconsistency(spec: TaskSpec) -> tuple[str, str] | None:
    """(field, problem) for the first rule that spans several fields, or None."""
    names = [p.name for p in spec.params]
    for i, name in enumerate(names):
        if name in names[:i]:
            return f"params.{i}.name", f"parameter name {name!r} repeats"
    if not spec.outputs:
        return "params", "the kernel has no out/inout buffer, so nothing can be checked"
    symbols = set(spec.sizes)
    for i, p in enumerate(spec.params):
        exprs = p.shape if isinstance(p, BufferParam) else [p.value]
        for e in exprs:
            try:
                unknown = expressions.names_in(e) - symbols
            except ExpressionError as exc:
                return f"params.{i}.{'shape' if isinstance(p, BufferParam) else 'value'}", str(exc)
            if unknown:
                return f"params.{i}", f"parameter {p.name!r} uses unknown size symbols {sorted(unknown)}"
    for i, c in enumerate(spec.cases):
        if set(c.sizes) != symbols:
            return f"cases.{i}.sizes", f"case {c.name!r} sizes {sorted(c.sizes)} must give exactly {sorted(symbols)}"
    names = [c.name for c in spec.cases]
    for i, name in enumerate(names):
        if name in names[:i]:
            return f"cases.{i}.name", f"case name {name!r} repeats"
    for p in spec.outputs:
        if p.dtype not in spec.tolerance:
            return "tolerance", f"no tolerance for output dtype {p.dtype!r} of {p.name!r}"
    return None


def _check_files(spec: TaskSpec, folder: Path, source: str) -> None:
    named = [("baseline.source", spec.baseline.source)]
    if spec.tunables:
        named.append(("tunables.source", spec.tunables.source))
    ref = spec.reference
    if isinstance(ref, NumpyReference):
        named.append(("reference.file", ref.file))
    elif isinstance(ref, KernelReference):
        named.append(("reference.source", ref.source))
    for field, name in named:
        if Path(name).name != name:
            raise TaskSpecError(source, field, f"{name!r} must be a plain file name inside the task folder")
        if not (folder / name).is_file():
            raise TaskSpecError(source, field, f"file {name!r} does not exist in {folder}")
    if isinstance(ref, StoredReference):
        if Path(ref.dir).is_absolute() or ".." in Path(ref.dir).parts:
            raise TaskSpecError(source, "reference.dir", f"{ref.dir!r} must be a folder inside the task folder")
        for case in spec.cases:
            for buf in spec.buffers:
                f = folder / ref.dir / case.name / f"{buf.name}.npy"
                if not f.is_file():
                    raise TaskSpecError(source, "reference.dir", f"missing stored array {f}")


def _check_expressions(spec: TaskSpec, source: str) -> None:
    """Evaluate shapes and scalar values for every case now, so a typo fails at load time."""
    for case in spec.cases:
        for i, p in enumerate(spec.params):
            try:
                if isinstance(p, BufferParam):
                    shape = spec.shape_of(p, case.sizes)
                    if any(d <= 0 for d in shape):
                        raise ExpressionError(f"shape {shape} has a non-positive dimension")
                else:
                    expressions.evaluate(p.value, case.sizes)
            except ExpressionError as exc:
                raise TaskSpecError(source, f"params.{i} ({p.name}) in case {case.name!r}", str(exc)) from None
        if spec.metrics:
            for field in ("flops", "bytes"):
                e = getattr(spec.metrics, field)
                if e is not None:
                    try:
                        expressions.evaluate(e, case.sizes)
                    except ExpressionError as exc:
                        raise TaskSpecError(source, f"metrics.{field}", str(exc)) from None


def bundled_task_names() -> list[str]:
    return sorted(p.parent.name for p in BUNDLED_DIR.glob(f"*/{TASK_FILE}"))


def resolve_task(name_or_path: str | Path) -> Task:
    """A bundled task by name, or a task folder by path."""
    text = str(name_or_path)
    if (BUNDLED_DIR / text / TASK_FILE).is_file() and "/" not in text:
        return load_task(BUNDLED_DIR / text)
    path = Path(text)
    if path.is_dir():
        return load_task(path)
    raise TaskSpecError(text, "-", f"not a bundled task ({', '.join(bundled_task_names())}) nor a task folder")
