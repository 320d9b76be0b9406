"""One case, prepared for a backend: its inputs (drawn for a seed or stored, saved once as files), the
kernel's arguments, and the :class:`~harness_tools.backends.contract.CaseRequest` itself.

Every path that launches a candidate (evaluation, the reference kernel, ncu and compute-sanitizer) builds
its request here, so they cannot drift apart.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from harness_tools.backends.contract import ArgSpec, CaseRequest, Placement
from harness_tools.check.generated_inputs import generated_inputs
from harness_tools.check.inputs import draw_inputs, scalar_arguments, stored_inputs
from harness_tools.run.scratch import CACHE as INPUT_FILES
from harness_tools.run.timing import TimingPlan
from harness_tools.task.candidate import Candidate
from harness_tools.task.dtypes import as_dtype
from harness_tools.task.spec import Case, ScalarParam, Task

Launch = tuple[tuple[int, int, int], tuple[int, int, int], int]  # grid, block, dynamic shared memory bytes


def case_request(candidate: Candidate, cubin: bytes | None, launch: Launch, args: list[ArgSpec], output_dir: Path,
                 timing: TimingPlan | None = None, placement: Placement = "tail") -> CaseRequest:
    """The request that runs ``candidate`` (compiled to ``cubin``) once with ``args``, timed by ``timing``.

    ``placement``: "guard" for validation cases (every buffer ends at an inaccessible page, so reads and writes
    just past an end fault), "tail" where the buffers must sit as cudaMalloc puts them (timed cases, the
    reference kernel, external tools); see :data:`harness_tools.backends.contract.Placement`."""
    grid, block, shared = launch
    return CaseRequest(kernel_name=candidate.kernel_name, cubin=cubin or b"", source=candidate.source,
                       defines={k: str(v) for k, v in candidate.defines.items()}, options=list(candidate.options),
                       grid=grid, block=block, shared_mem=shared, args=args, timing=timing, output_dir=str(output_dir),
                       placement=placement)


def placement_for(role: str) -> Placement:
    """Validation cases run guarded; performance cases keep the placement their timings are taken in."""
    return "guard" if role == "validation" else "tail"


def case_inputs(task: Task, case: Case, seed: int) -> tuple[dict[str, np.ndarray], dict[str, Path]]:
    """(arrays, files) of a case's inputs for ``seed`` (the task's stored ones, or built by its generator: ``inputs``),
    saved once per spec/case/seed."""
    digest = hashlib.sha256(task.spec.model_dump_json().encode()).hexdigest()

    def draw() -> dict[str, np.ndarray]:
        stored = stored_inputs(task, case)
        if stored is not None:
            return stored
        return generated_inputs(task, case, seed) if task.spec.inputs else draw_inputs(task.spec, case, seed)
    arrays, files = INPUT_FILES.get((str(task.folder), digest, case.name, seed), draw)
    dtypes = {b.name: b.dtype for b in task.spec.buffers}
    return {name: as_dtype(arr, dtypes[name]) for name, arr in arrays.items()}, files  # cached files say |V2 for bf16


def case_arguments(task: Task, case: Case, input_files: dict[str, Path]) -> list[ArgSpec]:
    """The kernel's arguments for one case: buffers (inputs from their files) and scalar values."""
    spec = task.spec
    scalars = scalar_arguments(spec, case.sizes)
    args = []
    for p in spec.params:
        if isinstance(p, ScalarParam):
            args.append(ArgSpec(name=p.name, kind="scalar", dtype=p.dtype, value=scalars[p.name]))
        else:
            args.append(ArgSpec(name=p.name, kind="buffer", dtype=p.dtype, shape=list(spec.shape_of(p, case.sizes)),
                                role=p.role, initial=p.initial,
                                input_file=str(input_files[p.name]) if p.role != "out" else None))
    return args
