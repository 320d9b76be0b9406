"""Which candidate is the run's best, decided the way a benchmark engineer would accept.

A scored, fully validated result from the run's own backend is *offered*; it becomes the best only when

1. its score's confidence interval (:mod:`harness_tools.run.statistics`) lies wholly below the best's, by at
   least the backend's ``min_gain`` (a gain inside the noise, or inside the drift between evaluations of
   identical code, is never progress);
2. it passes the task's hidden shapes (:mod:`cudaopt_mcp.service.hidden`; never shown to the model), checked
   last: after a head-to-head it has won (whose GPU time covers the check's compiles, made meanwhile);
3. unless its whole interval lies below the best's by the backend's ``sure_gain`` (cuda: a quarter, seven times
   the drift measured between evaluations of identical code; cpu: never), a head-to-head re-measurement confirms
   it: the best (and the baseline, when it is another candidate) and the challenger are timed again in rounds
   whose order reverses (I C, C I, I C), on the same input seed, each round with a third of the plan
   (:func:`round_plan`: the rounds pooled time about as many launches as one evaluation); the challenger must win
   every round and its pooled interval again lie below the best's by ``min_gain``. Drift between evaluations
   (clocks, a neighbour on the GPU) then hits both sides.

The stored best number is that head-to-head measurement, with its interval, the incumbent it beat and the
baseline measured beside it (so "speed-up vs baseline" compares like with like). The baseline, when it is a third
contender, is timed in the middle round only: it takes no part in the decision, and a slow baseline timed in
every round made each new best cost several evaluations of it (about 1.2 s per configuration of a 16-point
matmul search on the H200). Its timed launches are also bounded by time (:func:`baseline_round_plan`): matmul's
26 ms baseline timed 3 + 30 times was 0.9 s of each 2 s head-to-head on the H100. Re-evaluating the best says
whether the new measurement agrees with the recorded one, and checks the hidden shapes again (the end of a
run): a best that fails them stops being the best.
"""

from __future__ import annotations

import logging
import math
import statistics
import time

from pydantic import BaseModel

from cudaopt_mcp.api import EvaluateOutput
from cudaopt_mcp.service.candidates import load_candidate
from cudaopt_mcp.service.export import export_best
from cudaopt_mcp.service.hidden import compile_meanwhile
from cudaopt_mcp.service.runs import BestRecord, atomic_write
from cudaopt_mcp.service.state import ServerState
from harness_tools import EvaluationConfig, EvaluationResult, backend_traits, evaluate
from harness_tools.run.scratch import scratch_dir
from harness_tools.run.statistics import Interval, clearly_faster, median_interval, score_interval
from harness_tools.run.timing import MIN_BUDGET_REPS, TimingPlan, geomean
from harness_tools.task.candidate import Candidate
from harness_tools.task.spec import Task

log = logging.getLogger("cudaopt.mcp")
HEAD_TO_HEAD_TIMEOUT_S = 120.0  # per evaluation: the offer's own budget may be nearly spent by the time it is offered
BASELINE_ROUND_MS = 150.0  # at most about this much of timed launches for the baseline's one round ...
MIN_BASELINE_REPS = 5  # ... and never fewer launches than this: a median and its interval, of a kernel this slow
ROUNDS = 3  # head-to-head rounds: each times every contender once; the order reverses every round (A B, B A, A B).
# Winning all of them by chance has odds 1 in 8: with two rounds (1 in 4) one clone of sgemm was crowned on the H200.


class Offer(BaseModel):
    """A scored result offered for best: whose, how fast, how sure, measured how."""

    candidate_id: str
    result: EvaluationResult
    config: EvaluationConfig

    def record(self) -> BestRecord:
        r = self.result
        return BestRecord(candidate_id=self.candidate_id, score_ms=r.score_ms or 0.0, backend=r.backend, seed=r.seed,
                          score_ci=r.score_ci)


