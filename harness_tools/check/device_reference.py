"""The float64 oracle in the form a device holds it, for outputs compared on the device (ArgSpec.check).

Per output, the form is ``hi`` plus, for float32 outputs, ``lo``:

* float64 and 32/64-bit integer outputs: ``hi`` is the float64 reference itself (exact: the device's verdicts are
  the host's bit for bit);
* float32 outputs: ``hi`` is the reference rounded to float32 and ``lo`` the rest, ``ref - hi``, rounded to
  bfloat16 (its bits as uint16): 6 bytes per element, within 2^-32·|ref| + 2^-133 of the float64 value, far below
  any tolerance a float32 output can have;
* half, bfloat16, fp8 and 8/16-bit integer outputs: ``hi`` alone, in float32 (within 2^-23·|ref|, while their own
  rounding is 2^-8 to 2^-3).

That is for tolerances far wider than those bounds. A tight one (a relative tolerance below 2^-18, about 16
float32 ulps, or none at all) gets the exact float64 form whatever the dtype: with vector_add's rtol of 6e-8,
just above float32's own rounding, the rounded form left elements undecided and the whole output went to the
host every time. A reference with a finite value beyond float32's range has no such form (it would read as Inf): that output is
compared on the host. The files are written once per (task, spec, oracle, case, seed) into the inputs folder
the worker may read, in chunks (the float64 reference of a 6.4 GB output is 12.8 GB already), and kept like the
input files (:class:`harness_tools.run.scratch.InputFiles`, bounded in bytes).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from harness_tools.backends.contract import DeviceCheck
from harness_tools.check.mismatch_map import bin_grid
from harness_tools.run.scratch import InputFiles
from harness_tools.task.checking_rules import mismatch_budget
from harness_tools.task.expressions import evaluate_expression
from harness_tools.task.folder_digest import folder_digest
from harness_tools.task.spec import Case, StoredReference, Task

EXACT_DTYPES = ("float64", "int32", "int64", "uint32", "uint64")
WITH_REST = ("float32",)
REL_BOUND = {"exact": 0.0, "rest": 2.0 ** -32, "float32": 2.0 ** -23}
ABS_BOUND = {"exact": 0.0, "rest": 2.0 ** -133, "float32": 2.0 ** -148}
FLOAT32_MAX = float(np.finfo(np.float32).max)
CHUNK = 1 << 20  # elements per pass while splitting: a 4096² output is then 16 chunks over the threads (at 1 << 24
# it was one, 0.33-0.36 s on the H100 host, on the critical path of every new seed's first evaluation)
FILES = InputFiles()


TIGHT_RTOL = 2.0 ** -18


def form_of(dtype: str, atol: float = 1.0, rtol: float = 1.0) -> str:
    """'exact', 'rest' (float32 plus a bfloat16 rest) or 'float32' (float32 alone), for an output of ``dtype``
    judged with this tolerance (a tight one needs the exact reference: see the module docstring)."""
    tight = (atol == 0 and rtol < TIGHT_RTOL) or 0 < rtol < TIGHT_RTOL
    if dtype in EXACT_DTYPES or tight:
        return "exact"
    return "rest" if dtype in WITH_REST else "float32"


def reference_key(task: Task, case: Case, seed: int) -> str:
    """Names one case's oracle outputs: the task folder's content (a run's copy shares it), its whole spec (inputs
    follow from it), the case and the seed."""
    ref = task.spec.reference
    spec = hashlib.sha256(task.spec.model_dump_json().encode()).hexdigest()[:24]
    seed = 0 if isinstance(ref, StoredReference) else seed
    return f"{folder_digest(task.folder)[:24]}|{spec}|{case.name}|{seed}"


def form_state(task: Task, case: Case, seed: int, names: list[str]) -> str:
    """Where the device form of ``names`` for ``case`` on ``seed`` stands: "kept", "being made" (its files being
    written by another thread) or "absent"."""
    key = (reference_key(task, case, seed), tuple(names))
    if FILES.cached(key) is not None:
        return "kept"
    return "being made" if FILES.being_made(key) else "absent"


def device_checks(task: Task, case: Case, seed: int, names: list[str],
                  expected: Callable[[], dict[str, np.ndarray]]) -> dict[str, DeviceCheck]:
    """The DeviceCheck of each output in ``names`` that has a device form; ``expected()`` (the float64 oracle) is
    called only when the files of this case and seed are not kept yet."""
    key = reference_key(task, case, seed)
    buffers = {b.name: b for b in task.spec.outputs if b.name in names}
    tolerances = {}
    for name, buf in buffers.items():
        tolerance = task.spec.tolerance_for(buf.dtype)
        tolerances[name] = (float(evaluate_expression(tolerance.atol, case.sizes)), float(tolerance.rtol))
    forms = {name: form_of(buf.dtype, *tolerances[name]) for name, buf in buffers.items()}
    # written once per key: a draw made ahead and the evaluation that caught up with it do not both write it
    files = FILES.cached_or_stored((key, tuple(names)), lambda folder: _write(folder, expected(), forms))
    checks = {}
    for name, buf in buffers.items():
        if f"{name}.hi" not in files:
            continue  # no device form: compared on the host
        form = forms[name]
        checks[name] = DeviceCheck(key=f"{key}|{name}", hi_file=str(files[f"{name}.hi"]),
                                   lo_file=str(files[f"{name}.lo"]) if f"{name}.lo" in files else None,
                                   atol=tolerances[name][0], rtol=tolerances[name][1],
                                   max_mismatches=mismatch_budget(buf, case.sizes), rel_bound=REL_BOUND[form],
                                   abs_bound=ABS_BOUND[form], bins=bin_grid(task.spec.shape_of(buf, case.sizes)))
    return checks


def _write(folder: Path, reference: dict[str, np.ndarray], forms: dict[str, str]) -> dict[str, Path]:
    files: dict[str, Path] = {}
    for name, form in forms.items():
        parts = split(reference[name], form, folder / f"ref_{name}")
        if parts is not None:
            files.update({f"{name}.{part}": path for part, path in parts.items()})
    return files


def split(reference: np.ndarray, form: str, stem: Path) -> dict[str, Path] | None:
    """Write ``reference`` (float64) in ``form`` to ``stem``.hi.npy (and .lo.npy); None when it has no such form.
    Chunks are split on several cores (NumPy releases the GIL): 1.6e9 elements took a minute on one."""
    flat = np.ascontiguousarray(reference).reshape(-1)
    if form == "exact":
        path = stem.with_suffix(".hi.npy")
        np.save(path, flat.astype(np.float64, copy=False))
        return {"hi": path}
    paths = {"hi": stem.with_suffix(".hi.npy")} | ({"lo": stem.with_suffix(".lo.npy")} if form == "rest" else {})
    hi = np.lib.format.open_memmap(paths["hi"], mode="w+", dtype=np.float32, shape=flat.shape)
    lo = np.lib.format.open_memmap(paths["lo"], mode="w+", dtype=np.uint16, shape=flat.shape) if "lo" in paths else None

    def one(start: int) -> bool:
        """Split one chunk; False when it holds a finite value float32 cannot."""
        part = flat[start : start + CHUNK]
        with np.errstate(over="ignore", invalid="ignore"):
            rounded = part.astype(np.float32)
            if np.isinf(rounded).any() and (np.isinf(rounded) & np.isfinite(part)).any():
                return False
            hi[start : start + part.size] = rounded
            if lo is not None:
                rest = (part - rounded).astype(np.float32)
                rest[~np.isfinite(rest)] = 0.0  # non-finite references: hi holds them exactly
                lo[start : start + part.size] = bfloat16_bits(rest)
        return True
    workers = max(1, min(8, os.cpu_count() or 1))
    with ThreadPoolExecutor(workers, thread_name_prefix="cudaopt-split") as pool:
        fits = all(pool.map(one, range(0, flat.size, CHUNK)))
    hi.flush()
    if lo is not None:
        lo.flush()
    if not fits:  # an open mapping does not keep a removed file's name
        for path in paths.values():
            path.unlink(missing_ok=True)
        return None
    return paths


def bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (to nearest, ties to even), as their 16 bits (finite values only)."""
    bits = values.astype(np.float32).view(np.uint32)
    return ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)


def from_form(hi: np.ndarray, lo: np.ndarray | None) -> np.ndarray:
    """The float64 values a device form stands for (what the device compares with)."""
    value = hi.astype(np.float64)
    if lo is not None:
        value += (lo.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    return value
