"""The report as one self-contained HTML page: inline SVG plots, tables, no script and no network at view time."""

from __future__ import annotations

from html import escape

from pydantic import BaseModel

from cudaopt_mcp.report.facts import RunFacts

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1b1b1b;background:#fafafa}
main{max-width:1180px;margin:0 auto;padding:24px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.verdict{font-size:15px;margin:6px 0 16px}
.cards{display:flex;flex-wrap:wrap;gap:10px} .card{background:#fff;border:1px solid #e2e2e2;border-radius:6px;padding:8px 14px}
.card b{display:block;font-size:18px} .card span{color:#666;font-size:12px}
figure{background:#fff;border:1px solid #e2e2e2;border-radius:6px;margin:10px 0;padding:8px;overflow-x:auto}
figure svg{max-width:100%;height:auto} figcaption{color:#555;font-size:12px;margin-top:4px}
table{border-collapse:collapse;background:#fff;font-size:13px} td,th{border:1px solid #e2e2e2;padding:3px 8px;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums} .note{color:#666;font-size:12px}
pre{background:#fff;border:1px solid #e2e2e2;padding:8px;white-space:pre-wrap}
"""


class Plot(BaseModel):
    name: str
    caption: str
    svg: str | None = None
    absent: str | None = None  # why there is no plot


def render_page(facts: RunFacts, plots: dict[str, Plot], generated: str) -> str:
    parts = [f"<h1>{escape(facts.title)}</h1>", f"<p class='verdict'>{escape(facts.verdict)}</p>", _cards(facts)]
    parts += _section("Progress", [plots.get("progress"), plots.get("latency")])
    parts += _section("Tunable space", [plots.get("importance"), plots.get("space")])
    parts += _section("Where wrong candidates are wrong", [plots.get("errors")])
    parts += _section("Roofline", [plots.get("roofline")])
    parts.append(_rates_table(facts))
    if facts.profile:
        parts.append(f"<p>Nsight Compute summary of the best:</p><pre>{escape(facts.profile)}</pre>")
    parts += _section("Compile resources", [plots.get("resources")])
    parts.append("<h2>Fastest correct candidates</h2>" + _top_table(facts))
    parts.append("<h2>Environment</h2>" + _table(["", ""], [[escape(k), escape(v)] for k, v in facts.environment],
                                                 numeric=False))
    if facts.missing:
        parts.append("<h2>Not shown</h2><ul>" + "".join(f"<li>{escape(m)}</li>" for m in facts.missing) + "</ul>")
    parts.append(f"<p class='note'>{escape(generated)}</p>")
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{escape(facts.title)} · cudaopt report</title><style>{STYLE}</style></head>"
            f"<body><main>{''.join(parts)}</main></body></html>\n")


def _cards(facts: RunFacts) -> str:
    items = [("baseline", f"{facts.baseline_ms:.4g} {facts.unit}" if facts.baseline_ms else "—"),
             ("best", f"{facts.best_ms:.4g} {facts.unit}" if facts.best_ms else "—"),
             ("speed-up", f"{facts.speedup:.2f}x" if facts.speedup else "—"),
             ("evaluations", str(facts.evaluations)), ("correct", str(facts.correct)),
             ("failed", str(sum(facts.failures.values())))]
    cards = "".join(f"<div class='card'><b>{escape(v)}</b><span>{escape(k)}</span></div>" for k, v in items)
    note = f"<p class='note'>best: {escape(facts.best_note)}</p>" if facts.best_note else ""
    return f"<div class='cards'>{cards}</div>{note}"


def _section(title: str, plots: list[Plot | None]) -> list[str]:
    out = [f"<h2>{escape(title)}</h2>"]
    for plot in plots:
        if plot is None:
            continue
        if plot.svg:
            out.append(f"<figure id='{escape(plot.name)}'>{plot.svg}<figcaption>{escape(plot.caption)} "
                       f"(also {escape(plot.name)}.svg and .png beside this page)</figcaption></figure>")
        elif plot.absent:
            out.append(f"<p class='note'>{escape(plot.absent)}</p>")
    return out


def _rates_table(facts: RunFacts) -> str:
    if not facts.rates:
        return ""
    rows = [[escape(r.label), escape(r.case), _num(r.median_ms, 4), _num(r.tflops, 3), _num(r.gbps, 4),
             _num(r.pct_flops, 3, "%"), _num(r.pct_bandwidth, 3, "%")] for r in facts.rates]
    return _table(["candidate", "case", f"median ({facts.unit})", "TFLOP/s", "GB/s", "of FP32 peak", "of copy peak"], rows)


def _top_table(facts: RunFacts) -> str:
    if not facts.top:
        return "<p class='note'>No candidate passed every check.</p>"
    rows = [[escape(r.candidate_id), str(r.index), _num(r.score_ms, 4), _num(r.speedup, 3, "x"),
             "" if r.registers is None else str(r.registers), "" if r.spill_bytes is None else str(r.spill_bytes),
             escape(r.note)] for r in facts.top]
    return _table(["candidate", "iteration", f"score ({facts.unit})", "vs baseline", "registers", "spilled bytes", "idea"],
                  rows)


def _table(header: list[str], rows: list[list[str]], numeric: bool = True) -> str:
    head = "".join(f"<th>{h}</th>" for h in header) if any(header) else ""
    body = "".join("<tr>" + "".join(f"<td{' class=n' if numeric and _numeric(c) else ''}>{c}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f"<table>{f'<tr>{head}</tr>' if head else ''}{body}</table>"


def _num(value: float | None, digits: int, suffix: str = "") -> str:
    return "" if value is None else f"{value:.{digits}g}{suffix}"


def _numeric(cell: str) -> bool:
    return bool(cell) and cell.rstrip("x%").replace(".", "", 1).replace("e-", "", 1).replace("e+", "", 1).isdigit()
