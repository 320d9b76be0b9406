"""One case, prepared for a backend: its inputs (drawn for a seed or stored, saved once as files), the
kernel's arguments, and the :class:`~harness_tools.backends.contract.CaseRequest` itself.

Every path that launches a candidate (evaluation, the reference kernel, ncu and compute-sanitizer) builds
its request here, so they cannot drift apart.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from harness_tools.backends.contract import ArgSpec, CaseRequest, KernelLaunch, Placement
from harness_tools.check.generated_inputs import generated_inputs
from harness_tools.check.inputs import draw_inputs, scalar_arguments, stored_inputs
from harness_tools.compile import CompileResult
from harness_tools.errors import CandidateError, ExpressionError
from harness_tools.run.scratch import CACHE as INPUT_FILES
from harness_tools.run.scratch import Allocate, ReadOnFirstUse
from harness_tools.run.timing import TimingPlan
from harness_tools.task.candidate import Candidate
from harness_tools.task.dtypes import as_dtype, numpy_dtype, storable
from harness_tools.task.expressions import Number, evaluate_expression
from harness_tools.task.folder_digest import folder_digest
from harness_tools.task.launches import MIN_SCRATCH_LIMIT, ArgRef, ScalarValue, scratch_limit
from harness_tools.task.spec import Case, ScalarParam, Task


def case_request(candidate: Candidate, compiled: CompileResult | None, sizes: dict[str, int], args: list[ArgSpec],
                 output_dir: Path, timing: TimingPlan | None = None, placement: Placement = "tail",
                 max_shared_bytes: int | None = None, owner: str = "") -> CaseRequest:
    """The request that runs ``candidate`` (compiled as ``compiled``) once on a case with these ``sizes`` and the
    task's ``args`` (:func:`case_arguments`), timed by ``timing``.

    Its launches, scratch buffers and computed scalar arguments are resolved here; anything the candidate got
    wrong (a launch outside CUDA's limits, an argument that names nothing, a scratch buffer too large) raises
    :class:`~harness_tools.errors.CandidateError` naming the field. ``placement``: "guard" for validation cases
    (every buffer ends at an inaccessible page, so reads and writes just past an end fault), "tail" where the
    buffers must sit as cudaMalloc puts them (timed cases, the reference kernel, external tools); see
    :data:`harness_tools.backends.contract.Placement`. ``owner``: see :attr:`CaseRequest.owner`."""
    plan = candidate.launch_plan(sizes, max_shared_bytes)
    names = candidate.variables(sizes)
    args = list(args) + scratch_arguments(candidate, names, args)
    index = {a.name: i for i, a in enumerate(args)}
    signature = [i for i, a in enumerate(args) if a.role != "scratch" and a.constant is None]
    symbols = compiled.lowered_names if compiled is not None else {}
    launches = []
    for step, ((kernel, (grid, block, shared)), (_, _, refs)) in enumerate(zip(plan, candidate.steps())):
        order = signature if refs is None else [_argument(ref, f"launches.{step}.args.{j}", args, index, names)
                                                for j, ref in enumerate(refs)]
        launches.append(KernelLaunch(kernel_name=kernel, symbol=symbols.get(kernel, kernel), grid=grid, block=block,
                                     shared_mem=shared, args=order))
    return CaseRequest(cubin=(compiled.cubin if compiled is not None else None) or b"", source=candidate.source,
                       defines={k: str(v) for k, v in candidate.defines.items()}, options=list(candidate.options),
                       launches=launches, args=args, timing=timing, output_dir=str(output_dir), placement=placement,
                       owner=owner)


def request_owner(task: Task, candidate: Candidate) -> str:
    """Whose code ``candidate``'s requests run (:attr:`CaseRequest.owner`): its digest before per-case defines, with
    ``task``'s case names, so that its hidden cases (a task of their own) never share a worker with its visible ones."""
    cases = hashlib.sha256(",".join(c.name for c in task.spec.cases).encode()).hexdigest()[:12]
    return f"{candidate.digest()}:{cases}"


def _argument(ref: ArgRef, field: str, args: list[ArgSpec], index: dict[str, int], names: dict[str, Number]) -> int:
    """Index of the argument ``ref`` names (a computed scalar is appended to ``args``)."""
    if isinstance(ref, ScalarValue):
        try:
            value = evaluate_expression(ref.value, names)
        except (ExpressionError, ArithmeticError, ValueError) as exc:
            raise CandidateError(f"{field}: {exc}") from None
        value = float(value) if ref.floating else _integral(value, field)
        args.append(ArgSpec(name=field, kind="scalar", dtype=ref.dtype, value=value))
        return len(args) - 1
    if ref not in index:
        known = [a.name for a in args if a.constant is None and not a.name.startswith("launches.")]
        raise CandidateError(f"{field}: {ref!r} is neither a param of the task nor a scratch buffer (known: {known})")
    if args[index[ref]].constant is not None:
        raise CandidateError(f"{field}: {ref!r} fills __constant__ symbol {args[index[ref]].constant!r}; it is not a "
                             "kernel argument")
    return index[ref]


def _integral(value: Number, field: str) -> int:
    if int(value) != value:
        raise CandidateError(f"{field}: an integer argument evaluates to {value}")
    return int(value)


def scratch_arguments(candidate: Candidate, names: dict[str, Number], task_args: list[ArgSpec]) -> list[ArgSpec]:
    """The candidate's scratch buffers for one case, sized and bounded (:func:`~harness_tools.task.launches.scratch_limit`)."""
    if not candidate.scratch:
        return []
    taken = {a.name for a in task_args}
    task_bytes = sum(_nbytes(a.dtype, a.shape) for a in task_args if a.kind == "buffer")
    limit, total, out = scratch_limit(task_bytes), 0, []
    for i, buf in enumerate(candidate.scratch):
        field = f"scratch.{i} ({buf.name})"
        if buf.name in taken:
            raise CandidateError(f"{field}: the name of a task param; rename the scratch buffer")
        try:
            count = _integral(evaluate_expression(buf.count, names), field)
        except ExpressionError as exc:
            raise CandidateError(f"{field}: count: {exc}") from None
        if count < 1:
            raise CandidateError(f"{field}: count {count} is not positive")
        total += _nbytes(buf.dtype, [count])
        if total > limit:
            raise CandidateError(f"{field}: scratch buffers need {total} bytes in this case; a program may use at most "
                                 f"{limit} ({limit / 2**20:.0f} MiB: twice the task's buffers, at least "
                                 f"{MIN_SCRATCH_LIMIT >> 20} MiB)")
        out.append(ArgSpec(name=buf.name, kind="buffer", dtype=buf.dtype, shape=[count], role="scratch",
                           initial=buf.initial))
    return out


def _nbytes(dtype: str, shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n * numpy_dtype(dtype).itemsize


def placement_for(role: str) -> Placement:
    """Validation cases run guarded; performance cases keep the placement their timings are taken in."""
    return "guard" if role == "validation" else "tail"


def case_inputs(task: Task, case: Case, seed: int) -> tuple[Mapping[str, np.ndarray], dict[str, Path]]:
    """(arrays, files) of a case's inputs for ``seed`` (the task's stored ones, or built by its generator: ``inputs``),
    saved once per spec/case/seed."""
    digest = hashlib.sha256(task.spec.model_dump_json().encode()).hexdigest()

    def draw(allocate: Allocate) -> dict[str, np.ndarray]:
        stored = stored_inputs(task, case)
        if stored is None:
            stored = (generated_inputs(task, case, seed) if task.spec.inputs
                      else draw_inputs(task.spec, case, seed, allocate))
        return {name: storable(arr) for name, arr in stored.items()}  # fp8/bf16 as raw records np.load reads back
    arrays, files = INPUT_FILES.get((folder_digest(task.folder), digest, case.name, seed), draw)  # a run's copy shares it
    dtypes = {b.name: b.dtype for b in task.spec.buffers}  # kept files say |V2 for bf16: each converted when read
    return ReadOnFirstUse(arrays, lambda name: as_dtype(arrays[name], dtypes[name])), files


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
                                role=p.role, initial=p.initial, constant=p.constant,
                                input_file=str(input_files[p.name]) if p.role != "out" else None))
    return args
