"""The oracle: expected outputs for one case, from a NumPy or torch function, a reference kernel or stored arrays.

NumPy references get every input upcast to float64 (ints to int64) and return float64 outputs; torch
references get the same values as CPU tensors (:mod:`harness_tools.check.torch_reference`; torch is an
optional extra, imported only when one runs). Either function is read from the task folder on first use
(:mod:`harness_tools.check.task_functions`). A reference kernel is compiled and run by the same engine as the
candidate. Stored references come with their own fixed inputs. Results are cached per (task, reference, case,
seed), bounded in bytes, so repeated evaluations on one seed do not recompute an expensive oracle.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from harness_tools.backends import ExecutionBackend
from harness_tools.backends.contract import ArgSpec
from harness_tools.check.case_request import case_request
from harness_tools.check.numpy_reference import checked_outputs, numpy_outputs
from harness_tools.check.reference_process import REFERENCES, computed_away
from harness_tools.check.torch_reference import run_torch
from harness_tools.compile import compile_candidate
from harness_tools.errors import CandidateError, ReferenceProcessError, TaskSpecError
from harness_tools.run.host_blas import HOST_BLAS
from harness_tools.run.keyed_locks import KeyedLocks
from harness_tools.task.candidate import Candidate, for_case
from harness_tools.task.dtypes import as_dtype
from harness_tools.task.folder_digest import folder_digest
from harness_tools.task.spec import Case, KernelReference, NumpyReference, StoredReference, Task, TorchReference

log = logging.getLogger("harness_tools")
CACHE_BYTES = 2 << 30

RunArgs = Callable[[Case], list[ArgSpec]]


class ReferenceCache:
    def __init__(self, max_bytes: int = CACHE_BYTES):
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple, dict[str, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()
        self._computing = KeyedLocks()

    def get_or_compute(self, key: tuple, compute: Callable[[], dict[str, np.ndarray]],
                       on_host: bool = True) -> dict[str, np.ndarray]:
        """The cached outputs of ``key``, else ``compute``'s (kept). A key being computed is computed once: a
        second caller waits for it; an ``on_host`` computation holds the process's BLAS (run.host_blas)."""
        cached = self.get(key)
        if cached is not None:
            return cached
        with self._computing.held(key), HOST_BLAS if on_host else contextlib.nullcontext():  # run.host_blas
            cached = self.get(key)
            if cached is None:
                cached = compute()
                self.put(key, cached)
            return cached

    def computing(self, key: tuple) -> bool:
        """Whether ``key`` is being computed now (by another thread: a seed's draw made ahead, say)."""
        return self._computing.busy(key)

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
                     args: list[ArgSpec], scratch: Path, arch: str, timeout_s: float,
                     files: dict[str, Path] | None = None) -> dict[str, np.ndarray]:
    """float64 outputs of the oracle for ``case`` on ``inputs`` (drawn from ``seed``; kept in ``files``)."""
    ref = task.spec.reference
    host = host_expected_outputs(task, case, seed, inputs, files)
    if host is not None:
        return host
    assert isinstance(ref, KernelReference)
    return CACHE.get_or_compute(_key(task, case, seed),
                                lambda: _run_kernel(task, ref, case, backend, args, scratch, arch, timeout_s), on_host=False)


def host_expected_outputs(task: Task, case: Case, seed: int, inputs: dict[str, np.ndarray],
                          files: dict[str, Path] | None = None) -> dict[str, np.ndarray] | None:
    """:func:`expected_outputs` of a reference the host computes (NumPy, torch, stored arrays), no backend needed;
    None for a reference kernel (it runs on the backend). Given the input ``files``, a NumPy reference of a large
    case is computed in the reference process (:mod:`harness_tools.check.reference_process`)."""
    ref = task.spec.reference
    if isinstance(ref, KernelReference):
        return None
    if files is not None and computed_away(task, case, files):
        try:
            return CACHE.get_or_compute(_key(task, case, seed), lambda: REFERENCES.outputs(task, case, files),
                                        on_host=False)
        except ReferenceProcessError as exc:
            log.warning("computing the reference of %s here instead: %s", case.name, exc)
    return CACHE.get_or_compute(_key(task, case, seed), lambda: _host_outputs(task, ref, case, inputs))


def oracle_being_computed(task: Task, case: Case, seed: int) -> bool:
    """Whether the oracle of ``case`` on ``seed`` is not kept yet but being computed now."""
    key = _key(task, case, seed)
    return CACHE.get(key) is None and CACHE.computing(key)


def _key(task: Task, case: Case, seed: int) -> tuple:
    """What the oracle of a case depends on: the task folder's content (not its path: a run's copy shares it), the
    reference, the case and the seed (stored references have fixed inputs)."""
    ref = task.spec.reference
    return (folder_digest(task.folder), ref.model_dump_json(), case.name,
            seed if not isinstance(ref, StoredReference) else 0)


def _host_outputs(task: Task, ref: NumpyReference | TorchReference | StoredReference, case: Case,
                  inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    if isinstance(ref, StoredReference):
        folder = task.folder / ref.dir / case.name
        return {b.name: as_dtype(np.load(folder / f"{b.name}.npy"), b.dtype).astype(np.float64)
                for b in task.spec.outputs}
    if isinstance(ref, NumpyReference):
        return numpy_outputs(task, case, inputs)
    return checked_outputs(task, ref, case, run_torch(task, ref, case, inputs))


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
