"""Nsight Compute's CSV pages (``ncu --csv --page raw`` and ``--page details``), read into typed rows.

The raw page has a header row of metric names, a row of units, then one row per profiled kernel; the
details page has one row per (section, metric) plus rule rows with ncu's advice and estimated speedup.
ncu scales units per value (``us`` here, ``ms`` there; ``byte/block`` or ``Kbyte/block``) with decimal
prefixes, so every number is read through :meth:`Metric.scaled`. Text that is not such a page (often an
ncu error message) raises :class:`ProfileParseError` quoting its first lines.
"""

from __future__ import annotations

import csv
import io
import re
from typing import NoReturn

from pydantic import BaseModel, Field

from harness_tools.errors import ProfileParseError

_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:[eE][-+]?\d+)?")
_TEXT_COLUMNS = {"Kernel Name", "Process Name", "Host Name"}  # never numbers, whatever a kernel is called
_DETAIL_COLUMNS = ("ID", "Kernel Name", "Section Name", "Metric Name", "Metric Unit", "Metric Value")
_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_SECONDS = {"s": 1.0, "second": 1.0, "ms": 1e-3, "msecond": 1e-3, "us": 1e-6, "usecond": 1e-6, "ns": 1e-9, "nsecond": 1e-9}


class Metric(BaseModel):
    value: float | str | None = Field(description="a number, text, or None where ncu wrote n/a or nothing")
    unit: str = ""

    def scaled(self) -> float | None:
        """The value in base units (byte, second, hertz; ``Kbyte/cycle`` gives bytes per cycle)."""
        if not isinstance(self.value, float):
            return None
        num, _, den = self.unit.partition("/")
        top, bottom = _unit_factor(num), _unit_factor(den)
        return None if top is None or bottom is None else self.value * top / bottom


class Rule(BaseModel):
    name: str
    type: str = Field(description="OPT (has advice), INF, WRN, ERR")
    description: str
    speedup_type: str | None = None
    speedup_pct: float | None = None


class DetailRow(BaseModel):
    kernel_id: int
    kernel_name: str
    section: str
    name: str | None = Field(None, description="metric name; None on a rule row")
    metric: Metric | None = None
    rule: Rule | None = None


def parse_raw_csv(text: str) -> list[dict[str, Metric]]:
    """One ``{metric name: Metric}`` per profiled kernel of a ``--page raw`` CSV."""
    rows = _csv_rows(text, "raw")
    header = rows[0]
    if "Section Name" in header:
        _refuse(text, "raw", "this is a --page details CSV")
    if len(rows) < 2 or rows[1][:1] != [""]:
        _refuse(text, "raw", "the second row is not the row of units")
    kernels = []
    for number, row in enumerate(rows[2:], start=3):
        if len(row) != len(header):
            _refuse(text, "raw", f"row {number} has {len(row)} fields, the header {len(header)}")
        kernels.append({name: Metric(value=_value(name, raw), unit=unit) for name, unit, raw in zip(header, rows[1], row)})
    return kernels


def parse_details_csv(text: str) -> list[DetailRow]:
    """Every metric and rule row of a ``--page details`` CSV."""
    rows = _csv_rows(text, "details")
    missing = [c for c in _DETAIL_COLUMNS if c not in rows[0]]
    if missing:
        _refuse(text, "details", f"missing column(s) {', '.join(missing)}")
    out = []
    for number, fields in enumerate(rows[1:], start=2):
        row = dict(zip(rows[0], fields))
        try:
            kernel_id = int(row["ID"])
        except (KeyError, ValueError):
            _refuse(text, "details", f"row {number} has no kernel ID")
        base = {"kernel_id": kernel_id, "kernel_name": row.get("Kernel Name", ""), "section": row.get("Section Name", "")}
        if row.get("Rule Name"):
            speedup = _value("", row.get("Estimated Speedup", ""))
            rule = Rule(name=row["Rule Name"], type=row.get("Rule Type", ""), description=row.get("Rule Description", ""),
                        speedup_type=row.get("Estimated Speedup Type") or None,
                        speedup_pct=speedup if isinstance(speedup, float) else None)
            out.append(DetailRow(**base, rule=rule))
        else:
            name = row.get("Metric Name", "")
            out.append(DetailRow(**base, name=name, metric=Metric(value=_value(name, row.get("Metric Value", "")),
                                                                   unit=row.get("Metric Unit", ""))))
    return out


def _csv_rows(text: str, page: str) -> list[list[str]]:
    lines = text.splitlines()
    # `ncu --csv` run live prefixes its log (==PROF==, ==WARNING==); the CSV starts at the first other line
    start = next((i for i, line in enumerate(lines) if line.strip() and not line.startswith("==")), None)
    if start is None:
        _refuse(text, page, "no CSV rows")
    try:
        rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    except csv.Error as exc:
        _refuse(text, page, f"unreadable CSV ({exc})")
    if not rows or rows[0][:1] != ["ID"] or "Kernel Name" not in rows[0]:
        _refuse(text, page, "the header does not start with ncu's ID / Kernel Name columns")
    return rows


def _refuse(text: str, page: str, why: str) -> NoReturn:
    head = "\n".join(line[:200] for line in text.strip().splitlines()[:5]) or "(empty)"
    raise ProfileParseError(f"not an Nsight Compute --page {page} CSV: {why}. The text begins:\n{head}")


def _value(name: str, raw: str) -> float | str | None:
    raw = raw.strip()
    if raw in ("", "n/a"):
        return None
    if name not in _TEXT_COLUMNS and _NUMBER.fullmatch(raw):
        return float(raw.replace(",", ""))
    return raw


def _unit_factor(part: str) -> float | None:
    if part in _SECONDS:
        return _SECONDS[part]
    for base in ("byte", "hz", "Hz"):  # ncu writes Ghz, Mhz
        if part.endswith(base):
            return _PREFIX.get(part[: -len(base)])
    return 1.0  # counts (cycle, inst, sector, block, %) are printed unscaled, with thousands separators
