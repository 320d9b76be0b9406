"""False progress: does evaluating one kernel again and again ever crown a "new best"?

    python -m benchmarks.false_progress [--backend cuda] [--repeats 50] [--tasks sgemm ...] [--reps N]
                                        [--budget server|off|both]

Per bundled task, a fresh run through the service, exactly as the MCP `evaluate` tool drives it (fresh inputs
every time, the server's timing plan): the task's baseline first, then one kernel (the task's tunable kernel at
a fixed configuration where it has one, else the baseline) ``repeats`` times as *clones* — the same code with
an unused define that makes each a new candidate — and ``--same`` more times as the very same candidate. The
first clone may beat the baseline for real; every later "new best" is false progress (the goal is 0).
Beside it, the old rule (the lowest number ever measured wins) on the same measurements, the CV per
performance case (median over the evaluations) and the spread of the score. ``--budget both`` runs every task
twice, with the server's search budget (a slow kernel's case timed for about 50 ms) and without it, side by side.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from cudaopt_mcp.service import evaluations, run_creation
from cudaopt_mcp.service.arguments import CandidateArgs, TimingArgs
from cudaopt_mcp.service.state import SEARCH_BUDGET_MS, ServerConfig, ServerState
from harness_tools import bundled_task_names

TUNED = {"sgemm": {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8, "MINB": 1, "WIDE_MIN": 128}}


def run_task(state: ServerState, task: str, repeats: int, same: int, timeout_s: float, reps: int | None) -> dict:
    run_id = run_creation.create_run(state, task, None, None, None).run_id
    timing = TimingArgs(timeout_s=timeout_s, reps=reps)
    outs = [evaluations.execute_step(state, "evaluate", run_id, timing=timing)]  # the baseline: the first best
    tunables = TUNED.get(task)
    for i in range(repeats):
        cand = CandidateArgs(tunables=tunables, defines={"CUDAOPT_CLONE": i + 1})
        outs.append(evaluations.execute_step(state, "evaluate", run_id, candidate=cand, timing=timing))
    first = outs[1].candidate_id if len(outs) > 1 else None
    for _ in range(same if first else 0):
        outs.append(evaluations.execute_step(state, "evaluate", run_id, candidate_id=first, timing=timing))
    # a tuned first clone may beat the baseline for real; a clone of the baseline never does
    return summarize(task, outs, repeats, start=2 if tunables else 1)


def summarize(task: str, outs: list, clones: int, start: int) -> dict:
    """Counts from ``start``: every evaluation from there on measures code already measured."""
    scores = [o.score_ms if o.score_ms is not None else float("inf") for o in outs]
    false_new = sum(o.new_best for o in outs[start:])
    old_rule = sum(1 for i in range(start, len(scores)) if scores[i] < min(scores[:i]))
    cvs: dict[str, list[float]] = {}
    for o in outs:
        for c in o.cases:
            if c.cv is not None:
                cvs.setdefault(c.name, []).append(c.cv)
    scores = [s for s in scores[start:] if s != float("inf")]  # the spread of re-measuring one kernel
    return {"task": task, "evaluations": len(outs), "repeats": len(outs) - start, "clones": clones,
            "correct": sum(o.correct for o in outs),
            "false_new_best": false_new, "old_rule_new_best": old_rule,
            "score_median_ms": statistics.median(scores) if scores else None,
            "score_spread": (max(scores) - min(scores)) / statistics.median(scores) if scores else None,
            "cv_median": {name: statistics.median(v) for name, v in cvs.items()},
            "decisions": sorted({(o.best_decision or "").split(":")[0] for o in outs[start:]}),
            # how far the rule was pushed: repeats that got to a head-to-head, and the whole text of every false crown
            "head_to_heads": sum(o.new_best or "head-to-head" in (o.best_decision or "") for o in outs[start:]),
            "false_decisions": [o.best_decision for o in outs[start:] if o.new_best]}


def _row(r: dict) -> str:
    cv = ", ".join(f"{k} {v:.2%}" for k, v in r["cv_median"].items())
    score = f"{r['score_median_ms']:.4g}" if r["score_median_ms"] else "-"
    spread = f"{r['score_spread']:.1%}" if r["score_spread"] is not None else "-"
    return (f"{r['task']:<22}{r['evaluations']:>6}{r['correct']:>8}{r['false_new_best']:>15}{r['old_rule_new_best']:>9}"
            f"{score:>11}{spread:>8}{r['head_to_heads']:>5}  {cv}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=None, help="default: cuda on a GPU host, else cpu")
    parser.add_argument("--repeats", type=int, default=50, help="clones of the kernel evaluated")
    parser.add_argument("--same", type=int, default=5, help="re-evaluations of the first clone itself")
    parser.add_argument("--tasks", nargs="*", default=bundled_task_names())
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--reps", type=int, help="timed launches per performance case (default: the server's)")
    parser.add_argument("--budget", choices=["server", "off", "both"], default="server",
                        help="the server's search budget for slow kernels, none, or each task with and without")
    args = parser.parse_args()
    rows = []
    budgets = {"server": [SEARCH_BUDGET_MS], "off": [None], "both": [SEARCH_BUDGET_MS, None]}[args.budget]
    with tempfile.TemporaryDirectory(prefix="false-progress-") as tmp:
        states = {b: ServerState.open(ServerConfig(results_dir=Path(tmp) / str(b), backend=args.backend,
                                                   search_budget_ms=b)) for b in budgets}
        print(f"backend {states[budgets[0]].backend_name}; {args.repeats} clones + {args.same} re-evaluations per "
              f"task, after the baseline; {args.reps or 'the default'} timed launches", flush=True)
        print(f"{'task':<22}{'evals':>6}{'correct':>8}{'false new best':>15}{'old rule':>9}{'score ms':>11}"
              f"{'spread':>8}{'h2h':>5}  "
              "median CV per performance case", flush=True)
        try:
            for task in args.tasks:  # each row as it is measured: a long run that is cut short still reports
                for budget, state in states.items():
                    rows.append(run_task(state, task, args.repeats, args.same, args.timeout, args.reps))
                    rows[-1]["task"] = f"{task} ({f'{budget:g} ms' if budget else 'no budget'})"
                    print(_row(rows[-1]), flush=True)
                    if args.json:
                        args.json.write_text(json.dumps(rows, indent=2))
        finally:
            for state in states.values():
                state.close()
    total = sum(r["false_new_best"] for r in rows)
    print(f"false progress: {total} new best(s) in {sum(r['repeats'] for r in rows)} repeat evaluations "
          f"(goal 0); the old rule would have crowned {sum(r['old_rule_new_best'] for r in rows)}")
    return 0 if total == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
