"""The oracle: expected outputs for one case, from a NumPy or torch function, a reference kernel or stored arrays.

NumPy references get every input upcast to float64 (ints to int64) and return float64 outputs; torch
references get the same values as CPU tensors (:mod:`harness_tools.check.torch_reference`; torch is an
optional extra, imported only when one runs). Either function is read from the task folder on first use
(:mod:`harness_tools.check.task_functions`). A reference kernel is compiled and run by the same engine as the
candidate. Stored references come with their own fixed inputs. Results are cached per (task, reference, case,
seed), bounded in bytes, so repeated evaluations on one seed do not recompute an expensive oracle.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from harness_tools.backends import ExecutionBackend
from harness_tools.backends.contract import ArgSpec
from harness_tools.check.case_request import case_request
from harness_tools.check.inputs import reference_inputs
from harness_tools.check.task_functions import call_task_function
from harness_tools.check.torch_reference import run_torch
from harness_tools.compile import compile_candidate
from harness_tools.errors import CandidateError, TaskSpecError
from harness_tools.task.candidate import Candidate, for_case
from harness_tools.task.dtypes import as_dtype
from harness_tools.task.spec import Case, KernelReference, NumpyReference, StoredReference, Task, TorchReference

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
        returned = call_task_function(task, ref.file, ref.function, "reference.function",
                                      reference_inputs(task.spec, case, inputs), dict(case.sizes))
        outputs = _checked_outputs(task, ref, case, returned)
    elif isinstance(ref, TorchReference):
        outputs = _checked_outputs(task, ref, case, run_torch(task, ref, case, inputs))
    else:
        outputs = _run_kernel(task, ref, case, backend, args, scratch, arch, timeout_s)
    CACHE.put(key, outputs)
    return outputs


def _checked_outputs(task: Task, ref: NumpyReference | TorchReference, case: Case, returned: object) -> dict[str, np.ndarray]:
    """A Python reference's result as float64 arrays: a dict holding every output in the spec's shape."""
    where = str(task.folder / ref.file)
    if not isinstance(returned, dict):
        raise TaskSpecError(where, "reference.function", f"{ref.function}() must return a dict of arrays, returned "
                                                         f"{type(returned).__name__}")
    outputs = {}
    for buf in task.spec.outputs:
        if buf.name not in returned:
            raise TaskSpecError(where, "reference.function", f"{ref.function}() did not return output {buf.name!r}")
        try:
            arr = np.asarray(returned[buf.name], dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TaskSpecError(where, "reference.function", f"{ref.function}() returned {buf.name} that is not an array "
                                                             f"of numbers: {exc}") from None
        shape = task.spec.shape_of(buf, case.sizes)
        if arr.shape != shape:
            raise TaskSpecError(where, "reference.function", f"{ref.function}() returned {buf.name} with shape "
                                                             f"{arr.shape}, expected {shape}")
        outputs[buf.name] = arr
    return outputs


def _run_kernel(task: Task, ref: KernelReference, case: Case, backend: ExecutionBackend, args: list[ArgSpec],
                scratch: Path, arch: str, timeout_s: float) -> dict[str, np.ndarray]:
    where = str(task.folder / ref.source)
    cand = Candidate(source=task.read(ref.source), kernel_name=ref.kernel, launch=ref.launch, defines=dict(ref.defines))
    try:
        cand = for_case(cand, task, case.sizes)
    except CandidateError as exc:
        raise TaskSpecError(where, "reference.defines", str(exc)) from None
    compiled = compile_candidate(cand, arch)
    if not compiled.ok:
        raise TaskSpecError(where, "reference", f"reference kernel does not compile:\n{compiled.log}")
    request = case_request(cand, compiled, case.sizes, args, scratch / "reference")
    run = backend.run_case(request, timeout_s)
    if run.status != "ok" or run.overruns or run.modified_inputs:
        problem = run.message or f"overran {run.overruns}, modified {run.modified_inputs}"
        raise TaskSpecError(where, "reference", f"reference kernel failed on case {case.name}: {problem}")
    dtypes = {b.name: b.dtype for b in task.spec.outputs}
    return {name: as_dtype(np.load(path), dtypes[name]).astype(np.float64) for name, path in run.outputs.items()}
