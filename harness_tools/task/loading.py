"""Loading a task: a folder (``task.json`` plus the files it names) or an inline spec, validated up front.

Every problem raises :class:`~harness_tools.errors.TaskSpecError` naming the file, the field and what is
wrong: the spec's own fields (:mod:`harness_tools.task.spec`), that its parts agree with each other (hidden
cases and ``size_rules`` included), that
every file it names is a plain file inside the folder, that stored arrays match their dtype and shape, and
that every size and launch expression parses.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from harness_tools.errors import ExpressionError, TaskSpecError
from harness_tools.task import expressions
from harness_tools.task.checking_rules import checking_files, checking_problem, mismatch_budget
from harness_tools.task.dtypes import as_dtype, is_bfloat16, is_float, numpy_dtype
from harness_tools.task.program_check import program_inconsistency
from harness_tools.task.spec import (
    MAX_CASE_BYTES,
    MAX_SOURCE_BYTES,
    MAX_TASK_ENTRIES,
    MAX_TASK_FILE_BYTES,
    BufferParam,
    Case,
    HiddenCase,
    KernelReference,
    NumpyReference,
    StoredReference,
    Task,
    TaskSpec,
    TorchReference,
    buffer_bytes,
    file_problem,
    inside_folder,
)

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
                    if not inside_folder(root, where.resolve()):
                        raise TaskSpecError(str(where), "-", f"{rel} is a symbolic link that leads out of the task "
                                                             f"folder; copy the file into the folder instead")
                elif entry.is_dir(follow_symlinks=False):
                    stack.append(where)
                elif not stat.S_ISREG(entry.stat(follow_symlinks=False).st_mode):
                    raise TaskSpecError(str(where), "-", f"{rel} is not a regular file (a FIFO, socket or device); "
                                                         "remove it from the task folder")


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
    for field, c in all_cases(spec):
        if set(c.sizes) != symbols:
            return f"{field}.sizes", f"case {c.name!r} sizes {sorted(c.sizes)} must give exactly {sorted(symbols)}"
    seen: set[str] = set()
    for field, c in all_cases(spec):
        if c.name in seen:
            return f"{field}.name", f"case name {c.name!r} repeats (hidden cases included)"
        seen.add(c.name)
    problem = _rules_inconsistency(spec) or program_inconsistency(spec)
    if problem:
        return problem
    problem = checking_problem(spec)
    if problem:
        return problem
    for p in spec.outputs:
        if spec.tolerance_for(p.dtype) is None:
            return "tolerance", (f"no tolerance for output dtype {p.dtype!r} of {p.name!r} (only the 16- and "
                                 "8-bit floats have a default: docs/dtypes.md)")
    return None


def all_cases(spec: TaskSpec) -> list[tuple[str, Case | HiddenCase]]:
    """Every case with the field that names it: ``cases.i`` then ``hidden.cases.i``."""
    return ([(f"cases.{i}", c) for i, c in enumerate(spec.cases)]
            + [(f"hidden.cases.{i}", c) for i, c in enumerate(spec.hidden.cases)])


def _rules_inconsistency(spec: TaskSpec) -> tuple[str, str] | None:
    """size_rules name known sizes, a size is in one equal group at most, and every case obeys them."""
    rules = spec.size_rules
    if rules is None:
        return None
    unknown = rules.names() - set(spec.sizes)
    if unknown:
        return "size_rules", f"unknown size names {sorted(unknown)} (sizes: {spec.sizes})"
    grouped = [n for g in rules.equal for n in g]
    twice = sorted({n for n in grouped if grouped.count(n) > 1})
    if twice:
        return "size_rules.equal", f"sizes {twice} appear in more than one group (or twice in one): merge the groups"
    for field, c in all_cases(spec):
        problem = rules.problem(c.sizes)
        if problem:
            return f"{field}.sizes", f"case {c.name!r}: {problem}"
    return None


def _check_files(spec: TaskSpec, folder: Path, source: str) -> None:
    named = [("baseline.source", spec.baseline.source)]
    if spec.tunables:
        named.append(("tunables.source", spec.tunables.source))
    ref = spec.reference
    if isinstance(ref, (NumpyReference, TorchReference)):
        named.append(("reference.file", ref.file))
    elif isinstance(ref, KernelReference):
        named.append(("reference.source", ref.source))
    named += checking_files(spec)  # Python files, like reference.file
    for field, name in named:
        problem = file_problem(folder, name)
        if problem:
            raise TaskSpecError(source, field, problem)
        size = (folder / name).stat().st_size
        if not field.endswith(".file") and size > MAX_SOURCE_BYTES:  # *.file: Python, no kernel source cap
            raise TaskSpecError(source, field, f"{name!r} is {size} bytes; a kernel source may have at most "
                                               f"{MAX_SOURCE_BYTES}")
    if isinstance(ref, StoredReference):
        if Path(ref.dir).is_absolute() or ".." in Path(ref.dir).parts:
            raise TaskSpecError(source, "reference.dir", f"{ref.dir!r} must be a folder inside the task folder")
        for _, case in all_cases(spec):  # a hidden case of a stored reference needs its arrays too
            for buf in spec.buffers:
                f = folder / ref.dir / case.name / f"{buf.name}.npy"
                if not f.is_file():
                    raise TaskSpecError(source, "reference.dir", f"missing stored array {f}")
                if not inside_folder(folder, f.resolve()):
                    raise TaskSpecError(str(f), "reference.dir", "the stored array is reached through a link out of "
                                                                 "the task folder")
                problem = _stored_array_problem(f, buf, spec, case)
                if problem:
                    raise TaskSpecError(str(f), f"reference.dir (case {case.name}, buffer {buf.name})", problem)


def _stored_array_problem(path: Path, buf: BufferParam, spec: TaskSpec, case: Case | HiddenCase) -> str | None:
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
    dtype = as_dtype(np.empty(0, dtype), buf.dtype).dtype  # bfloat16 is stored as raw 2-byte records
    if dtype.hasobject or (dtype.kind not in "biuf" and not is_bfloat16(dtype)):
        return f"stored dtype {dtype} is not numeric"
    if buf.role != "out" and dtype != numpy_dtype(buf.dtype):
        return f"stored input has dtype {dtype}; the buffer is {buf.dtype}"
    if fortran:
        return "stored in Fortran order; save it C-contiguous (np.ascontiguousarray)"
    return None


def _check_expressions(spec: TaskSpec, source: str) -> None:
    """Evaluate shapes and scalar values for every case now, so a typo fails at load time."""
    for where, case in all_cases(spec):
        problem = sizes_problem(spec, case.sizes)
        if problem:
            field, text = problem
            field = f"{field} in case {case.name!r}" if field.startswith("params.") else field
            raise TaskSpecError(source, field.replace("(case)", f"{where} ({case.name})"), text)


def sizes_problem(spec: TaskSpec, sizes: dict[str, int]) -> tuple[str, str] | None:
    """(field, problem) when these sizes cannot make a case of ``spec``: a shape not positive, a scalar that
    does not fit its dtype, more than ``MAX_CASE_BYTES`` of buffers, a metric that does not evaluate."""
    total = 0
    for i, p in enumerate(spec.params):
        try:
            if isinstance(p, BufferParam):
                shape = spec.shape_of(p, sizes)
                if any(d <= 0 for d in shape):
                    raise ExpressionError(f"shape {shape} has a non-positive dimension")
                total += buffer_bytes(p, shape)
                mismatch_budget(p, sizes)  # a whole number >= 0 in every case
            else:
                value = expressions.evaluate_expression(p.value, sizes)
                if not is_float(p.dtype):
                    info = np.iinfo(numpy_dtype(p.dtype))
                    if not info.min <= value <= info.max:
                        raise ExpressionError(f"value {value} does not fit {p.dtype} ({info.min}..{info.max})")
        except ExpressionError as exc:
            return f"params.{i} ({p.name})", str(exc)
    if total > MAX_CASE_BYTES:
        return "(case)", f"the case needs {total / 1e9:.1f} GB of buffers; at most {MAX_CASE_BYTES / 1e9:.0f} GB are accepted"
    for field in ("flops", "bytes") if spec.metrics else ():
        e = getattr(spec.metrics, field)
        if e is not None:
            try:
                expressions.evaluate_expression(e, sizes)
            except ExpressionError as exc:
                return f"metrics.{field}", str(exc)
    return None


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
