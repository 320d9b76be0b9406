"""The report as compact markdown: what a model (or a terminal) reads instead of the plots."""

from __future__ import annotations

from cudaopt_mcp.report.facts import RunFacts


def render_markdown(facts: RunFacts, plots_shown: list[str], html_name: str) -> str:
    lines = [f"# {facts.title}", "", facts.verdict, ""]
    lines += [f"- baseline: {_ms(facts.baseline_ms, facts.unit)}", f"- best: {_ms(facts.best_ms, facts.unit)}"
              + (f" ({facts.best_id}, {facts.speedup:.2f}x the baseline)" if facts.best_id and facts.speedup else ""),
              f"- evaluations: {facts.evaluations}, correct: {facts.correct}"]
    if facts.failures:
        lines.append("- failures: " + ", ".join(f"{k} {n}" for k, n in facts.failures.items()))
    if facts.best_note:
        lines.append(f"- the best's idea: {facts.best_note}")
    if facts.top:
        lines += ["", "## Fastest correct candidates", "",
                  f"| candidate | iteration | score ({facts.unit}) | vs baseline | registers | spills | idea |",
                  "|---|---:|---:|---:|---:|---:|---|"]
        for r in facts.top:
            speed = f"{r.speedup:.2f}x" if r.speedup else ""
            lines.append(f"| {r.candidate_id} | {r.index} | {r.score_ms:.4g} | {speed} | {_or(r.registers)} | "
                         f"{_or(r.spill_bytes)} | {' '.join(r.note.replace('|', '/').split())[:100]} |")
    if facts.importance:
        shares = ", ".join(f"{n} {facts.importance.shares[n]:.2f}" for n in facts.importance.names)
        lines += ["", f"Parameter importance (η² of log score over {facts.importance.scored} correct configurations): "
                      f"{shares}"]
    if facts.rates:
        lines += ["", "## Achieved rates", ""]
        for r in facts.rates:
            parts = [f"{r.median_ms:.4g} {facts.unit}" if r.median_ms else None,
                     f"{r.tflops:.3g} TFLOP/s" + (f" ({r.pct_flops:.0f}% of the measured peak)" if r.pct_flops else "")
                     if r.tflops else None,
                     f"{r.gbps:.4g} GB/s" + (f" ({r.pct_bandwidth:.0f}% of the measured copy peak)" if r.pct_bandwidth
                                              else "") if r.gbps else None]
            lines.append(f"- {r.label} · {r.case}: " + ", ".join(p for p in parts if p))
    if facts.profile:
        lines += ["", "## Nsight Compute, the best", "", "```", facts.profile, "```"]
    lines += ["", "## Environment", ""] + [f"- {k}: {v}" for k, v in facts.environment]
    if facts.missing:
        lines += ["", "## Not shown", ""] + [f"- {m}" for m in facts.missing]
    lines += ["", f"Plots ({', '.join(plots_shown) or 'none'}) are in {html_name} and as SVG/PNG beside it."]
    return "\n".join(lines) + "\n"


def _ms(value: float | None, unit: str) -> str:
    return f"{value:.4g} {unit}" if value else "none"


def _or(value: int | None) -> str:
    return "" if value is None else str(value)