def offer(state: ServerState, run_id: str, task: Task, cand: Candidate, offered: Offer, out: EvaluateOutput) -> None:
    """Decide whether ``offered`` becomes the best; fill ``out.new_best`` and ``out.best_decision``. Under the run lock."""
    best = state.store.best(run_id)
    if best is not None and best.candidate_id == offered.candidate_id:
        out.best_decision, out.agrees_with_best = _remeasured(state, run_id, task, cand, offered, best)
        return
    if best is not None:
        why_not = _not_clearly_faster(offered.record(), best, "")
        if why_not:
            out.best_decision = why_not
            return
    if best is None:
        record, decision = _first(state, run_id, offered), "the first scored correct candidate"
    elif _beyond_drift(state, offered.record(), best):
        record = _sure(offered, best)
        decision = (f"new best: {_fmt(record)} vs {best.candidate_id} at {_fmt(best)}, a gain beyond any drift "
                    f"between evaluations (over {_sure_gain(state):.0%}): no head-to-head needed")
    else:
        compile_meanwhile(state, task, cand)  # the hidden check's compiles, on the host while the GPU times
        record = _head_to_head(state, run_id, task, cand, offered, best)
        why_not = _not_clearly_faster(record, best, "head-to-head ") or _lost_a_round(record, best)
        if why_not:
            out.best_decision = why_not
            return
        decision = (f"new best: {_fmt(record)} vs {best.candidate_id} at {record.incumbent_score_ms:.4g} ms, "
                    f"head-to-head on seed {record.seed} with the same plan")
    refused = _fails_hidden(state, run_id, task, cand, offered.candidate_id)
    if refused:
        out.best_decision = refused
        return
    _crown(state, run_id, task, cand, record)
    out.new_best, out.best_decision = True, decision


def _first(state: ServerState, run_id: str, offered: Offer) -> BestRecord:
    """The first best; when it is the baseline itself, it is its own baseline (a speed-up of exactly 1)."""
    record = offered.record()
    if _baseline_id(state, run_id) == offered.candidate_id:
        record.baseline_score_ms = record.score_ms
    return record


def _sure_gain(state: ServerState) -> float | None:
    chosen = state.config.sure_gain
    return chosen if chosen is not None else backend_traits(state.backend_name).sure_gain


def _beyond_drift(state: ServerState, record: BestRecord, best: BestRecord) -> bool:
    """The challenger's interval lies so far below the best's that re-timing both could not change the verdict."""
    gain = _sure_gain(state)
    if gain is None or record.score_ci is None or best.score_ci is None or record.backend != best.backend:
        return False
    return clearly_faster(record.score_ci, best.score_ci, gain)


def _sure(offered: Offer, best: BestRecord) -> BestRecord:
    """The record of a gain beyond drift: the offer's own measurement, against the best as recorded."""
    record = offered.record()
    record.confirmed_against, record.incumbent_score_ms, record.incumbent_ci = best.candidate_id, best.score_ms, best.score_ci
    return record


def _not_clearly_faster(record: BestRecord, best: BestRecord, how: str) -> str | None:
    """Why ``record`` is not faster than ``best`` beyond the noise, or None. After a head-to-head (``how``), the
    incumbent's side is its measurement in that comparison, not its old record."""
    theirs_ms = record.incumbent_score_ms if how and record.incumbent_score_ms else best.score_ms
    theirs = record.incumbent_ci if how and record.incumbent_ci else best.score_ci
    mine, floor = record.score_ci, backend_traits(record.backend).min_gain
    faster = (record.score_ms < theirs_ms * (1 - floor) if mine is None or theirs is None
              else clearly_faster(mine, theirs, floor))
    if faster:
        return None
    where = "slower than" if record.score_ms >= theirs_ms else f"within the noise (or under {floor:.0%} faster) of"
    ci = f" [{theirs.low_ms:.4g}, {theirs.high_ms:.4g}]" if theirs else ""
    return f"not a new best: {how}{_fmt(record)} is {where} the best, {best.candidate_id} at {theirs_ms:.4g} ms{ci}"


