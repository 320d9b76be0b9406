"""Bounded summaries of tasks, runs, candidates and engine results, for tool outputs.

Pure functions from stored records (or engine models) to :mod:`cudaopt_mcp.api`; nothing
here runs a kernel. Long text is cut to an excerpt; the whole of it stays behind a resource URI.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import numpy as np

from cudaopt_mcp.api import (
    BestInfo,
    BudgetInfo,
    CandidateBrief,
    CaseInfo,
    CaseOutcome,
    CompileBrief,
    MismatchInfo,
    ParamInfo,
    RunInfo,
    TaskSummary,
    ToleranceInfo,
    artifact_uri,  # also re-exported: steps, inspections and tools link artifacts as S.artifact_uri
    run_uri,
    task_file_uri,
)
from cudaopt_mcp.api_pages import OutputSummary, part_uri
from cudaopt_mcp.service.cancelled import CANCELLED_RECORD, cancelled_step
from cudaopt_mcp.service.runs import BestRecord, RunRecord, RunStore
from harness_tools.compile import CompileResult
from harness_tools.evaluation import CaseResult
from harness_tools.task.dtypes import as_dtype, is_bfloat16
from harness_tools.task.spec import CTYPES, BufferParam, Task, TaskSpec, Tolerance
from harness_tools.task.tunable_defaults import tunable_defaults

EXCERPT_CHARS = 1500
MESSAGE_CHARS = 400


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 40].rstrip() + f"\n… [{len(text) - limit + 40} more characters]"


def first_error(log: str) -> str | None:
    """The line that says what went wrong: an error or refusal, else the last line that is not ptxas' report
    (e.g. "kernel 'k' is not an entry point", appended after ptxas' "0 bytes gmem"), else the first line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in lines:
        if "error" in line.lower() or "refused" in line.lower():
            return line[:MESSAGE_CHARS]
    other = [line for line in lines if not line.startswith("ptxas")]
    return (other[-1] if other else lines[0])[:MESSAGE_CHARS] if lines else None


# ---- tasks -------------------------------------------------------------------------------------------
def signature(task: Task) -> str:
    """The signature a one-launch candidate must have; for a task whose baseline is a launch sequence, what each
    step passes is in its args, so this names the sequence and the task's arguments instead."""
    parts = []
    for p in task.spec.arguments:
        ctype = CTYPES[p.dtype]
        if isinstance(p, BufferParam):
            parts.append(f"{'const ' if p.role == 'in' else ''}{ctype}* {p.name}")
        else:
            parts.append(f"{ctype} {p.name}")
    if task.spec.baseline.launches is not None:
        kernels = ", ".join(dict.fromkeys(s.kernel or task.spec.kernel_name for s in task.spec.baseline.launches))
        return (f"a launch sequence of {kernels} (baseline_launches: each kernel takes the arguments its step's args "
                f"name, scratch buffers included); the task's arguments: {', '.join(parts)}")
    return f'extern "C" __global__ void {task.spec.kernel_name}({", ".join(parts)})'


def effective_tolerances(spec: TaskSpec) -> dict[str, Tolerance]:
    """The task's stated tolerances plus the dtype defaults its outputs use (docs/dtypes.md)."""
    used = {b.dtype: spec.tolerance_for(b.dtype) for b in spec.outputs}
    return {**{k: v for k, v in used.items() if v is not None}, **spec.tolerance}


def task_summary(task: Task, run_id: str) -> TaskSummary:
    spec = task.spec
    params = [ParamInfo(name=p.name, kind="buffer", dtype=p.dtype, role=p.role, shape=list(p.shape), initial=p.initial)
              if isinstance(p, BufferParam) else ParamInfo(name=p.name, kind="scalar", dtype=p.dtype, value=p.value)
              for p in spec.params]
    return TaskSummary(
        name=spec.name, description=spec.description, kernel_name=spec.kernel_name, signature=signature(task),
        params=params, cases=[CaseInfo(name=c.name, role=c.role, sizes=c.sizes, backends=c.backends) for c in spec.cases],
        tolerance={k: ToleranceInfo(atol=v.atol, rtol=v.rtol) for k, v in effective_tolerances(spec).items()},
        reference=spec.reference.kind, baseline_launch=spec.baseline.launch, baseline_defines=dict(spec.baseline.defines),
        baseline_kernel=spec.baseline.kernel, baseline_launches=spec.baseline.launches,
        baseline_scratch=list(spec.baseline.scratch), size_defines=dict(spec.size_defines),
        constants={b.name: b.constant for b in spec.constants if b.constant},
        tunables=dict(spec.tunables.params) if spec.tunables else None,
        tunable_constraints=list(spec.tunables.constraints) if spec.tunables else [],
        tunable_defaults=tunable_defaults(task.read(spec.tunables.source), spec.tunables.params)
        if spec.tunables else None,
        baseline_source_uri=task_file_uri(run_id, spec.baseline.source),
    )


# ---- candidates and runs ----------------------------------------------------------------------------
LATEST_RECORDS = ("evaluation.json", "execution.json", "timing.json")


def latest_record(folder: Path) -> tuple[str, dict[str, Any]] | None:
    """The newest of evaluation.json / execution.json / timing.json in a candidate folder."""
    found = [(folder / n).stat().st_mtime_ns for n in LATEST_RECORDS if (folder / n).is_file()]
    if not found:
        return None
    names = [n for n in LATEST_RECORDS if (folder / n).is_file()]
    name = max(zip(found, names))[1]
    return name, json.loads((folder / name).read_text())


def candidate_brief(store: RunStore, run_id: str, candidate_id: str, active: bool) -> CandidateBrief:
    folder = store.candidate_dir(run_id, candidate_id)
    meta = read_json_file(folder / "candidate.json") or {}
    compiled = read_json_file(folder / "compile.json")
    brief = CandidateBrief(candidate_id=candidate_id, status="new", note=meta.get("note"))
    cancelled = cancelled_step(read_json_file(folder / CANCELLED_RECORD))
    if cancelled and not active:
        brief.status, brief.failure = "cancelled", cancelled[:MESSAGE_CHARS]
        return brief
    if compiled is None:
        brief.status = "evaluating" if active else "interrupted"
        return brief
    brief.registers = (compiled.get("resources") or {}).get("registers")
    if not compiled.get("ok"):
        brief.status = "refused" if compiled.get("status") == "refused" else "compile_error"
        brief.failure = first_error(compiled.get("log", ""))
        return brief
    brief.status = "compiled"
    if (folder / ".evaluating").exists():
        brief.status = "evaluating" if active else "interrupted"
        return brief
    latest = latest_record(folder)
    if latest:
        record = latest[1]
        brief.status = "correct" if record.get("correct") else "incorrect"
        brief.score_ms = record.get("score_ms")
        brief.failure = (record.get("failure") or None) and record["failure"][:MESSAGE_CHARS]
    return brief


def best_info(store: RunStore, run_id: str, best: BestRecord | None) -> BestInfo | None:
    if best is None:
        return None
    baseline = best.baseline_score_ms or baseline_score(store, run_id)  # the head-to-head's baseline when there is one
    return BestInfo(candidate_id=best.candidate_id, score_ms=best.score_ms, backend=best.backend, seed=best.seed,
                    speedup_vs_baseline=baseline / best.score_ms if baseline else None,
                    source_uri=artifact_uri(run_id, best.candidate_id, "kernel.cu"))


def baseline_score(store: RunStore, run_id: str) -> float | None:
    record = read_json_file(store.run_file(run_id, "baseline.json"))
    return record.get("score_ms") if record else None


def run_info(store: RunStore, record: RunRecord, server_backend: str, is_active, recent: int = 8) -> RunInfo:
    ids = store.candidate_ids(record.run_id)
    used = len(ids)
    return RunInfo(
        run_id=record.run_id, task=record.task, task_origin=record.task_origin, backend=record.backend,
        server_backend=server_backend,
        created=dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="seconds"),
        budget=BudgetInfo(max_candidates=record.max_candidates, used=used,
                          remaining=None if record.max_candidates is None else max(record.max_candidates - used, 0)),
        best=best_info(store, record.run_id, store.best(record.run_id)),
        baseline_score_ms=baseline_score(store, record.run_id), candidates=used,
        recent=[candidate_brief(store, record.run_id, c, is_active(record.run_id, c)) for c in ids[-recent:]] if recent > 0
        else [],  # ids[-0:] is every id: recent=0 (list_runs, the runs resource) means none
        uri=run_uri(record.run_id),
    )


