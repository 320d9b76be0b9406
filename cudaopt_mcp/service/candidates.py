"""Candidates in a run: built from what a caller gives over the task's baseline, registered (one id per
distinct content), loaded, and compiled into their folder.

Like every service module: plain blocking functions over :class:`ServerState` (no MCP here); each takes the
run's lock; bad arguments and unknown ids raise (:class:`~cudaopt_mcp.errors.StepRefused`,
:class:`~cudaopt_mcp.errors.RunError`, :class:`~harness_tools.errors.HarnessError`); kernel failures are data.
"""

from __future__ import annotations

import json
import time

from pydantic import ValidationError

from cudaopt_mcp.api import (
    CompileOutput,
)
from cudaopt_mcp.errors import StepRefused
from cudaopt_mcp.service import views as S
from cudaopt_mcp.service.arguments import CandidateArgs
from cudaopt_mcp.service.state import ServerState
from harness_tools import Candidate, CompileResult, Task, compile_candidate
from harness_tools.compile.case_variants import compile_variants
from harness_tools.errors import CandidateError
from harness_tools.task import candidate as candidates


def build_candidate(task: Task, args: CandidateArgs) -> Candidate:
    """The task's baseline (or tunable kernel), with what the caller gave replacing or adding to it."""
    source, launch, defines, options, tunables = args.source, args.launch, args.defines, args.options, args.tunables
    if tunables is not None and source is not None:
        raise StepRefused("give either 'source' or 'tunables' (the task's own tunable kernel), not both")
    base = candidates.tuned(task, tunables) if tunables is not None else candidates.baseline(task)
    fields = base.model_dump()
    if source is not None:
        fields["source"] = source
    if args.kernel is not None:
        fields["kernel_name"] = args.kernel
    if launch is not None and args.launches is not None:
        raise StepRefused("give either 'launch' (one launch) or 'launches' (a sequence), not both")
    if launch is not None:  # one launch replaces the base's sequence and its scratch
        fields.update(launch=launch.model_dump(), launches=None, scratch=[])
    if args.launches is not None:
        fields.update(launch=None, launches=[step.model_dump() for step in args.launches])
    if args.scratch is not None:
        fields["scratch"] = [buf.model_dump() for buf in args.scratch]
    if defines:
        fields["defines"] = {**fields["defines"], **defines}
    if options:  # added to the base's own (a tunable kernel's '--arch-specific' stays)
        fields["options"] = list(dict.fromkeys([*fields["options"], *options]))
    try:
        return Candidate.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'candidate'}: {e['msg']}" for e in exc.errors())
        raise StepRefused(f"invalid candidate: {problems}") from None


def register_candidate(state: ServerState, run_id: str, task: Task, cand: Candidate, note: str | None,
              tunables: dict[str, int] | None = None) -> tuple[str, bool]:
    """(candidate id, reused) for ``cand`` in this run; call under the run's lock."""
    store = state.store
    digest = cand.digest()
    existing = store.find_candidate(run_id, digest)
    if existing is not None:
        return existing, True
    record = store.run(run_id)
    used = len(store.candidate_ids(run_id))
    if record.max_candidates is not None and used >= record.max_candidates:
        raise StepRefused(f"run {run_id} has used its budget of {record.max_candidates} candidates; evaluate an "
                          "existing candidate_id again or create a new run")
    candidate_id, _ = store.new_candidate(run_id)
    meta = {"candidate_id": candidate_id, "digest": digest, "created": time.time(), "note": note, "tunables": tunables,
            "baseline": digest == candidates.baseline(task).digest(), "candidate": cand.model_dump()}
    store.write_artifact(run_id, candidate_id, "kernel.cu", cand.source)
    store.write_artifact(run_id, candidate_id, "candidate.json", json.dumps(meta, indent=2))
    store.append_history(run_id, {"event": "candidate", "candidate_id": candidate_id, "digest": digest,
                                  **({"note": note[:200]} if note else {})})
    return candidate_id, False


