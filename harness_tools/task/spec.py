"""Task specs: what a kernel computes, on which cases, against which reference, and how to launch it.

A task is a folder holding ``task.json`` plus the files it names (baseline kernel, ``reference.py``,
tunable kernel, stored outputs). :func:`harness_tools.task.loading.load_task` validates everything up front
and raises :class:`~harness_tools.errors.TaskSpecError` naming the file, the field and what is wrong.

Task folders and specs come from users and (inline) from clients, so everything is bounded before it
is used: names that become file names or C identifiers are ASCII identifiers; lists, strings and
numbers have caps (``MAX_*`` below); no file of the folder is a symbolic link leading out of it, nor a
FIFO or device; stored arrays match the spec's dtype and shape; and no case needs more than
``MAX_CASE_BYTES`` of buffers (whether a case fits *this* machine is checked when it is evaluated).

Hidden cases (``hidden``) are kept apart from ``cases``: no role, never returned by :meth:`TaskSpec.cases_for`,
so nothing that evaluates, lists or exports the task's cases can reach them. They are checked only by
:mod:`harness_tools.check.hidden_shapes` (named ones, plus sizes derived from the validation cases), and
``size_rules`` states what every size must obey (sizes that stay equal, multiples, maxima), for all cases.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harness_tools.errors import TaskSpecError
from harness_tools.task import expressions
from harness_tools.task.dtypes import CTYPES, DType, default_tolerance, numpy_dtype
from harness_tools.task.launches import (  # noqa: F401  (re-exported)
    KernelProgram,
    LaunchSpec,
    LaunchStep,
    ScalarValue,
    ScratchBuffer,
)
from harness_tools.task.reference_specs import (  # noqa: F401  (re-exported: the spec's names)
    KernelReference,
    NumpyReference,
    Reference,
    StoredReference,
    TorchReference,
)
from harness_tools.task.spec_fields import (  # noqa: F401  (re-exported: the spec's names)
    IDENTIFIER,
    MAX_BACKENDS,
    MAX_CASE_BYTES,
    MAX_CASES,
    MAX_CONSTRAINTS,
    MAX_DEFINES,
    MAX_DESCRIPTION_CHARS,
    MAX_DIMS,
    MAX_FILE_NAME_CHARS,
    MAX_HIDDEN_CASES,
    MAX_INT,
    MAX_NAME_CHARS,
    MAX_PARAMS,
    MAX_SIZES,
    MAX_SOURCE_BYTES,
    MAX_TASK_ENTRIES,
    MAX_TASK_FILE_BYTES,
    MAX_TUNABLE_VALUES,
    MAX_TUNABLES,
    BackendNames,
    BoundedFloat,
    BoundedInt,
    CaseName,
    CompileOptions,
    DefineName,
    Expr,
    ExprText,
    FileName,
    ParamName,
    SizeName,
    SizeValue,
    Strict,
    _identifier,
)


class InputDistribution(Strict):
    """How fresh inputs are drawn. Never zeros: partial computation must be visible."""

    dist: Literal["uniform", "normal", "randint"] = "uniform"
    low: BoundedFloat = -1.0
    high: BoundedFloat = 1.0
    mean: BoundedFloat = 0.0
    std: BoundedFloat = 1.0

    @model_validator(mode="after")
    def _ordered(self) -> InputDistribution:
        if self.low > self.high:
            raise ValueError(f"low {self.low:g} is above high {self.high:g}")
        return self


class BufferParam(Strict):
    kind: Literal["buffer"] = "buffer"
    name: ParamName
    dtype: DType
    shape: list[Expr] = Field(min_length=1, max_length=MAX_DIMS)
    role: Literal["in", "out", "inout"]
    initial: float | None = Field(None, description="value outputs start at (else they are poisoned)")
    init: InputDistribution | None = Field(None, description="distribution of inputs (in/inout)")
    max_mismatches: Annotated[int, Field(ge=0, le=MAX_INT)] | ExprText = Field(
        0, description="elements of this output that may be outside tolerance (an expression over sizes allowed); "
                       "NaN or Inf where the reference is finite never passes (docs/tasks_format_checking.md)")
    constant: Annotated[str, _identifier("constant symbol")] | None = Field(
        None, description="copy this input into the kernel's __constant__ symbol of this name before every launch "
                          "instead of passing it as an argument (role 'in' only; the symbol's size must match)")

    @model_validator(mode="after")
    def _constant_is_input(self) -> BufferParam:
        # the symbol is named in the cpu backend's generated lookup, beside its own reserved names (a symbol
        # "__name" resolved to the lookup's parameter: the input would have been copied onto the stack)
        if self.constant is not None and self.constant.startswith(("__", "cudaopt_")):
            raise ValueError(f"__constant__ symbol {self.constant!r}: names starting with '__' are reserved in C++ and "
                             "'cudaopt_' ones are the engine's; rename it")
        if self.constant is not None and self.role != "in":
            raise ValueError(f"buffer {self.name!r} fills __constant__ symbol {self.constant!r}, so its role must be "
                             f"'in' (kernels cannot write __constant__ memory), not {self.role!r}")
        return self


class ScalarParam(Strict):
    kind: Literal["scalar"] = "scalar"
    name: ParamName
    dtype: DType
    value: Expr

    @field_validator("dtype")
    @classmethod
    def _passable(cls, value: str) -> str:
        if value.startswith("float8"):  # no launcher passes an 8-bit float by value
            raise ValueError(f"a scalar cannot be {value}: pass it as float32 and convert in the kernel")
        return value


Param = Annotated[BufferParam | ScalarParam, Field(discriminator="kind")]


class Case(Strict):
    name: CaseName
    role: Literal["validation", "performance"]
    sizes: dict[SizeName, SizeValue] = Field(max_length=MAX_SIZES)
    backends: BackendNames = Field(None, min_length=1, max_length=MAX_BACKENDS,
                                   description="the backends this case runs on (default: all); e.g. GPU-sized "
                                               "performance cases ['cuda'] and a CPU-sized one ['cpu']")

    def runs_on(self, backend: str) -> bool:
        return self.backends is None or backend in self.backends


class HiddenCase(Strict):
    """A case the model never sees: correctness only, checked before a candidate may become a run's best."""

    name: CaseName
    sizes: dict[SizeName, SizeValue] = Field(max_length=MAX_SIZES)
    backends: BackendNames = Field(None, min_length=1, max_length=MAX_BACKENDS,
                                   description="the backends this case runs on (default: all)")

    def runs_on(self, backend: str) -> bool:
        return self.backends is None or backend in self.backends