def history_line(event: dict[str, Any]) -> str:
    when = dt.datetime.fromtimestamp(event.get("time", 0), dt.UTC).strftime("%m-%d %H:%M:%S")
    rest = {k: v for k, v in event.items() if k not in ("time", "event")}
    text = " ".join(f"{k}={v}" for k, v in rest.items())
    return f"{when} {event.get('event', '?')} {text}"[:MESSAGE_CHARS]


def output_summary(path: Path, case: str, buffer: str, uri: str, parts: int, dtype: str | None = None) -> OutputSummary:
    """Shape, dtype, finite range and NaN/Inf counts of a kept .npy output (memory-mapped: it may be 64 MiB).

    ``dtype``: the task's dtype of the buffer. The engine stores ml_dtypes' floats (bfloat16, fp8) as raw records
    a .npy header cannot name; without it a 2-byte record is read as bfloat16 and a 1-byte one stays raw."""
    array = as_dtype(np.load(path, mmap_mode="r", allow_pickle=False), dtype or "bfloat16")
    low = high = None
    nan = inf = 0
    if array.size and (array.dtype.kind in "fc" or is_bfloat16(array.dtype)):
        finite = np.isfinite(array)
        nan, inf = int(np.isnan(array).sum()), int(np.isinf(array).sum())
        if finite.any():
            low, high = float(array[finite].real.min()), float(array[finite].real.max())
    elif array.size and array.dtype.kind in "iub":
        low, high = float(array.min()), float(array.max())
    return OutputSummary(case=case, buffer=buffer, dtype=str(array.dtype), shape=list(array.shape),
                         elements=int(array.size), bytes=path.stat().st_size, min=low, max=high, nan_count=nan,
                         inf_count=inf, uri=uri, parts=parts, first_part_uri=part_uri(uri, 1) if parts > 1 else None)


