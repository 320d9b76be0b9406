"""Human-readable rendering of an evaluation: the table ``cudaopt eval`` prints."""

from __future__ import annotations

from harness_tools import EvaluationResult
from harness_tools.backends.contract import Access

RACES_SHOWN = 5


def eval_table(result: EvaluationResult) -> str:
    dev = result.environment.device
    lines = [f"{result.task} · candidate {result.candidate} · {result.backend} on {dev.name} ({dev.arch}) · seed {result.seed}"]
    c = result.compile
    if c.ok:
        r = c.resources
        res = (f" · {r.registers} registers · {r.spill_store_bytes or 0} B spills · {r.static_shared_bytes} B static smem"
               if r else "")
        lines.append(f"compile: ok in {c.compile_ms:.0f} ms{' (cached)' if c.cached else ''}{res}")
    else:
        lines.append(f"compile: {c.status}")
        lines.append(_indent(c.log))
    cpu = result.backend == "cpu"
    if cpu:
        lines.append("timings: CPU wall clock (cpu backend), not GPU time")
    elif dev.timing_floor_ms is not None:
        lines.append(f"timings: CUDA events, L2 evicted before each launch; an empty kernel measures "
                     f"{dev.timing_floor_ms * 1e3:.1f} µs this way (the floor under every median)")
    if result.cases:
        lines.append("")
        lines.append(f"{'case':<28} {'role':<11} {'status':<10} {'max_abs_err':>11} {'cpu_ms' if cpu else 'median_ms':>10} "
                     f"{'min_ms':>9} {'cv':>6} {'TFLOP/s':>8} {'GB/s':>8}")
        for case in result.cases:
            t = case.timing
            lines.append(
                f"{case.name:<28} {case.role:<11} {case.status:<10} {_num(case.max_abs_err):>11} "
                f"{_num(case.median_ms, '.4f'):>10} {_num(t.min_ms if t else None, '.4f'):>9} "
                f"{_num(t.cv * 100 if t else None, '.1f') + ('%' if t else ''):>6} "
                f"{_num(case.tflops, '.2f'):>8} {_num(case.gbps, '.0f'):>8}")
        for case in result.cases:
            if not case.passed and case.message:
                lines.append(f"  {case.name}: {case.message}")
        lines += _race_lines(result)
    lines.append("")
    if result.correct:
        clock = "CPU " if cpu else ""
        score = (f"{result.score_ms:.4f} ms {clock}(geomean of performance medians)" if result.score_ms
                 else "n/a (no performance case timed)")
        lines.append(f"CORRECT · score {score}")
    else:
        lines.append(f"NOT CORRECT · {result.failure}")
        lines += [f"hint: {h}" for h in result.hints]
    return "\n".join(lines)


def _race_lines(result: EvaluationResult) -> list[str]:
    """The race check's verdict, and each race with the threads involved."""
    checked = [c for c in result.cases if c.races is not None]
    if not checked:
        return []
    clean = sum(c.races.status == "clean" for c in checked)
    lines = ["", f"race check (ThreadSanitizer, CUDA threads as fibers): {clean} of {len(checked)} validation cases clean"]
    for case in checked:
        for race in case.races.races[:RACES_SHOWN]:
            a = race.first
            memory = f"{a.memory} memory" + (f" `{a.variable}`" if a.variable else "")
            lines.append(f"  {case.name}: {memory}: {_access(a)} vs {_access(race.second)} "
                         f"({race.count} report{'s' if race.count != 1 else ''})")
        if len(case.races.races) > RACES_SHOWN:
            lines.append(f"  {case.name}: and {len(case.races.races) - RACES_SHOWN} more races")
    return lines


def _access(a: Access) -> str:
    where = f"kernel.cu({a.line})" if a.line is not None else "unknown line"
    who = (f" by block ({','.join(map(str, a.block))})" if a.block else "") + \
          (f" thread ({','.join(map(str, a.thread))})" if a.thread else "")
    return f"{'atomic ' if a.atomic else ''}{a.kind} at {where}{who}"


def _num(value: float | None, fmt: str = ".2e") -> str:
    return "-" if value is None else format(value, fmt)


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())
