"""Inputs from the task's own generator: ``inputs = {"file": "reference.py", "function": "make_inputs"}``.

Some inputs are not independent random numbers: a polygon, sorted keys, a sparse matrix in CSR form. The
task then names a function ``fn(sizes, rng) -> {buffer name: array}`` that builds every in/inout buffer of a
case. ``rng`` is a :class:`numpy.random.Generator` seeded from (evaluation seed, case name), so a seed
replays exactly as drawn inputs do, and cases never shift each other.

What it returns is checked before anything runs, and a bad return is the task's bug (a TaskSpecError naming
the file, the field ``inputs.function``, the case, the buffer and the problem): a dict holding every in/inout
buffer and nothing else; numbers in the spec's shape for the case; for float buffers finite values that stay
finite in the buffer's dtype; for integer buffers whole numbers in its range. Values are then cast to the
buffer's dtype, rounded once (bfloat16 and float16 round to nearest even).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping

import numpy as np

from harness_tools.check.task_functions import call_task_function
from harness_tools.errors import TaskSpecError
from harness_tools.task.dtypes import is_bfloat16, is_float, numpy_dtype
from harness_tools.task.spec import BufferParam, Case, Task, TaskSpec

FIELD = "inputs.function"
STREAM = zlib.crc32(b"inputs.function")  # keeps the generator's stream apart from any buffer's own draw


def generator_rng(seed: int, case: Case) -> np.random.Generator:
    """The generator's random stream for one case: a function of (seed, case name) only."""
    return np.random.default_rng([seed, zlib.crc32(case.name.encode()), STREAM])


def generated_inputs(task: Task, case: Case, seed: int) -> dict[str, np.ndarray]:
    """Every in/inout buffer of ``case``, built by the task's generator and checked, in the buffers' dtypes."""
    gen = task.spec.inputs
    assert gen is not None, "generated_inputs is for tasks with an inputs generator"
    returned = call_task_function(task, gen.file, gen.function, FIELD, dict(case.sizes), generator_rng(seed, case))
    return checked_inputs(task.spec, case, returned, str(task.folder / gen.file), gen.function)


def checked_inputs(spec: TaskSpec, case: Case, returned: object, where: str, function: str) -> dict[str, np.ndarray]:
    """``returned`` as the case's input arrays, or a TaskSpecError saying what is wrong with it."""
    def refuse(problem: str) -> TaskSpecError:
        return TaskSpecError(where, FIELD, f"{function}() for case {case.name}: {problem}")

    wanted = {b.name: b for b in spec.buffers if b.role != "out"}
    if not isinstance(returned, Mapping):
        raise refuse(f"must return a dict of arrays (in/inout buffer name -> array), returned {type(returned).__name__}")
    unknown = sorted(repr(k) for k in returned if k not in wanted)
    if unknown:
        raise refuse(f"returned {', '.join(unknown)}, which {'is not an' if len(unknown) == 1 else 'are not'} in/inout "
                     f"buffer{'s' if len(unknown) > 1 else ''} (the inputs are {sorted(wanted)})")
    missing = [name for name in wanted if name not in returned]
    if missing:
        raise refuse(f"did not return input{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}")
    arrays = {}
    for name, buf in wanted.items():
        arr = _as_buffer(returned[name], buf, spec.shape_of(buf, case.sizes))
        if isinstance(arr, str):
            raise refuse(f"returned {name} {arr}")
        arrays[name] = arr
    return arrays


def _as_buffer(value: object, buf: BufferParam, shape: tuple[int, ...]) -> np.ndarray | str:
    """The value cast to the buffer's dtype, or what is wrong with it (a phrase after "returned <name>")."""
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:  # an object NumPy cannot make an array of (ragged lists, ...)
        return f"that is not an array: {type(exc).__name__}: {exc}"
    if is_bfloat16(arr.dtype):
        arr = arr.astype(np.float64)  # exact; NumPy's own predicates then apply
    if arr.dtype.kind not in "biuf":
        return f"with dtype {arr.dtype}; give numbers (bool, int or float arrays)"
    if arr.shape != shape:
        return f"with shape {arr.shape}, expected {shape}"
    target = numpy_dtype(buf.dtype)
    if arr.dtype.kind == "f":
        finite = np.isfinite(arr)
        if not finite.all():
            return f"with the non-finite value {_first(arr, ~finite)}: inputs must be finite"
    if is_float(buf.dtype):
        source = arr if arr.dtype.kind == "f" else arr.astype(np.float64)  # a float source is rounded once, directly
        with np.errstate(over="ignore"):
            cast = source.astype(target)
        fits = np.isfinite(cast)
        if not fits.all():
            return f"with the value {_first(source, ~fits)}, which overflows {buf.dtype}"
        return np.ascontiguousarray(cast)
    if arr.dtype.kind == "f":
        whole = np.equal(np.floor(arr), arr)
        if not whole.all():
            return f"with the value {_first(arr, ~whole)}, which is not a whole number (the buffer is {buf.dtype})"
    info = np.iinfo(target)
    if arr.size:
        low, high = int(arr.min()), int(arr.max())
        if low < info.min or high > info.max:
            bad = arr < info.min if low < info.min else arr > info.max
            return f"with the value {_first(arr, bad)}, outside the range of {buf.dtype} ({info.min}..{info.max})"
    return np.ascontiguousarray(arr.astype(target))


def _first(arr: np.ndarray, mask: np.ndarray) -> str:
    """The first element where ``mask`` holds, and its index."""
    flat = int(np.argmax(mask.reshape(-1)))
    index = [int(i) for i in np.unravel_index(flat, arr.shape)] if arr.ndim else []
    return f"{arr.reshape(-1)[flat].item()!r} at index {index}"