def _lost_a_round(record: BestRecord, best: BestRecord) -> str | None:
    """A confirmed gain wins every round of the head-to-head, not only the pooled comparison."""
    if record.rounds_won is None or record.rounds is None or record.rounds_won == record.rounds:
        return None
    return (f"not a new best: head-to-head on seed {record.seed}, {_fmt(record)} beat {best.candidate_id} in only "
            f"{record.rounds_won} of {record.rounds} rounds")


def _remeasured(state: ServerState, run_id: str, task: Task, cand: Candidate, offered: Offer,
                best: BestRecord) -> tuple[str, bool | None]:
    """(decision, agrees): the hidden shapes again, then the new measurement against the recorded one."""
    refused = _fails_hidden(state, run_id, task, cand, offered.candidate_id)
    if refused:
        state.store.clear_best(run_id, refused)
        return f"{refused}; it is no longer the run's best", None
    mine, theirs = offered.result.score_ci, best.score_ci
    agrees = mine is None or theirs is None or not (mine.high_ms < theirs.low_ms or theirs.high_ms < mine.low_ms)
    verdict = "agrees with" if agrees else "DISAGREES beyond the noise with"
    return f"re-measured the best: {_fmt(offered.record())} {verdict} its recorded {_fmt(best)}", agrees


def _fails_hidden(state: ServerState, run_id: str, task: Task, cand: Candidate, candidate_id: str) -> str | None:
    from cudaopt_mcp.service.hidden import check_hidden

    verdict = check_hidden(state, run_id, task, cand, candidate_id)
    if verdict.passed:
        return None
    return f"fails hidden shapes ({', '.join(verdict.failed_classes) or 'unnamed'}): {verdict.message}"


def _head_to_head(state: ServerState, run_id: str, task: Task, cand: Candidate, offered: Offer,
                  best: BestRecord) -> BestRecord:
    """Time incumbent, challenger (and baseline) in turn on the offer's seed and plan; pool each one's samples."""
    contenders = {best.candidate_id: load_candidate(state, run_id, best.candidate_id), offered.candidate_id: cand}
    baseline = _baseline_record(state, run_id)
    baseline_id = baseline.candidate_id if baseline else None
    if baseline_id and baseline_id not in contenders:
        contenders[baseline_id] = load_candidate(state, run_id, baseline_id)
    config = offered.config.model_copy(update={"seed": offered.result.seed, "roles": ["performance"], "outputs_dir": None,
                                               "timeout_s": HEAD_TO_HEAD_TIMEOUT_S, "stop_timing_above_ms": {}})
    if config.timing is not None:
        config = config.model_copy(update={"timing": round_plan(config.timing)})
    third = baseline is not None and baseline_id not in (best.candidate_id, offered.candidate_id)
    baseline_config = config
    if third and baseline is not None and config.timing is not None:
        baseline_config = config.model_copy(update={"timing": baseline_round_plan(config.timing, baseline.score_ms)})
    samples: dict[str, dict[str, list[float]]] = {cid: {} for cid in contenders}
    per_round: dict[str, list[float]] = {cid: [] for cid in contenders}
    order = list(contenders)
    started = time.perf_counter()
    with state.lease() as worker, scratch_dir("cudaopt-h2h-"):  # every contender on one GPU
        for r in range(ROUNDS):
            # reversing the order each round cancels a steady drift (clocks ramping, a neighbour leaving) that
            # would otherwise favour whoever is timed second: seen on the H200 with a fixed order
            for cid in order if r % 2 == 0 else reversed(order):
                if third and cid == baseline_id and r != ROUNDS // 2:
                    continue  # the baseline only gives the speed-up its like-for-like figure: one round, the middle
                plan = baseline_config if third and cid == baseline_id else config
                result = evaluate(task, contenders[cid], worker.backend, plan)
                per_round[cid].append(result.score_ms or float("inf"))
                for case in result.cases:
                    if case.timing is not None:
                        samples[cid].setdefault(case.name, []).extend(case.timing.samples_ms)
    log.debug("head-to-head of %s against %s: %d evaluations in %.3f s", offered.candidate_id, best.candidate_id,
              sum(map(len, per_round.values())), time.perf_counter() - started)
    if not all(samples.values()):  # a contender timed nothing (a case failed or ran out of time): no verdict
        return BestRecord(candidate_id=offered.candidate_id, score_ms=offered.result.score_ms or 0.0,
                          backend=offered.result.backend, seed=offered.result.seed, score_ci=offered.result.score_ci,
                          confirmed_against=best.candidate_id, rounds=ROUNDS, rounds_won=0)
    scores = {cid: _pooled(cases) for cid, cases in samples.items()}
    won = sum(c < i for c, i in zip(per_round[offered.candidate_id], per_round[best.candidate_id]))
    mine, theirs = scores[offered.candidate_id], scores[best.candidate_id]
    base = scores.get(baseline_id) if baseline_id else None
    return BestRecord(candidate_id=offered.candidate_id, score_ms=mine[0], backend=offered.result.backend,
                      seed=offered.result.seed, score_ci=mine[1], confirmed_against=best.candidate_id,
                      incumbent_score_ms=theirs[0], incumbent_ci=theirs[1],
                      baseline_score_ms=base[0] if base else None,
                      baseline_reps=baseline_config.timing.reps if third and base and baseline_config.timing else None,
                      warmup=config.timing.warmup if config.timing else None,
                      reps=min(map(len, samples[offered.candidate_id].values())), rounds=ROUNDS, rounds_won=won)