class HiddenSpec(Strict):
    """The task's hidden cases, and whether cudaopt derives more from the validation cases' sizes."""

    cases: list[HiddenCase] = Field(default_factory=list, max_length=MAX_HIDDEN_CASES)
    derive: bool = Field(True, description="also derive hidden sizes (odd, prime, around powers of two and tile "
                                           "sizes) from the validation cases; false: the named cases only")


class SizeRules(Strict):
    """What every size of every case obeys; derived hidden sizes keep to it too."""

    equal: list[Annotated[list[SizeName], Field(min_length=2, max_length=MAX_SIZES)]] = Field(
        default_factory=list, max_length=MAX_SIZES, description="groups of sizes that are always equal")
    multiple_of: dict[SizeName, Annotated[int, Field(ge=1, le=1 << 32)]] = Field(
        default_factory=dict, max_length=MAX_SIZES, description="sizes that are always a multiple of this")
    max: dict[SizeName, Annotated[int, Field(ge=1, lt=1 << 63)]] = Field(
        default_factory=dict, max_length=MAX_SIZES, description="largest value a size may take")

    def problem(self, sizes: dict[str, int]) -> str | None:
        """Why ``sizes`` break a rule (or None)."""
        for group in self.equal:
            if len({sizes[n] for n in group}) > 1:
                return f"sizes {', '.join(group)} must be equal (size_rules.equal)"
        for name, m in self.multiple_of.items():
            if sizes[name] % m:
                return f"size {name} must be a multiple of {m} (size_rules.multiple_of)"
        for name, top in self.max.items():
            if sizes[name] > top:
                return f"size {name} must be at most {top} (size_rules.max)"
        return None

    def names(self) -> set[str]:
        return {n for g in self.equal for n in g} | set(self.multiple_of) | set(self.max)




class KernelSource(KernelProgram):
    source: FileName = Field(description="file name inside the task folder")
    defines: dict[DefineName, Expr] = Field(default_factory=dict, max_length=MAX_DEFINES)
    options: CompileOptions = Field(default_factory=list, description="NVRTC options, as a candidate's (e.g. "
                                    "'--arch-specific' for a kernel that uses wgmma)")


class Tolerance(Strict):
    """An element passes when ``|out - ref| <= atol + rtol * |ref|``; atol may use size symbols."""

    atol: Expr = 0.0
    rtol: BoundedFloat = 0.0


class Tunables(KernelProgram):
    """A parameterised kernel and its search space (``#define``s the tuner sets)."""

    source: FileName
    params: dict[DefineName, list[BoundedInt]] = Field(min_length=1, max_length=MAX_TUNABLES)
    constraints: list[ExprText] = Field(default_factory=list, max_length=MAX_CONSTRAINTS)
    options: CompileOptions = Field(default_factory=list, description="NVRTC options of every point, as a "
                                    "candidate's (e.g. '--arch-specific' for a kernel that uses wgmma)")

    @field_validator("params")
    @classmethod
    def _values(cls, value: dict[str, list[int]]) -> dict[str, list[int]]:
        for name, values in value.items():
            if not 1 <= len(values) <= MAX_TUNABLE_VALUES:
                raise ValueError(f"tunable {name} has {len(values)} values; give between 1 and {MAX_TUNABLE_VALUES}")
        return value


class Metrics(Strict):
    flops: Expr | None = None
    bytes: Expr | None = None


class InputsGenerator(Strict):
    """A function of the task folder that builds every in/inout buffer: ``fn(sizes, rng) -> {name: array}``."""

    file: FileName = "reference.py"
    function: Annotated[str, _identifier("function name")] = "make_inputs"


