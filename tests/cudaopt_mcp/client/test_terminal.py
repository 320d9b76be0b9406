"""What `cudaopt optimize` prints per attempt: numbers that agree with each other and with the server's verdict.

Seen on the README's main job (cpu backend, two busy cores): the baseline's first evaluation measured 11.13 ms, the
head-to-head that crowned the kernel's defaults timed it at 6.95 ms beside them, so the line said 4.08x while the
progress bar said 6.84x; the bar showed the crowning evaluation's own noisy score (3.328 ms) where the run's best is
recorded at its head-to-head 1.676 ms; and later candidates with lower scores than the best were not crowned (the
noise, a lost head-to-head round) without a word on why.
"""

from __future__ import annotations

import io

from cudaopt_mcp.api import CaseOutcome, CompileBrief, EvaluateOutput
from cudaopt_mcp.client.proposal import Attempt, Proposal
from cudaopt_mcp.client.terminal import Terminal

LOST = "not a new best: head-to-head on seed 7, 1.402 ms beat c0002 in only 2 of 3 rounds"


def attempt(iteration: int, score: float, speedup: float, vs_best: float | None, new_best: bool,
            decision: str | None = None, baseline_ms: float = 11.13, best_ms: float | None = None) -> Attempt:
    cid = f"c{iteration + 1:04d}"
    out = EvaluateOutput(run_id="run-001", candidate_id=cid, step="evaluate", correct=True, backend="cpu",
                         roles=["validation", "performance"], compile=CompileBrief(ok=True, status="ok"), cases=[],
                         score_ms=score, baseline_score_ms=baseline_ms, speedup_vs_baseline=speedup,
                         speedup_vs_best=vs_best, new_best=new_best, best_decision=decision, best_score_ms=best_ms,
                         source_uri=f"cudaopt://runs/run-001/candidates/{cid}/source", elapsed_s=1.0)
    return Attempt(iteration=iteration, candidate_id=cid, status="correct", correct=True, score_ms=score,
                   speedup_vs_baseline=speedup, speedup_vs_best=vs_best, new_best=new_best, evaluation=out,
                   proposal=Proposal(tunables={"BM": 128}) if iteration else None)


def lines(*attempts: Attempt) -> list[str]:
    stream = io.StringIO()  # not a terminal: one line per event, with the progress bar
    terminal = Terminal(stream)
    terminal.start("run-001", "sgemm", "cpu", "tuner", 3, 7, resumed=False)
    for a in attempts:
        terminal.attempt(a)
    return stream.getvalue().splitlines()[1:]


def test_a_best_crowned_head_to_head_shows_one_speed_up_and_its_recorded_score_on_its_line_and_in_the_bar():
    base = attempt(0, 11.13, 1.0, None, True, best_ms=11.13)
    best = attempt(1, 3.328, 4.14, 3.34, True, "new best: ...", best_ms=1.676)
    line = lines(base, best)[1]
    assert "3.328 ms CPU; head to head 1.676 ms CPU, 4.14x the baseline timed beside it — new best" in line
    assert line.endswith("best 1.676 ms CPU (4.14x the baseline)")
    assert "3.34x" not in line


def test_a_lower_score_that_is_not_crowned_says_why_and_a_slower_one_says_nothing():
    base = attempt(0, 11.13, 1.0, None, True, best_ms=11.13)
    best = attempt(1, 3.328, 4.14, 3.34, True, "new best: ...", best_ms=1.676)
    faster = attempt(2, 1.381, 8.06, 1.2137, False, LOST, best_ms=1.676)
    slower = attempt(3, 1.901, 5.85, 0.8816, False, "not a new best: 1.901 ms is slower than the best, c0002",
                     best_ms=1.676)
    shown = lines(base, best, faster, slower)
    assert f"1.381 ms CPU, 8.06x the baseline — {LOST}" in shown[2]
    assert "timed beside it" not in shown[2] and "best 1.676 ms CPU (4.14x the baseline)" in shown[2]
    assert shown[3].split("  [")[0].endswith("1.901 ms CPU, 5.85x the baseline")


def test_a_best_whose_speed_up_is_the_plain_ratio_is_not_called_timed_beside_it():
    base = attempt(0, 2.0, 1.0, None, True, baseline_ms=2.0, best_ms=2.0)
    best = attempt(1, 1.0, 2.0, 2.0, True, baseline_ms=2.0, best_ms=1.0)
    line = lines(base, best)[1]
    assert "1 ms CPU, 2.00x the baseline — new best" in line and line.endswith("(2.00x the baseline)")


def test_a_score_timed_in_part_says_so_and_a_full_one_says_nothing():
    base = attempt(0, 11.13, 1.0, None, True, best_ms=11.13)
    slow = attempt(1, 40.2, 0.28, 0.28, False, "not a new best: 40.2 ms is slower than the best, c0001", best_ms=11.13)
    slow.evaluation.cases = [CaseOutcome(name="perf_a", role="performance", status="passed", passed=True, median_ms=40.2,
                                         reps=5, planned_reps=30, timing_stopped="timed 5 of 30 launches: ..."),
                             CaseOutcome(name="perf_b", role="performance", status="passed", passed=True, median_ms=9.0,
                                         reps=30),
                             CaseOutcome(name="perf_c", role="performance", status="passed", passed=True, median_ms=9.0,
                                         reps=10, planned_reps=30, timing_cut="budget")]  # the search's normal measure
    shown = lines(base, slow)
    assert "40.2 ms CPU, 0.28x the baseline (timed 5 of 30 launches: clearly slower than the best)" in shown[1]
    assert "timed" not in shown[0]
