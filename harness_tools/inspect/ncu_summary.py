"""Summarise an Nsight Compute profile (``ncu --csv --page raw`` and ``--page details``, read by
:mod:`harness_tools.inspect.ncu_csv`) for a model. A metric the CSV lacks stays ``None``: the summary reports
what ncu measured and never fills gaps with guesses.

Bound (the speed-of-light reading): if neither SM nor memory throughput reaches
:data:`BUSY_PCT` % of peak the kernel is latency-bound, otherwise the larger of the two names the bound.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import BaseModel, Field

from harness_tools.errors import ProfileParseError
from harness_tools.inspect.ncu_csv import DetailRow, Metric, parse_details_csv, parse_raw_csv

BUSY_PCT = 60.0
MAX_STALLS = 4
MAX_RULES = 3
ADVICE_CHARS = 300

_STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio")
Side = Literal["memory", "compute"]
_LIMITS = {"registers": "registers", "shared_mem": "shared memory", "warps": "warps per SM",
           "blocks": "blocks per SM", "barriers": "barriers"}


class Ceilings(BaseModel):
    """Ceilings measured on the same device (e.g. by ``benchmarks/tuner_bench.py``)."""

    copy_gbps: float | None = Field(None, gt=0, description="device-to-device copy, bytes read + written per second / 1e9")
    fp32_tflops: float | None = Field(None, gt=0, description="e.g. cuBLAS SGEMM")


class Occupancy(BaseModel):
    achieved_pct: float | None = None
    theoretical_pct: float | None = None
    limiters: list[str] = Field(default_factory=list, description="the block limits equal to the smallest one")
    blocks_per_sm: int | None = None
    registers_per_thread: int | None = None
    static_shared_bytes: int | None = None
    dynamic_shared_bytes: int | None = None


class Stall(BaseModel):
    name: str
    cycles_per_issue: float
    share: float | None = Field(None, description="of all cycles between two issued instructions, 0..1")


class Roofline(BaseModel):
    achieved_tflops: float | None = None
    flops_source: Literal["task", "ncu fp32 counters"] | None = None
    achieved_gbps: float | None = None
    bytes_source: Literal["task", "ncu dram"] | None = None
    intensity: float | None = Field(None, description="FLOP per byte")
    peak_fp32_tflops: float | None = Field(None, description="ncu: 2 x FFMA peak x SM clock")
    peak_dram_gbps: float | None = Field(None, description="ncu: DRAM bytes/cycle peak x DRAM clock")
    ridge: float | None = Field(None, description="FLOP per byte where the two peaks meet")
    side: Side | None = None
    fraction_of_roof: float | None = None
    measured_fp32_tflops: float | None = None
    measured_copy_gbps: float | None = None
    fraction_of_measured_roof: float | None = Field(None, description="the roof built from the measured ceilings")


class RuleHint(BaseModel):
    name: str
    speedup_pct: float
    advice: str


class ProfileSummary(BaseModel):
    kernel: str
    device: str | None = None
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    duration_us: float | None = None
    sm_throughput_pct: float | None = None
    memory_throughput_pct: float | None = None
    dram_throughput_pct: float | None = None
    l1_throughput_pct: float | None = None
    l2_throughput_pct: float | None = None
    bound: Literal["memory", "compute", "latency"] | None = None
    bound_reason: str | None = None
    occupancy: Occupancy
    stalls: list[Stall] = Field(default_factory=list)
    l1_hit_pct: float | None = None
    l2_hit_pct: float | None = None
    bank_conflicts_ld: int | None = None
    bank_conflicts_st: int | None = None
    dram_read_bytes: float | None = None
    dram_write_bytes: float | None = None
    roofline: Roofline
    rules: list[RuleHint] = Field(default_factory=list)

    def text(self) -> str:
        """A compact plain-text summary (well under 2,000 characters) a model can act on."""
        return "\n".join(line for line in _text_lines(self) if line)


def summarize_profile(raw_text: str, details_text: str | None, *, flops: float | None = None, bytes_moved: float | None = None,
              ceilings: Ceilings | None = None, kernel: int = 0) -> ProfileSummary:
    """Summarise kernel row ``kernel`` of the raw page; ``flops``/``bytes_moved`` are the task's counts for the
    profiled case (e.g. 2*M*N*K), used for the roofline in place of what ncu counted."""
    kernels = parse_raw_csv(raw_text)
    if not 0 <= kernel < len(kernels):
        raise ProfileParseError(f"the raw CSV holds {len(kernels)} kernel row(s); kernel={kernel} is not one of them")
    m = kernels[kernel]
    num = lambda name: _get(m, name)  # noqa: E731 - shorthand for the many look-ups below
    kid = num("ID")
    rules = _top_rules(parse_details_csv(details_text), None if kid is None else int(kid)) if details_text else []
    sm_pct = num("sm__throughput.avg.pct_of_peak_sustained_elapsed")
    mem_pct = num("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed")
    bound, reason = _bound(sm_pct, mem_pct)
    conflicts = [num(f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op}.sum") for op in ("ld", "st")]
    duration = num("gpu__time_duration.sum")
    return ProfileSummary(
        kernel=_text(m, "Kernel Name") or "?",
        device=_text(m, "device__attribute_display_name"),
        grid=_dims(m, "Grid Size"), block=_dims(m, "Block Size"),
        duration_us=None if duration is None else duration * 1e6,
        sm_throughput_pct=sm_pct, memory_throughput_pct=mem_pct,
        dram_throughput_pct=num("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
        l1_throughput_pct=num("l1tex__throughput.avg.pct_of_peak_sustained_active"),
        l2_throughput_pct=num("lts__throughput.avg.pct_of_peak_sustained_elapsed"),
        bound=bound, bound_reason=reason, occupancy=_occupancy(m), stalls=_stalls(m),
        l1_hit_pct=num("l1tex__t_sector_hit_rate.pct"), l2_hit_pct=num("lts__t_sector_hit_rate.pct"),
        bank_conflicts_ld=_int(conflicts[0]), bank_conflicts_st=_int(conflicts[1]),
        dram_read_bytes=num("dram__bytes_read.sum"), dram_write_bytes=num("dram__bytes_write.sum"),
        roofline=_roofline(m, duration, flops, bytes_moved, ceilings or Ceilings()), rules=rules)


def _get(m: dict[str, Metric], name: str) -> float | None:
    return m[name].scaled() if name in m else None


def _text(m: dict[str, Metric], name: str) -> str | None:
    value = m[name].value if name in m else None
    return None if value is None else str(value)


def _int(value: float | None) -> int | None:
    return None if value is None else round(value)


def _dims(m: dict[str, Metric], column: str) -> tuple[int, int, int] | None:
    found = re.fullmatch(r"\(\s*(\d+),\s*(\d+),\s*(\d+)\s*\)", _text(m, column) or "")
    return (int(found[1]), int(found[2]), int(found[3])) if found else None


# --- the readings ------------------------------------------------------------------------------------


def _bound(sm: float | None, mem: float | None) -> tuple[str | None, str | None]:
    if sm is None or mem is None:
        return None, None
    numbers = f"SM {sm:.1f} %, memory {mem:.1f} % of peak"
    if max(sm, mem) < BUSY_PCT:
        return "latency", (f"neither SM nor memory throughput reaches {BUSY_PCT:.0f} % ({numbers}): stalls,"
                           " not a saturated unit, set the pace")
    if mem >= sm:
        return "memory", f"memory throughput is the higher one ({numbers})"
    return "compute", f"SM throughput is the higher one ({numbers})"


def _occupancy(m: dict[str, Metric]) -> Occupancy:
    limits = {key: _get(m, f"launch__occupancy_limit_{key}") for key in _LIMITS}
    known = {k: v for k, v in limits.items() if v is not None}
    smallest = min(known.values()) if known else None
    shared = [_get(m, f"launch__shared_mem_per_block_{kind}") for kind in ("static", "dynamic")]
    return Occupancy(
        achieved_pct=_get(m, "sm__warps_active.avg.pct_of_peak_sustained_active"),
        theoretical_pct=_get(m, "sm__maximum_warps_per_active_cycle_pct"),
        limiters=[_LIMITS[k] for k, v in known.items() if v == smallest], blocks_per_sm=_int(smallest),
        registers_per_thread=_int(_get(m, "launch__registers_per_thread")),
        static_shared_bytes=_int(shared[0]), dynamic_shared_bytes=_int(shared[1]))


def _stalls(m: dict[str, Metric]) -> list[Stall]:
    cycles = {f[1]: v for name, metric in m.items() if (f := _STALL.fullmatch(name)) and (v := metric.scaled()) is not None}
    # ncu's "share" is of the average cycles between two issues; "selected" is the issue cycle itself, not a stall
    total = _get(m, "smsp__average_warp_latency_per_inst_issued.ratio") or sum(cycles.values())
    ranked = sorted(((n, c) for n, c in cycles.items() if n != "selected" and c > 0), key=lambda nc: -nc[1])
    return [Stall(name=n, cycles_per_issue=c, share=c / total if total else None) for n, c in ranked[:MAX_STALLS]]


def _roofline(m: dict[str, Metric], duration: float | None, flops: float | None, bytes_moved: float | None,
              ceilings: Ceilings) -> Roofline:
    peak_flops = _product(2.0, _get(m, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"),
                          _get(m, "sm__cycles_elapsed.avg.per_second"))
    peak_bw = _product(_get(m, "dram__bytes.sum.peak_sustained"), _get(m, "dram__cycles_elapsed.avg.per_second"))
    if flops is not None and duration:
        flop_rate, flops_source = flops / duration, "task"
    else:
        flop_rate, flops_source = _ncu_flop_rate(m), "ncu fp32 counters"
    if bytes_moved is not None:
        moved, bytes_source = bytes_moved, "task"
    else:
        read, write = _get(m, "dram__bytes_read.sum"), _get(m, "dram__bytes_write.sum")
        moved, bytes_source = None if read is None or write is None else read + write, "ncu dram"
    byte_rate = moved / duration if moved is not None and duration else None
    r = Roofline(achieved_tflops=_product(flop_rate, 1e-12), flops_source=flops_source if flop_rate is not None else None,
                 achieved_gbps=_product(byte_rate, 1e-9), bytes_source=bytes_source if byte_rate is not None else None,
                 peak_fp32_tflops=_product(peak_flops, 1e-12), peak_dram_gbps=_product(peak_bw, 1e-9),
                 measured_fp32_tflops=ceilings.fp32_tflops, measured_copy_gbps=ceilings.copy_gbps)
    if flop_rate is None or not byte_rate or not peak_flops or not peak_bw:
        return r
    r.intensity, r.ridge = flop_rate / byte_rate, peak_flops / peak_bw
    r.side, r.fraction_of_roof = _position(r.intensity, flop_rate, byte_rate, peak_flops, peak_bw)
    if ceilings.fp32_tflops or ceilings.copy_gbps:  # a measured ceiling replaces ncu's peak where given
        top = ceilings.fp32_tflops * 1e12 if ceilings.fp32_tflops else peak_flops
        bw = ceilings.copy_gbps * 1e9 if ceilings.copy_gbps else peak_bw
        r.fraction_of_measured_roof = _position(r.intensity, flop_rate, byte_rate, top, bw)[1]
    return r


def _position(intensity: float, flop_rate: float, byte_rate: float, top: float, bw: float) -> tuple[Side, float]:
    """The side of the ridge, and the fraction of the roof reached (left of the ridge the roof is intensity x
    bandwidth, so the fraction is bytes/s over bandwidth; right of it, FLOP/s over the compute peak)."""
    return ("memory", byte_rate / bw) if intensity < top / bw else ("compute", flop_rate / top)


def _ncu_flop_rate(m: dict[str, Metric]) -> float | None:
    """FP32 FLOP/s as ncu's roofline counts them: (FADD + FMUL + 2 x FFMA) per cycle x SMSP clock."""
    add, mul, fma = (_get(m, f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed")
                     for op in ("fadd", "fmul", "ffma"))
    if add is None or mul is None or fma is None:
        return None
    return _product(add + mul + 2 * fma, _get(m, "smsp__cycles_elapsed.avg.per_second"))


def _product(*factors: float | None) -> float | None:
    return None if None in factors else math.prod(factors)  # type: ignore[arg-type]


def _top_rules(rows: list[DetailRow], kernel_id: int | None) -> list[RuleHint]:
    rules = [r.rule for r in rows if r.rule and r.rule.speedup_pct is not None and kernel_id in (None, r.kernel_id)]
    rules.sort(key=lambda rule: -rule.speedup_pct)  # type: ignore[operator]
    return [RuleHint(name=r.name, speedup_pct=r.speedup_pct, advice=_cut(r.description, ADVICE_CHARS))  # type: ignore[arg-type]
            for r in rules[:MAX_RULES]]


def _cut(text: str, limit: int) -> str:
    """Whole sentences up to ``limit`` characters; a first sentence longer than that is cut with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    kept = ""
    for sentence in re.split(r"(?<=\.)\s+", text):
        if len(kept) + len(sentence) + 1 > limit:
            break
        kept = f"{kept} {sentence}".strip()
    return kept or text[: limit - 1].rstrip() + "…"


# --- text --------------------------------------------------------------------------------------------


def _n(value: float | None, spec: str = ".1f", suffix: str = "") -> str:
    return "n/a" if value is None else f"{value:{spec}}{suffix}"


def _bytes(v: float | None) -> str:
    units = (("GB", 1e9), ("MB", 1e6), ("KB", 1e3), ("B", 1.0))
    return "n/a" if v is None else next(f"{v / f:.3g} {u}" for u, f in units if v >= f or u == "B")


def _text_lines(s: ProfileSummary) -> list[str]:
    o, r = s.occupancy, s.roofline
    dims = lambda d: "?" if d is None else "x".join(map(str, d))  # noqa: E731
    units = (("L1", s.l1_throughput_pct), ("L2", s.l2_throughput_pct), ("DRAM", s.dram_throughput_pct))
    busiest = [f"{n} {v:.1f} %" for n, v in units if v is not None]
    lines = [
        f"kernel {_cut(s.kernel, 80)} on {s.device or '?'}: grid {dims(s.grid)}, block {dims(s.block)},"
        f" {_n(s.duration_us, '.1f', ' us')}",
        f"bound: {s.bound or 'unknown'} - {s.bound_reason or 'SM/memory throughput missing'}",
        f"memory units (of peak): {', '.join(busiest)}" if busiest else "",
        f"occupancy: achieved {_n(o.achieved_pct, '.1f', ' %')} of theoretical {_n(o.theoretical_pct, '.1f', ' %')}; limiter: "
        + (f"{' = '.join(o.limiters)} ({o.blocks_per_sm} blocks/SM)" if o.limiters else "n/a"),
        f"registers/thread {_n(o.registers_per_thread, 'd')}; shared memory/block {_bytes(o.static_shared_bytes)} static"
        f" + {_bytes(o.dynamic_shared_bytes)} dynamic",
    ]
    if s.stalls:
        lines.append("top stalls (cycles per issued instruction): " + ", ".join(
            f"{st.name} {st.cycles_per_issue:.1f}" + (f" ({st.share:.0%})" if st.share is not None else "") for st in s.stalls))
    lines.append(f"hit rates: L1 {_n(s.l1_hit_pct, '.1f', ' %')}, L2 {_n(s.l2_hit_pct, '.1f', ' %')}; shared bank conflicts:"
                 f" {_n(s.bank_conflicts_ld, ',d')} ld, {_n(s.bank_conflicts_st, ',d')} st;"
                 f" DRAM read {_bytes(s.dram_read_bytes)}, written {_bytes(s.dram_write_bytes)}")
    lines.append(f"roofline: {_n(r.achieved_tflops, '.2f')} TFLOP/s ({r.flops_source or 'n/a'}), {_n(r.achieved_gbps, '.0f')} GB/s"
                 f" ({r.bytes_source or 'n/a'}), intensity {_n(r.intensity, '.2f')} FLOP/B; peaks {_n(r.peak_fp32_tflops, '.1f')}"
                 f" TFLOP/s, {_n(r.peak_dram_gbps, '.0f')} GB/s, ridge {_n(r.ridge, '.1f')} FLOP/B")
    if r.side:
        measured = (f"; {r.fraction_of_measured_roof:.0%} of the measured roof" if r.fraction_of_measured_roof is not None else "")
        lines.append(f"  {r.side} side of the ridge, at {_n(r.fraction_of_roof, '.0%')} of the roof{measured}")
    if s.rules:
        lines.append("ncu rules (estimated speedup):")
        lines += [f"- {h.name} {h.speedup_pct:.3g} %: {_cut(h.advice, 200)}" for h in s.rules]
    return lines
