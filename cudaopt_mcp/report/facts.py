"""The numbers and tables a report states, computed once for the HTML page and the markdown summary."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from cudaopt_mcp.report.importance import Importance
from cudaopt_mcp.report.plots_roofline import CaseRate
from cudaopt_mcp.report.run_reading import FAILURE_KINDS, RunData

TOP = 10


class Row(BaseModel):
    candidate_id: str
    index: int
    score_ms: float
    speedup: float | None
    registers: int | None
    spill_bytes: int | None
    note: str


class RunFacts(BaseModel):
    title: str
    unit: str
    verdict: str = Field(description="one sentence: what the run found")
    evaluations: int
    correct: int
    failures: dict[str, int]
    baseline_ms: float | None
    best_ms: float | None
    best_id: str | None
    speedup: float | None
    best_note: str | None
    top: list[Row]
    importance: Importance | None
    rates: list[CaseRate]
    profile: str | None = Field(None, description="the best's Nsight Compute summary, when it was profiled")
    environment: list[tuple[str, str]]
    missing: list[str] = Field(default_factory=list, description="what the report cannot show, and why")


def run_facts(data: RunData, ranking: Importance | None, rates: list[CaseRate]) -> RunFacts:
    unit = "ms CPU" if data.run.backend == "cpu" else "ms"
    failures = {k: n for k in FAILURE_KINDS if (n := sum(p.kind == k for p in data.points))}
    correct = sum(p.correct for p in data.points)
    baseline = data.baseline.score_ms if data.baseline else None
    best = data.best.score_ms if data.best else None
    speedup = _speedup(data)
    best_candidate = data.candidates.get(data.best.candidate_id) if data.best else None
    return RunFacts(
        title=f"{data.run.run_id} · {data.run.task}", unit=unit, verdict=_verdict(data, correct, failures, speedup, unit),
        evaluations=len(data.points), correct=correct, failures=failures, baseline_ms=baseline, best_ms=best,
        best_id=data.best.candidate_id if data.best else None, speedup=speedup,
        best_note=best_candidate.note if best_candidate else None, top=_top(data, baseline), importance=ranking,
        rates=rates, profile=_profile_text(best_candidate.profile if best_candidate else None),
        environment=_environment(data), missing=[])


def _speedup(data: RunData) -> float | None:
    """The best against the baseline; timed side by side where the best was crowned head-to-head."""
    if data.best is None or data.baseline is None:
        return None
    if data.best.candidate_id == data.baseline.candidate_id:
        return 1.0
    if data.best.baseline_score_ms:
        return data.best.baseline_score_ms / data.best.score_ms
    return data.baseline.score_ms / data.best.score_ms


def _verdict(data: RunData, correct: int, failures: dict[str, int], speedup: float | None, unit: str) -> str:
    if not data.points:
        return "This run has no evaluations yet: nothing to plot."
    failed = ", ".join(f"{n} {k}" for k, n in failures.items()) or "none"
    if data.best is None:
        return (f"No candidate is correct: {len(data.points)} evaluations, none passed every check "
                f"(failures: {failed}).")
    gain = f", {speedup:.2f}x the baseline" if speedup else ""
    return (f"Best {data.best.candidate_id} at {data.best.score_ms:.4g} {unit}{gain}; {correct} of {len(data.points)} "
            f"evaluations correct (failures: {failed}).")


def _top(data: RunData, baseline: float | None) -> list[Row]:
    best: dict[str, tuple[float, int]] = {}
    for p in data.points:
        if p.correct and p.score_ms and p.candidate_id and (p.candidate_id not in best or p.score_ms < best[p.candidate_id][0]):
            best[p.candidate_id] = (p.score_ms, p.index)
    rows = []
    for candidate_id, (score, index) in sorted(best.items(), key=lambda item: item[1][0])[:TOP]:
        candidate = data.candidates.get(candidate_id)
        resources = candidate.resources if candidate else None
        note = (candidate.note if candidate else None) or ""
        rows.append(Row(candidate_id=candidate_id, index=index, score_ms=score,
                        speedup=baseline / score if baseline else None,
                        registers=resources.registers if resources else None,
                        spill_bytes=resources.spill_bytes if resources else None, note=note[:160]))
    return rows


def _profile_text(profile: dict[str, Any] | None) -> str | None:
    summary = (profile or {}).get("summary")
    if not summary:
        return None
    lines = [f"{key.replace('_', ' ')}: {_plain(summary[key])}" for key in
             ("kernel", "duration_us", "sm_throughput_pct", "memory_throughput_pct", "dram_throughput_pct", "bound",
              "bound_reason") if summary.get(key) is not None]
    occupancy = summary.get("occupancy") or {}
    if occupancy.get("achieved_pct") is not None:
        lines.append(f"occupancy: {_plain(occupancy['achieved_pct'])}% achieved of {_plain(occupancy.get('theoretical_pct'))}% "
                     "theoretical")
    lines += [f"stall: {s.get('name')}, {_plain(s.get('cycles_per_issue'))} cycles per issue"
              + (f" ({100 * s['share']:.0f}% of cycles)" if s.get("share") is not None else "")
              for s in (summary.get("stalls") or [])[:3] if isinstance(s, dict)]
    return "\n".join(lines)


def _plain(value: Any) -> Any:
    """A metric as people read it: four significant digits (ncu's 796.3199999999999 µs reads 796.3)."""
    return f"{value:.4g}" if isinstance(value, float) else value


def _environment(data: RunData) -> list[tuple[str, str]]:
    env = data.environment()
    device = env.get("device") or {}
    rows: list[tuple[str, Any]] = [
        ("backend", data.run.backend), ("device", device.get("name")), ("architecture", device.get("arch")),
        ("SMs", device.get("sm_count")),
        ("memory", f"{device['memory_bytes'] / 2**30:.0f} GiB" if device.get("memory_bytes") else None),
        ("CUDA driver API", device.get("driver_version")), ("CUDA bindings", device.get("bindings_version")),
        ("timing floor", f"{device['timing_floor_ms'] * 1000:.1f} µs" if device.get("timing_floor_ms") else None),
        ("measured copy peak", f"{device['peak_copy_gbps']:.0f} GB/s" if device.get("peak_copy_gbps") else None),
        ("measured FP32 peak", f"{device['peak_fp32_tflops']:.1f} TFLOP/s" if device.get("peak_fp32_tflops") else None),
        ("clocks", _clocks(env.get("clocks_before"))), ("NVRTC", env.get("nvrtc_version")),
        ("engine", env.get("engine_version")), ("NumPy", env.get("numpy_version")), ("Python", env.get("python_version")),
        ("host", env.get("host")), ("seeds", ", ".join(str(s) for s in _seeds(data)) or None),
        ("proposer", data.proposer), ("stopped", data.stopped),
    ]
    if data.llm:
        rows += [("model", data.llm.model),
                 ("LLM requests", f"{data.llm.requests} ({data.llm.failed_requests} failed)"),
                 ("tokens", f"{data.llm.prompt_tokens:,} in, {data.llm.completion_tokens:,} out"),
                 ("cost", f"${data.llm.cost_usd:.4f}" if data.llm.cost_usd is not None else "unknown (no list price)")]
    return [(k, str(v)) for k, v in rows if v not in (None, "")]


def _clocks(clocks: Any) -> str | None:
    if not isinstance(clocks, dict):
        return None
    parts = [f"{k.replace('_', ' ')} {v}" for k, v in clocks.items() if v is not None and not isinstance(v, (dict, list))]
    return ", ".join(parts[:6]) or None


def _seeds(data: RunData) -> list[int]:
    seeds = [data.baseline.seed if data.baseline else None, data.best.seed if data.best else None]
    seeds += [(c.evaluation or {}).get("seed") for c in data.candidates.values()]
    return sorted({s for s in seeds if isinstance(s, int)})[:8]
