"""Nsight Compute summaries, on CSV pages captured on an H200 (ncu 2025.3.1, --set full, one launch each)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from harness_tools.errors import HarnessError, ProfileParseError
from harness_tools.inspect.ncu_summary import Ceilings, parse_details_csv, parse_raw_csv, summarize_profile

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ncu"
CASES = sorted(p.name.removesuffix(".raw.csv") for p in FIXTURES.glob("*.raw.csv"))
SGEMM_FLOPS = 2 * 8192 * 2048 * 1024
TRANSPOSE_BYTES = 2 * 8192 * 8192 * 4
PERMISSION = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters"


def pages(case: str) -> tuple[str, str]:
    return (FIXTURES / f"{case}.raw.csv").read_text(), (FIXTURES / f"{case}.details.csv").read_text()


def summary(case: str, **counts):
    return summarize_profile(*pages(case), **counts)


def raw_without(case: str, drop: set[str], blank: tuple[str, ...] = ()) -> str:
    """The real raw page of ``case`` with some columns removed and some values replaced by n/a."""
    header, units, row = csv.reader(io.StringIO(pages(case)[0]))
    keep = [i for i, name in enumerate(header) if name not in drop]
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL)
    for line in (header, units, ["n/a" if header[i] in blank else v for i, v in enumerate(row)]):
        writer.writerow([line[i] for i in keep])
    return out.getvalue()


def test_at_least_the_four_captured_kernels_are_there():
    assert {"transpose_baseline", "sgemm_baseline", "sgemm_tuned", "reduce_sum_baseline"} <= set(CASES)


@pytest.mark.parametrize("case", CASES)
def test_every_fixture_summarises_into_a_short_actionable_text(case):
    s = summary(case)
    assert s.kernel and s.device == "NVIDIA H200" and s.duration_us > 0
    assert s.bound in ("memory", "compute", "latency") and s.bound_reason
    assert s.occupancy.limiters and s.occupancy.registers_per_thread and s.stalls and s.rules
    text = s.text()
    assert len(text) < 1800 and len(text) / 4 < 2000
    assert f"bound: {s.bound}" in text
    assert f"limiter: {' = '.join(s.occupancy.limiters)}" in text


@pytest.mark.parametrize(
    ("case", "bound", "sm_pct", "memory_pct"),
    [
        ("transpose_baseline", "memory", 6.464773, 84.977837),
        ("sgemm_tuned", "compute", 75.806974, 66.099250),
        ("sgemm_baseline", "memory", 66.020204, 99.101277),  # naive SGEMM saturates L1, not DRAM
        ("reduce_sum_baseline", "latency", 45.875331, 49.805289),  # atomics and barriers, nothing near peak
    ],
)
def test_bound_follows_the_speed_of_light_numbers(case, bound, sm_pct, memory_pct):
    s = summary(case)
    assert (s.bound, s.sm_throughput_pct, s.memory_throughput_pct) == (bound, sm_pct, memory_pct)
    assert f"{sm_pct:.1f}" in s.bound_reason and f"{memory_pct:.1f}" in s.bound_reason


def test_transpose_values_match_the_csv():
    s = summary("transpose_baseline")
    assert (s.kernel, s.grid, s.block, s.duration_us) == ("transpose", (256, 1024, 1), (32, 8, 1), pytest.approx(998.048))
    assert (s.l1_throughput_pct, s.l2_throughput_pct, s.dram_throughput_pct) == (52.621738, 84.977837, 11.599574)
    assert (s.dram_read_bytes, s.dram_write_bytes) == (pytest.approx(288_468_992), pytest.approx(268_601_088))
    assert (s.l1_hit_pct, s.l2_hit_pct, s.bank_conflicts_ld, s.bank_conflicts_st) == (67.994771, 89.284128, 0, 0)
    o = s.occupancy
    assert (o.achieved_pct, o.theoretical_pct, o.limiters, o.blocks_per_sm) == (74.993915, 100.0, ["warps per SM"], 8)
    assert (o.registers_per_thread, o.static_shared_bytes, o.dynamic_shared_bytes) == (16, 0, 0)


def test_units_are_scaled_whatever_ncu_printed():
    # sgemm_baseline's duration is printed in ms, sgemm_tuned's static shared memory in Kbyte/block
    assert summary("sgemm_baseline").duration_us == pytest.approx(6233.408)
    tuned = summary("sgemm_tuned")
    assert tuned.occupancy.static_shared_bytes == 6272  # (8 x (128 + 4) + 8 x 64) floats
    assert (tuned.bank_conflicts_ld, tuned.bank_conflicts_st) == (119_505, 278_514)  # "119,505" in the CSV


def test_sgemm_tuned_is_limited_by_registers_and_sits_right_of_the_ridge():
    s = summary("sgemm_tuned", flops=SGEMM_FLOPS)
    o = s.occupancy
    assert (s.grid, s.block, o.registers_per_thread) == ((32, 64, 1), (128, 1, 1), 165)
    assert (o.limiters, o.blocks_per_sm, o.theoretical_pct, o.achieved_pct) == (["registers"], 3, 18.75, 18.02217)
    r = s.roofline
    assert r.flops_source == "task" and r.achieved_tflops == pytest.approx(SGEMM_FLOPS / 900.128e-6 / 1e12)
    assert r.peak_fp32_tflops == pytest.approx(2 * 16896 * 1.970017e9 / 1e12)  # FFMA/cycle x 2 x SM clock
    assert r.peak_dram_gbps == pytest.approx(1504 * 3.199302)  # bytes/cycle x DRAM clock
    assert r.side == "compute" and r.ridge == pytest.approx(r.peak_fp32_tflops * 1e3 / r.peak_dram_gbps)
    # ncu's own roofline rule states the same fraction of the FP32 peak
    rules = [row.rule for row in parse_details_csv(pages("sgemm_tuned")[1]) if row.rule]
    roofline_rule = next(rule for rule in rules if rule.name == "SOLFPRoofline")
    assert f"achieved {r.fraction_of_roof:.0%} of this device's FP32 peak" in roofline_rule.description
    assert "compute side of the ridge, at 57% of the roof" in s.text()


def test_without_task_counts_the_roofline_uses_what_ncu_counted():
    tuned = summary("sgemm_tuned").roofline
    assert tuned.flops_source == "ncu fp32 counters"
    assert tuned.achieved_tflops == pytest.approx(SGEMM_FLOPS / 900.128e-6 / 1e12, rel=2e-3)  # every FLOP is an FFMA
    transpose = summary("transpose_baseline").roofline
    assert transpose.bytes_source == "ncu dram"
    assert transpose.achieved_gbps == pytest.approx((288_468_992 + 268_601_088) / 998.048e-6 / 1e9)
    assert (transpose.achieved_tflops, transpose.side) == (0.0, "memory")


def test_measured_ceilings_give_a_second_roof():
    r = summary("transpose_baseline", bytes_moved=TRANSPOSE_BYTES, ceilings=Ceilings(copy_gbps=4274, fp32_tflops=49.34)).roofline
    assert r.bytes_source == "task" and r.achieved_gbps == pytest.approx(TRANSPOSE_BYTES / 998.048e-6 / 1e9)
    assert r.fraction_of_roof == pytest.approx(r.achieved_gbps / r.peak_dram_gbps)
    assert r.fraction_of_measured_roof == pytest.approx(r.achieved_gbps / 4274)
    assert (r.measured_copy_gbps, r.measured_fp32_tflops) == (4274, 49.34)
    assert summary("transpose_baseline").roofline.fraction_of_measured_roof is None


def test_stalls_are_the_top_four_real_stalls_with_ncus_share():
    stalls = summary("transpose_baseline").stalls
    assert [s.name for s in stalls] == ["drain", "long_scoreboard", "short_scoreboard", "mio_throttle"]
    assert stalls[0].cycles_per_issue == 95.832317
    assert stalls[0].share == pytest.approx(0.440, abs=5e-4)  # ncu's rule: "about 44.0% of the total average of 217.9 cycles"
    # "selected" (the issue cycle itself) is not a stall, though it is 27 % of sgemm_tuned's cycles
    assert "selected" not in [s.name for s in summary("sgemm_tuned").stalls]


def test_rules_are_the_three_biggest_estimated_speedups_with_short_advice():
    rules = summary("transpose_baseline").rules
    assert [(r.name, r.speedup_pct) for r in rules] == [
        ("HighPipeUtilization", 96.77), ("UncoalescedGlobalAccess", 77.32), ("MemoryCacheAccessPattern", 45.93)]
    assert all(len(r.advice) <= 300 for r in rules)
    assert rules[1].advice.startswith("This kernel has uncoalesced global accesses")
    assert summarize_profile(pages("transpose_baseline")[0], None).rules == []


def test_raw_page_keeps_numbers_text_units_and_gaps():
    (kernel,) = parse_raw_csv(pages("sgemm_tuned")[0])
    assert kernel["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"].value == 278_514.0
    assert (kernel["gpu__time_duration.sum"].value, kernel["gpu__time_duration.sum"].unit) == (900.128, "us")
    assert kernel["gpu__time_duration.sum"].scaled() == pytest.approx(900.128e-6)
    assert kernel["Block Size"].value == "(128, 1, 1)" and kernel["Kernel Name"].value == "sgemm"
    assert kernel["SM_B.TriageCompute.l1tex__t_sector_hit_rate.pct"].value is None  # empty in the CSV


def test_details_page_separates_metrics_from_rules():
    rows = parse_details_csv(pages("sgemm_tuned")[1])
    registers = next(r for r in rows if r.name == "Registers Per Thread")
    assert (registers.section, registers.metric.value, registers.metric.unit) == ("Launch Statistics", 165.0, "register/thread")
    occupancy = next(r.rule for r in rows if r.rule and r.rule.name == "TheoreticalOccupancy")
    assert (occupancy.type, occupancy.speedup_type, occupancy.speedup_pct) == ("OPT", "local", 81.25)
    assert "limited by the number of required registers" in occupancy.description


@pytest.mark.parametrize("parse", [parse_raw_csv, parse_details_csv, lambda text: summarize_profile(text, None)])
def test_an_ncu_error_message_is_refused_with_its_first_line(parse):
    with pytest.raises(ProfileParseError) as caught:
        parse(PERMISSION + "\n==PROF== Disconnected from process 1487\n")
    assert PERMISSION in str(caught.value) and isinstance(caught.value, HarnessError)


def test_other_non_profiles_are_refused():
    raw, details = pages("reduce_sum_baseline")
    for text in ("", "kernel,time\nfoo,1\n", details):
        with pytest.raises(ProfileParseError):
            parse_raw_csv(text)
    with pytest.raises(ProfileParseError, match="--page details"):
        parse_details_csv(raw)
    with pytest.raises(ProfileParseError, match="kernel=1"):
        summarize_profile(raw, details, kernel=1)


def test_a_page_of_several_kernels_is_read_per_kernel():
    transpose_raw, transpose_details = pages("transpose_baseline")
    tuned_raw, tuned_details = pages("sgemm_tuned")
    raw = transpose_raw.rstrip("\n") + "\n" + tuned_raw.splitlines()[2].replace('"0"', '"1"', 1) + "\n"
    details = transpose_details.rstrip("\n") + "\n" + "\n".join(
        line.replace('"0"', '"1"', 1) for line in tuned_details.splitlines()[1:]) + "\n"
    assert [k["Kernel Name"].value for k in parse_raw_csv(raw)] == ["transpose", "sgemm"]
    second = summarize_profile(raw, details, kernel=1)
    assert (second.kernel, second.bound, second.rules[0].name) == ("sgemm", "compute", "TheoreticalOccupancy")
    assert summarize_profile(raw, details).rules == summary("transpose_baseline").rules


def test_ncu_log_lines_before_the_csv_are_skipped():
    raw = pages("reduce_sum_baseline")[0]
    assert summarize_profile("==PROF== Connected to process 1487\n" + raw, None).kernel == "reduce_sum"


def test_missing_metrics_give_none_not_guesses():
    gone = {"launch__occupancy_limit_registers", "launch__occupancy_limit_shared_mem", "launch__occupancy_limit_warps",
            "launch__occupancy_limit_blocks", "launch__occupancy_limit_barriers", "dram__bytes.sum.peak_sustained",
            "lts__t_sector_hit_rate.pct", "smsp__average_warp_latency_per_inst_issued.ratio"}
    raw = raw_without("sgemm_tuned", gone, blank=("gpu__time_duration.sum", "launch__registers_per_thread"))
    s = summarize_profile(raw, None, flops=SGEMM_FLOPS)
    assert (s.duration_us, s.occupancy.registers_per_thread, s.l2_hit_pct) == (None, None, None)
    assert (s.occupancy.limiters, s.occupancy.blocks_per_sm) == ([], None)
    r = s.roofline
    assert (r.peak_dram_gbps, r.ridge, r.side, r.fraction_of_roof, r.achieved_gbps) == (None, None, None, None, None)
    assert r.flops_source == "ncu fp32 counters"  # no duration to divide the task's count by
    assert s.bound == "compute" and s.stalls[0].name == "not_selected"
    # without ncu's cycles-between-issues the share is of the sum of the stall reasons
    (metrics,) = parse_raw_csv(raw)
    stalled = [m.value for n, m in metrics.items()
               if n.startswith("smsp__average_warps_issue_stalled_") and n.endswith("_per_issue_active.ratio")]
    assert s.stalls[0].share == pytest.approx(s.stalls[0].cycles_per_issue / sum(stalled))
    text = s.text()
    assert "limiter: n/a" in text and "L2 n/a" in text and len(text) < 1800