def load_candidate(state: ServerState, run_id: str, candidate_id: str) -> Candidate:
    meta = state.store.read_json(run_id, candidate_id, "candidate.json")
    if not meta:
        raise StepRefused(f"candidate {candidate_id} of {run_id} was never completely stored; compile it again")
    return Candidate.model_validate(meta["candidate"])


def compile_stored(state: ServerState, run_id: str, candidate_id: str, cand: Candidate,
             timeout_s: float | None = None) -> CompileResult:
    """Compile a registered candidate and keep the record (the caller has claimed it: ``state.working``)."""
    result = compile_for_task(state, state.store.task(run_id), cand, timeout_s)
    record_compile(state, run_id, candidate_id, result)
    return result


def compile_for_task(state: ServerState, task: Task, cand: Candidate, timeout_s: float | None = None,
                     urgent: bool = True) -> CompileResult:
    """NVRTC for this server's GPU; needs no lock (the compile cache is shared by threads and processes).
    ``urgent=False``: the compile step, which a client calls ahead of the evaluation (an evaluation's compiles, and
    a hidden check's, get a compiler child first)."""
    arch = state.device_info().arch
    if task.spec.size_defines:  # every case's compile at once (an evaluation then finds them all); the first's is the answer
        compiled = compile_variants(cand, task, task.spec.cases_for(["validation", "performance"], state.backend_name),
                                    arch, timeout_s, urgent)
        if compiled:
            return compiled[0]
    try:  # a task with per-case size_defines: the compile its first case gets
        cand = candidates.for_case(cand, task, task.spec.cases[0].sizes)
    except CandidateError:
        pass  # the candidate sets a define the task sets per case: evaluating it says so
    return compile_candidate(cand, arch, timeout_s=timeout_s, urgent=urgent)


def record_compile(state: ServerState, run_id: str, candidate_id: str, result: CompileResult) -> None:
    store = state.store
    store.write_artifact(run_id, candidate_id, "compile.log", result.full_log)
    store.write_artifact(run_id, candidate_id, "compile.json", result.model_dump_json(indent=2))
    store.append_history(run_id, {"event": "compiled", "candidate_id": candidate_id, "status": result.status})


def compile_step(state: ServerState, run_id: str, args: CandidateArgs, note: str | None) -> CompileOutput:
    with state.store.locked(run_id):
        task = state.store.task(run_id)
        cand = build_candidate(task, args)
        candidate_id, reused = register_candidate(state, run_id, task, cand, note, args.tunables)
    with state.working(run_id, candidate_id):
        # NVRTC outside the run's lock, which an evaluation holds throughout: a client compiles its next candidate
        # while the current one runs, and that evaluation then finds the cubin in the cache
        result = compile_for_task(state, task, cand, urgent=False)
        with state.store.locked(run_id):
            record_compile(state, run_id, candidate_id, result)
    return compile_output(run_id, candidate_id, result, reused)


def compile_output(run_id: str, candidate_id: str, result: CompileResult, reused: bool) -> CompileOutput:
    r = result.resources
    return CompileOutput(
        run_id=run_id, candidate_id=candidate_id, ok=result.ok, status=result.status, arch=result.arch,
        first_error=None if result.ok else S.first_error(result.log), log_excerpt=S.excerpt(result.log),
        log_truncated=len(result.full_log.strip()) > S.EXCERPT_CHARS, registers=r.registers if r else None,
        spill_store_bytes=r.spill_store_bytes if r else None, spill_load_bytes=r.spill_load_bytes if r else None,
        stack_bytes=r.stack_bytes if r else None, static_shared_bytes=r.static_shared_bytes if r else None,
        compile_ms=result.compile_ms, cached=result.cached, reused=reused,
        source_uri=S.artifact_uri(run_id, candidate_id, "kernel.cu"),
        log_uri=S.artifact_uri(run_id, candidate_id, "compile.log"),
    )
