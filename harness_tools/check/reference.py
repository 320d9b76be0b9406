"""The oracle: expected outputs for one case, from a NumPy function, a reference kernel or stored arrays.

NumPy references get every input upcast to float64 (ints to int64) and return float64 outputs.
A reference kernel is compiled and run by the same engine as the candidate. Stored references come
with their own fixed inputs. Results are cached per (task, reference, case, seed), bounded in bytes,
so repeated evaluations on one seed do not recompute an expensive oracle.
"""

from __future__ import annotations

import importlib.util
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Callable

import numpy as np

from harness_tools.backends import ExecutionBackend
from harness_tools.backends.contract import ArgSpec
from harness_tools.check.case_request import case_request
from harness_tools.check.inputs import reference_inputs
from harness_tools.compile import compile_candidate
from harness_tools.errors import TaskSpecError
from harness_tools.task.candidate import Candidate
from harness_tools.task.dtypes import as_dtype
from harness_tools.task.spec import Case, KernelReference, NumpyReference, StoredReference, Task

CACHE_BYTES = 2 << 30

RunArgs = Callable[[Case], list[ArgSpec]]


class ReferenceCache:
    def __init__(self, max_bytes: int = CACHE_BYTES):
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple, dict[str, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple) -> dict[str, np.ndarray] | None:
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
            return hit

    def put(self, key: tuple, outputs: dict[str, np.ndarray]) -> None:
        size = sum(a.nbytes for a in outputs.values())
        if size > self.max_bytes:
            return
        with self._lock:
            self._entries[key] = outputs
            while sum(a.nbytes for v in self._entries.values() for a in v.values()) > self.max_bytes:
                self._entries.popitem(last=False)


CACHE = ReferenceCache()


def expected_outputs(task: Task, case: Case, seed: int, inputs: dict[str, np.ndarray], backend: ExecutionBackend,
                     args: list[ArgSpec], scratch: Path, arch: str, timeout_s: float) -> dict[str, np.ndarray]:
    """float64 outputs of the oracle for ``case`` on ``inputs`` (drawn from ``seed``)."""
    ref = task.spec.reference
    key = (str(task.folder), ref.model_dump_json(), case.name, seed if not isinstance(ref, StoredReference) else 0)
    cached = CACHE.get(key)
    if cached is not None:
        return cached
    if isinstance(ref, StoredReference):
        folder = task.folder / ref.dir / case.name
        outputs = {b.name: as_dtype(np.load(folder / f"{b.name}.npy"), b.dtype).astype(np.float64)
                   for b in task.spec.outputs}
    elif isinstance(ref, NumpyReference):
        outputs = _run_numpy(task, ref, case, inputs)
    else:
        outputs = _run_kernel(task, ref, case, backend, args, scratch, arch, timeout_s)
    CACHE.put(key, outputs)
    return outputs


def _run_numpy(task: Task, ref: NumpyReference, case: Case, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    where = str(task.folder / ref.file)
    returned = _numpy_function(task, ref)(reference_inputs(task.spec, case, inputs), dict(case.sizes))
    if not isinstance(returned, dict):
        raise TaskSpecError(where, ref.function, f"must return a dict of arrays, returned {type(returned).__name__}")
    outputs = {}
    for buf in task.spec.outputs:
        if buf.name not in returned:
            raise TaskSpecError(where, ref.function, f"did not return output {buf.name!r}")
        arr = np.asarray(returned[buf.name], dtype=np.float64)
        shape = task.spec.shape_of(buf, case.sizes)
        if arr.shape != shape:
            raise TaskSpecError(where, ref.function, f"returned {buf.name} with shape {arr.shape}, expected {shape}")
        outputs[buf.name] = arr
    return outputs


def _run_kernel(task: Task, ref: KernelReference, case: Case, backend: ExecutionBackend, args: list[ArgSpec],
                scratch: Path, arch: str, timeout_s: float) -> dict[str, np.ndarray]:
    where = str(task.folder / ref.source)
    cand = Candidate(source=task.read(ref.source), kernel_name=ref.kernel, launch=ref.launch, defines=dict(ref.defines))
    compiled = compile_candidate(cand, arch)
    if not compiled.ok:
        raise TaskSpecError(where, "reference", f"reference kernel does not compile:\n{compiled.log}")
    request = case_request(cand, compiled.cubin, cand.launch_dims(case.sizes), args, scratch / "reference")
    run = backend.run_case(request, timeout_s)
    if run.status != "ok" or run.overruns or run.modified_inputs:
        problem = run.message or f"overran {run.overruns}, modified {run.modified_inputs}"
        raise TaskSpecError(where, "reference", f"reference kernel failed on case {case.name}: {problem}")
    dtypes = {b.name: b.dtype for b in task.spec.outputs}
    return {name: as_dtype(np.load(path), dtypes[name]).astype(np.float64) for name, path in run.outputs.items()}


_FUNCTIONS: dict[tuple[str, str, int], Callable] = {}


def _numpy_function(task: Task, ref: NumpyReference) -> Callable:
    """Import ``reference.py`` from the task folder (it is Python: local task folders only)."""
    path = task.folder / ref.file
    key = (str(path), ref.function, path.stat().st_mtime_ns)
    if key not in _FUNCTIONS:
        module_spec = importlib.util.spec_from_file_location(f"cudaopt_reference_{task.name}", path)
        module = importlib.util.module_from_spec(module_spec)
        try:
            module_spec.loader.exec_module(module)
        except Exception as exc:
            raise TaskSpecError(str(path), "-", f"cannot import: {type(exc).__name__}: {exc}") from None
        fn = getattr(module, ref.function, None)
        if not callable(fn):
            raise TaskSpecError(str(path), "reference.function", f"no function {ref.function!r} in {ref.file}")
        _FUNCTIONS[key] = fn
    return _FUNCTIONS[key]