class CustomCheck(Strict):
    """A function of the task folder that judges the outputs: ``fn(outputs, expected, inputs, sizes)``."""

    file: FileName = "reference.py"
    function: Annotated[str, _identifier("function name")] = "check"
    replaces_tolerance: bool = Field(False, description="the check alone decides (the element-wise comparison still "
                                                        "reports its statistics); false: both must pass")


RESERVED_KERNEL_PREFIX = "cudaopt_"


class TaskSpec(Strict):
    schema_file: str | None = Field(None, alias="$schema", exclude=True, max_length=1000,
                                    description="where this file's JSON Schema lies, for editors: a path relative to "
                                                "task.json (cudaopt schema task); ignored by the engine")
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str = Field(max_length=MAX_DESCRIPTION_CHARS)
    kernel_name: Annotated[str, _identifier("kernel name")]
    params: list[Param] = Field(min_length=1, max_length=MAX_PARAMS)
    sizes: list[SizeName] = Field(min_length=1, max_length=MAX_SIZES)
    cases: list[Case] = Field(min_length=1, max_length=MAX_CASES)
    reference: Reference
    tolerance: dict[str, Tolerance] = Field(default_factory=dict, max_length=len(CTYPES))
    baseline: KernelSource
    tunables: Tunables | None = None
    metrics: Metrics | None = None
    hidden: HiddenSpec = Field(default_factory=HiddenSpec, description="cases the model never sees")
    size_rules: SizeRules | None = None
    inputs: InputsGenerator | None = Field(None, description="build the inputs with a function of the task folder "
                                                             "instead of drawing them (docs/tasks_format_checking.md)")
    check: CustomCheck | None = Field(None, description="judge the outputs with a function of the task folder too "
                                                        "(docs/tasks_format_checking.md)")
    size_defines: dict[DefineName, Expr] = Field(
        default_factory=dict, max_length=MAX_DEFINES,
        description="compile-time #defines per case, as expressions over its sizes, e.g. {\"image_width\": \"W\"}: "
                    "a candidate is compiled once per distinct set of values")

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

    @property
    def arguments(self) -> list[Param]:
        """The kernel's signature: every param but the inputs that fill __constant__ symbols."""
        return [p for p in self.params if not (isinstance(p, BufferParam) and p.constant)]

    @property
    def constants(self) -> list[BufferParam]:
        return [p for p in self.buffers if p.constant]

    def cases_for(self, roles: list[str], backend: str) -> list[Case]:
        """The cases of these roles that run on ``backend``: validation cases first, then performance.
        Never a hidden case: those live in ``hidden`` and have no role."""
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

    def tolerance_for(self, dtype: str) -> Tolerance | None:
        """The tolerance outputs of ``dtype`` are compared with: the task's own, else the dtype's default
        (docs/dtypes.md; None where the dtype has none and the task states none)."""
        if dtype in self.tolerance:
            return self.tolerance[dtype]
        default = default_tolerance(dtype)
        return None if default is None else Tolerance(atol=default[0], rtol=default[1])

    def shape_of(self, buffer: BufferParam, sizes: dict[str, int]) -> tuple[int, ...]:
        return tuple(expressions.evaluate_int(e, sizes) for e in buffer.shape)


def buffer_bytes(buffer: BufferParam, shape: tuple[int, ...]) -> int:
    """Bytes of one buffer of this shape (without the engine's poisoned tail)."""
    elements = 1
    for d in shape:
        elements *= d
    return elements * numpy_dtype(buffer.dtype).itemsize


class Task(BaseModel):
    """A loaded task: the validated spec plus the folder its files live in."""

    model_config = ConfigDict(frozen=True)

    spec: TaskSpec
    folder: Path

    def path(self, name: str) -> Path:
        """A file of the task folder by plain name; never one reached through a link out of the folder."""
        path = self.folder / name
        problem = file_problem(self.folder, name)
        if problem:
            raise TaskSpecError(str(path), "-", problem)
        return path

    def read(self, name: str) -> str:
        """A source file of the task (at most ``MAX_SOURCE_BYTES``)."""
        path = self.path(name)
        with open(path, "rb") as f:
            data = f.read(MAX_SOURCE_BYTES + 1)
        if len(data) > MAX_SOURCE_BYTES:
            raise TaskSpecError(str(path), "-", f"larger than the {MAX_SOURCE_BYTES} bytes a kernel source may have")
        return data.decode(errors="replace")

    @property
    def name(self) -> str:
        return self.spec.name


def inside_folder(root: Path, path: Path) -> bool:
    return path == root or path.is_relative_to(root)


def file_problem(root: Path, name: str) -> str | None:
    """Why ``name`` is not a plain regular file directly inside ``root`` (or None)."""
    if not name or Path(name).name != name or name in (".", ".."):
        return f"{name!r} must be a plain file name inside the task folder"
    path = root / name
    if path.is_symlink() and not inside_folder(root, path.resolve()):
        return f"{name!r} is a symbolic link that leads out of the task folder; copy the file into the folder instead"
    if not path.is_file():
        return f"file {name!r} does not exist in {root}"
    return None