# ---- engine results ---------------------------------------------------------------------------------
def compile_brief(result: CompileResult) -> CompileBrief:
    r = result.resources
    return CompileBrief(ok=result.ok, status=result.status, registers=r.registers if r else None,
                        spill_store_bytes=r.spill_store_bytes if r else None,
                        static_shared_bytes=r.static_shared_bytes if r else None,
                        first_error=None if result.ok else first_error(result.log),
                        log_excerpt=None if result.ok else excerpt(result.log))


def case_outcome(case: CaseResult, with_timing: bool = True) -> CaseOutcome:
    out = CaseOutcome(name=case.name, role=case.role, status=case.status, passed=case.passed,
                      message=case.message[:MESSAGE_CHARS] if case.message else None,
                      error=case.run.error if case.run else None,
                      max_abs_err=case.max_abs_err, max_rel_err=case.max_rel_err)
    if case.outputs:
        out.mismatches = sum(o.mismatches for o in case.outputs)
        out.elements = sum(o.elements for o in case.outputs)
        bad = next((o for o in case.outputs if o.first_mismatch is not None), None)
        if bad is not None and bad.first_mismatch is not None:
            m = bad.first_mismatch
            out.first_mismatch = MismatchInfo(buffer=bad.buffer, index=m.index, got=m.got, expected=m.expected)
    if with_timing and case.timing is not None:
        t = case.timing
        out.median_ms, out.min_ms, out.iqr_ms, out.cv, out.reps = t.median_ms, t.min_ms, t.iqr_ms, t.cv, t.n
        out.median_ci_ms = [t.median_ci.low_ms, t.median_ci.high_ms] if t.median_ci else None
        out.tflops, out.gbps = case.tflops, case.gbps
        out.planned_reps = t.planned_reps
        if t.stopped_above_ms is not None and t.median_ci is not None:
            out.timing_cut = "slower_than_best"
            out.timing_stopped = (f"timed {t.n} of {t.planned_reps} launches: stopped once clearly slower than the "
                                  f"run's best here (the median's interval starts at {t.median_ci.low_ms:.4g} ms, "
                                  f"above {t.stopped_above_ms:.4g} ms: the best's median plus a margin)")
        elif t.budget_ms is not None:
            out.timing_cut = "budget"
            out.timing_stopped = (f"timed {t.n} of {t.planned_reps} launches: at {t.median_ms:.4g} ms each, that "
                                  f"is the search's budget of about {t.budget_ms:.4g} ms per case (time times all)")
    return out


def read_json_file(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text()) if path.is_file() else None
    except (OSError, json.JSONDecodeError):
        return None