def _pooled(cases: dict[str, list[float]]) -> tuple[float, Interval]:
    """(score, interval) from each case's pooled samples: the geometric mean of their medians."""
    return (geomean([statistics.median(s) for s in cases.values()]),
            score_interval([median_interval(s) for s in cases.values()]))


def round_plan(plan: TimingPlan) -> TimingPlan:
    """One head-to-head round's plan: a third of ``plan``'s timed launches and of its budget, never fewer launches
    than :data:`MIN_BUDGET_REPS` (nor more than the plan's). Three full plans per contender made a fast kernel's
    head-to-head time 300 launches of each where one evaluation times 100; the pooled interval decides as well on
    one evaluation's worth, and the rounds are there for the drift, not for more samples."""
    reps = min(plan.reps, max(MIN_BUDGET_REPS, math.ceil(plan.reps / ROUNDS)))
    budget = plan.budget_ms / ROUNDS if plan.budget_ms is not None else None
    return plan.model_copy(update={"reps": reps, "budget_ms": budget})


def baseline_round_plan(plan: TimingPlan, baseline_ms: float | None) -> TimingPlan:
    """The plan for the baseline's one head-to-head round: ``plan``'s launches, fewer for a baseline so slow that
    they would take over ``BASELINE_ROUND_MS`` (its figure is the speed-up's denominator, not a verdict), never
    fewer than ``MIN_BASELINE_REPS``."""
    if not baseline_ms or baseline_ms <= 0:
        return plan
    reps = max(MIN_BASELINE_REPS, math.ceil(BASELINE_ROUND_MS / baseline_ms))
    return plan if reps >= plan.reps else plan.model_copy(update={"reps": reps})


def _baseline_record(state: ServerState, run_id: str) -> BestRecord | None:
    path = state.store.run_file(run_id, "baseline.json")
    return BestRecord.model_validate_json(path.read_text()) if path.is_file() else None


def _baseline_id(state: ServerState, run_id: str) -> str | None:
    record = _baseline_record(state, run_id)
    return record.candidate_id if record else None


def _crown(state: ServerState, run_id: str, task: Task, cand: Candidate, record: BestRecord) -> None:
    store = state.store
    atomic_write(store.run_file(run_id, "best.json"), record.model_dump_json(indent=2, exclude_none=True))
    store.append_history(run_id, {"event": "best", "candidate_id": record.candidate_id, "score_ms": record.score_ms,
                                  **({"beat": record.confirmed_against} if record.confirmed_against else {})})
    export_best(store.run_dir(run_id), run_id, task, cand, record)


def _fmt(record: BestRecord) -> str:
    ci = record.score_ci
    return f"{record.score_ms:.4g} ms" + (f" [{ci.low_ms:.4g}, {ci.high_ms:.4g}]" if ci else "")
