"""Task specs: what a kernel computes, on which cases, against which reference, and how to launch it.

A task is a folder holding ``task.json`` plus the files it names (baseline kernel, ``reference.py``,
tunable kernel, stored outputs). :func:`load_task` validates everything up front and raises
:class:`~harness_tools.errors.TaskSpecError` naming the file, the field and what is wrong.

Task folders and specs come from users and (inline) from clients, so everything is bounded before it
is used: names that become file names or C identifiers are ASCII identifiers; lists, strings and
numbers have caps (``MAX_*`` below); no file of the folder is a symbolic link leading out of it, nor a
FIFO or device; stored arrays match the spec's dtype and shape; and no case needs more than
``MAX_CASE_BYTES`` of buffers (whether a case fits *this* machine is checked when it is evaluated).
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness_tools.errors import ExpressionError, TaskSpecError
from harness_tools.task import expressions

# ---- limits: what a task (or a candidate) may ask for ---------------------------------------------------
MAX_NAME_CHARS = 64
MAX_FILE_NAME_CHARS = 128
MAX_PARAMS = 64
MAX_SIZES = 32
MAX_CASES = 256
MAX_DIMS = 8
MAX_DEFINES = 64
MAX_TUNABLES = 32
MAX_TUNABLE_VALUES = 1024
MAX_CONSTRAINTS = 64
MAX_BACKENDS = 8
MAX_DESCRIPTION_CHARS = 20_000
MAX_TASK_FILE_BYTES = 4 << 20  # task.json
MAX_SOURCE_BYTES = 512 * 1024  # a kernel source: the task's own files and every candidate's
MAX_TASK_ENTRIES = 10_000  # files and folders in a task folder (stored references have one file per case and buffer)
MAX_CASE_BYTES = 1 << 40  # buffers of one case, on any machine
MAX_INT = 1 << 64
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


def _identifier(what: str):
    def check(value: str) -> str:
        if len(value) > MAX_NAME_CHARS or not IDENTIFIER.fullmatch(value):
            raise ValueError(f"{what} {value[:80]!r} must be an identifier: ASCII letters, digits and _, not starting "
                             f"with a digit, at most {MAX_NAME_CHARS} characters ({what}s name files and C symbols)")
        return value
    return AfterValidator(check)


ParamName = Annotated[str, _identifier("parameter name")]
SizeName = Annotated[str, _identifier("size name")]
CaseName = Annotated[str, _identifier("case name")]
DefineName = Annotated[str, _identifier("define name")]
FileName = Annotated[str, Field(min_length=1, max_length=MAX_FILE_NAME_CHARS)]
BoundedInt = Annotated[int, Field(ge=-MAX_INT, le=MAX_INT)]
BoundedFloat = Annotated[float, Field(allow_inf_nan=False)]  # floats cost the same at any size: finite is enough
SizeValue = Annotated[int, Field(ge=-(1 << 63), lt=1 << 63)]
ExprText = Annotated[str, Field(max_length=expressions.MAX_EXPRESSION_CHARS)]

DType = Literal[
    "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"
]
Expr = BoundedInt | BoundedFloat | ExprText
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


class ScalarParam(Strict):
    kind: Literal["scalar"] = "scalar"
    name: ParamName
    dtype: DType
    value: Expr


Param = Annotated[BufferParam | ScalarParam, Field(discriminator="kind")]


class Case(Strict):
    name: CaseName
    role: Literal["validation", "performance"]
    sizes: dict[SizeName, SizeValue] = Field(max_length=MAX_SIZES)
    backends: list[Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")]] | None = Field(
        None, min_length=1, max_length=MAX_BACKENDS, description="the backends this case runs on (default: all); e.g. GPU-sized performance "
                                        "cases ['cuda'] and a CPU-sized one ['cpu']")

    def runs_on(self, backend: str) -> bool:
        return self.backends is None or backend in self.backends


class LaunchSpec(Strict):
    """Grid, block and dynamic shared memory as expressions over sizes, tunables and defines."""

    grid: list[Expr] = Field(min_length=1, max_length=3)
    block: list[Expr] = Field(min_length=1, max_length=3)
    shared_mem: Expr = 0


class KernelSource(Strict):
    source: FileName = Field(description="file name inside the task folder")
    launch: LaunchSpec
    defines: dict[DefineName, Expr] = Field(default_factory=dict, max_length=MAX_DEFINES)


class NumpyReference(Strict):
    kind: Literal["numpy"] = "numpy"
    file: FileName = "reference.py"
    function: Annotated[str, _identifier("function name")] = "reference"


class KernelReference(Strict):
    kind: Literal["cuda"] = "cuda"
    source: FileName
    kernel: Annotated[str, _identifier("kernel name")]
    launch: LaunchSpec
    defines: dict[DefineName, Expr] = Field(default_factory=dict, max_length=MAX_DEFINES)


class StoredReference(Strict):
    """Fixed inputs and expected outputs: ``<dir>/<case>/<buffer>.npy`` for every buffer."""

    kind: Literal["stored"] = "stored"
    dir: FileName = "expected"


Reference = Annotated[NumpyReference | KernelReference | StoredReference, Field(discriminator="kind")]


class Tolerance(Strict):
    """An element passes when ``|out - ref| <= atol + rtol * |ref|``; atol may use size symbols."""

    atol: Expr = 0.0
    rtol: BoundedFloat = 0.0


class Tunables(Strict):
    """A parameterised kernel and its search space (``#define``s the tuner sets)."""

    source: FileName
    params: dict[DefineName, list[BoundedInt]] = Field(min_length=1, max_length=MAX_TUNABLES)
    constraints: list[ExprText] = Field(default_factory=list, max_length=MAX_CONSTRAINTS)
    launch: LaunchSpec

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


RESERVED_KERNEL_PREFIX = "cudaopt_"


class TaskSpec(Strict):
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
        problem = _file_problem(self.folder, name)
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


TASK_FILE = "task.json"
BUNDLED_DIR = Path(__file__).parents[1] / "tasks"


def load_task(folder: str | Path) -> Task:
    """Load and validate a task folder; every problem raises TaskSpecError naming file and field."""
    folder = Path(folder)
    path = folder / TASK_FILE
    if not folder.is_dir() or not path.is_file():
        raise TaskSpecError(str(path), "-", "no task.json in this folder")
    root = folder.resolve()
    _check_folder(root, str(path))
    if path.stat().st_size > MAX_TASK_FILE_BYTES:
        raise TaskSpecError(str(path), "-", f"task.json is {path.stat().st_size} bytes; at most {MAX_TASK_FILE_BYTES} "
                                            "are accepted (store big data as .npy files of a stored reference)")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise TaskSpecError(str(path), f"line {exc.lineno} column {exc.colno}", f"invalid JSON: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:  # e.g. a 5000-digit integer, or nesting deeper than the parser goes
        raise TaskSpecError(str(path), "-", f"invalid JSON: {str(exc)[:200] or type(exc).__name__}") from None
    spec = spec_from_dict(raw, str(path))
    _check_files(spec, root, str(path))
    _check_expressions(spec, str(path))
    return Task(spec=spec, folder=root)


def _check_folder(root: Path, source: str) -> None:
    """Every entry of the task folder is a regular file, a folder, or a link that stays inside it.

    The folder is copied into each run and its files are served back to clients: a link to a file
    elsewhere (``baseline.cu -> /etc/shadow``) would hand that file out, a FIFO would hang the copy."""
    count, stack = 0, [root]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                count += 1
                if count > MAX_TASK_ENTRIES:
                    raise TaskSpecError(source, "-", f"the task folder {root} holds more than {MAX_TASK_ENTRIES} files "
                                                     "and folders; keep only what the task needs in it")
                where = Path(entry.path)
                rel = where.relative_to(root)
                if entry.is_symlink():
                    if not _inside(root, where.resolve()):
                        raise TaskSpecError(str(where), "-", f"{rel} is a symbolic link that leads out of the task "
                                                             f"folder; copy the file into the folder instead")
                elif entry.is_dir(follow_symlinks=False):
                    stack.append(where)
                elif not stat.S_ISREG(entry.stat(follow_symlinks=False).st_mode):
                    raise TaskSpecError(str(where), "-", f"{rel} is not a regular file (a FIFO, socket or device); "
                                                         "remove it from the task folder")


def _inside(root: Path, path: Path) -> bool:
    return path == root or path.is_relative_to(root)


def _file_problem(root: Path, name: str) -> str | None:
    """Why ``name`` is not a plain regular file directly inside ``root`` (or None)."""
    if not name or Path(name).name != name or name in (".", ".."):
        return f"{name!r} must be a plain file name inside the task folder"
    path = root / name
    if path.is_symlink() and not _inside(root, path.resolve()):
        return f"{name!r} is a symbolic link that leads out of the task folder; copy the file into the folder instead"
    if not path.is_file():
        return f"file {name!r} does not exist in {root}"
    return None


def spec_from_dict(raw: object, source: str) -> TaskSpec:
    """Validate a spec (from task.json or inline); the error names ``source``, the field and the problem."""
    try:
        spec = TaskSpec.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
        err = next((e for e in errors if e["type"] in _CAPS), errors[0])  # a cap says best what to change
        field = ".".join(str(p) for p in err["loc"] if not _UNION_TAG.fullmatch(str(p))) or "(task)"
        more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
        raise TaskSpecError(source, field, validation_message(err) + more) from None
    problem = _inconsistency(spec)
    if problem:
        raise TaskSpecError(source, *problem)
    return spec


_CAPS = ("too_long", "string_too_long")
_UNION_TAG = re.compile(r"(constrained-)?(int|float|str)|function-after\[.*\]")


def validation_message(err: dict) -> str:
    """Pydantic's message, with what to change where a cap was exceeded."""
    ctx = err.get("ctx") or {}
    if err["type"] == "too_long":
        return (f"{ctx.get('actual_length')} entries; at most {ctx.get('max_length')} are accepted here (cudaopt "
                "bounds every list it is given): give fewer")
    if err["type"] == "string_too_long":
        size = len(err["input"]) if isinstance(err.get("input"), str) else "too many"
        return f"text of {size} characters; at most {ctx.get('max_length')} are accepted here: shorten it"
    return err["msg"]


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
        problem = _file_problem(folder, name)
        if problem:
            raise TaskSpecError(source, field, problem)
        size = (folder / name).stat().st_size
        if field != "reference.file" and size > MAX_SOURCE_BYTES:
            raise TaskSpecError(source, field, f"{name!r} is {size} bytes; a kernel source may have at most "
                                               f"{MAX_SOURCE_BYTES}")
    if isinstance(ref, StoredReference):
        if Path(ref.dir).is_absolute() or ".." in Path(ref.dir).parts:
            raise TaskSpecError(source, "reference.dir", f"{ref.dir!r} must be a folder inside the task folder")
        for case in spec.cases:
            for buf in spec.buffers:
                f = folder / ref.dir / case.name / f"{buf.name}.npy"
                if not f.is_file():
                    raise TaskSpecError(source, "reference.dir", f"missing stored array {f}")
                if not _inside(folder, f.resolve()):
                    raise TaskSpecError(str(f), "reference.dir", "the stored array is reached through a link out of "
                                                                 "the task folder")
                problem = _stored_array_problem(f, buf, spec, case)
                if problem:
                    raise TaskSpecError(str(f), f"reference.dir (case {case.name}, buffer {buf.name})", problem)


def _stored_array_problem(path: Path, buf: BufferParam, spec: TaskSpec, case: Case) -> str | None:
    """Read only the .npy header: the array must have the spec's shape, and inputs the buffer's dtype."""
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read(f, max_header_size=10_000)
    except (OSError, ValueError) as exc:
        return f"not a readable .npy file: {exc}"
    try:
        want = spec.shape_of(buf, case.sizes)
    except ExpressionError:
        return None  # the shape itself is reported by _check_expressions
    if tuple(shape) != want:
        return f"stored shape {tuple(shape)} differs from the spec's {want}"
    if dtype.hasobject or dtype.kind not in "biuf":
        return f"stored dtype {dtype} is not numeric"
    if buf.role != "out" and dtype != numpy_dtype(buf.dtype):
        return f"stored input has dtype {dtype}; the buffer is {buf.dtype}"
    if fortran:
        return "stored in Fortran order; save it C-contiguous (np.ascontiguousarray)"
    return None


def _check_expressions(spec: TaskSpec, source: str) -> None:
    """Evaluate shapes and scalar values for every case now, so a typo fails at load time."""
    for c, case in enumerate(spec.cases):
        total = 0
        for i, p in enumerate(spec.params):
            try:
                if isinstance(p, BufferParam):
                    shape = spec.shape_of(p, case.sizes)
                    if any(d <= 0 for d in shape):
                        raise ExpressionError(f"shape {shape} has a non-positive dimension")
                    total += buffer_bytes(p, shape)
                else:
                    value = expressions.evaluate_expression(p.value, case.sizes)
                    if not is_float(p.dtype):
                        info = np.iinfo(numpy_dtype(p.dtype))
                        if not info.min <= value <= info.max:
                            raise ExpressionError(f"value {value} does not fit {p.dtype} ({info.min}..{info.max})")
            except ExpressionError as exc:
                raise TaskSpecError(source, f"params.{i} ({p.name}) in case {case.name!r}", str(exc)) from None
        if total > MAX_CASE_BYTES:
            raise TaskSpecError(source, f"cases.{c} ({case.name})", f"the case needs {total / 1e9:.1f} GB of buffers; "
                                                                    f"at most {MAX_CASE_BYTES / 1e9:.0f} GB are accepted")
        if spec.metrics:
            for field in ("flops", "bytes"):
                e = getattr(spec.metrics, field)
                if e is not None:
                    try:
                        expressions.evaluate_expression(e, case.sizes)
                    except ExpressionError as exc:
                        raise TaskSpecError(source, f"metrics.{field}", str(exc)) from None


def bundled_task_names() -> list[str]:
    return sorted(p.parent.name for p in BUNDLED_DIR.glob(f"*/{TASK_FILE}"))


def resolve_task(name_or_path: str | Path) -> Task:
    """A bundled task by name, or a task folder by path."""
    text = str(name_or_path)
    if text in bundled_task_names():
        return load_task(BUNDLED_DIR / text)
    path = Path(text)
    if path.is_dir():
        return load_task(path)
    raise TaskSpecError(text, "-", f"not a bundled task ({', '.join(bundled_task_names())}) nor a task folder")
