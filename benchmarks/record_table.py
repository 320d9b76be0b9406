"""Every valid configuration of a task measured once, in this process: the exhaustive table offline replays need.

    python -m benchmarks.record_table TASK --out FILE.json [--backend cuda|cpu] [--reps 10] [--warmup 2]
                                      [--seed S] [--limit N] [--time-budget-s T] [--resume] [--top N --of TABLE]

TASK is a bundled task name or a task folder. Each configuration goes through the engine's public ``evaluate``
with the performance cases only (they are still checked against the oracle), one after another on one backend.
Compiles run ahead: while one configuration is evaluated, the next ones' NVRTC compiles (every per-case
size-define variant) run on a thread pool, so evaluate finds them in the compile cache and the GPU waits on
the compiler only when the pool falls behind. The JSON is rewritten atomically every ``SAVE_EVERY`` points,
so a run stopped by ``--time-budget-s``, a timeout or a signal keeps what it measured, and ``--resume`` measures
only what is missing (a space larger than one session's command limit is recorded in several); ``tuner_replay.py``
reads it (``"format": "cudaopt-table/1"``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from harness_tools import EvaluationConfig, HarnessError, TimingPlan, create_backend, evaluate, resolve_task
from harness_tools.compile.case_variants import compile_variants
from harness_tools.compile.child import compile_workers
from harness_tools.task.candidate import tuned
from harness_tools.task.tunable_space import TunableSpace

FORMAT = "cudaopt-table/1"
SEED = 20261129  # tuner_bench's seed: the same inputs as the tuner's exhaustive runs
SAVE_EVERY = 50
ROLES = ["performance"]


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def valid_configurations(task, limit: int | None) -> list[dict[str, int]]:
    tun = task.spec.tunables
    if tun is None:
        raise SystemExit(f"task {task.name} has no tunables")
    space = TunableSpace(tun.params, tun.constraints)
    valid = space.valid()
    if valid is None:
        raise SystemExit(f"task {task.name}: {space.size} configurations, too many to list")
    return [space.as_dict(c) for c in valid[:limit]]


class CompileAhead:
    """The NVRTC compiles of the next configurations, submitted ahead of their evaluation.

    The window is a few configurations per compile worker: enough to keep the compiler pool busy while
    one is being timed, small enough that a time-limited run wastes few compiles and that the variants in
    flight stay inside the engine's in-memory compile cache (256 entries; convolution has 8 per point).
    """

    def __init__(self, task, cases, arch: str, configs: list[dict[str, int]]):
        self.task, self.cases, self.arch = task, cases, arch
        self.pending = deque(enumerate(configs))
        self.window = 2 * compile_workers()
        self.pool = ThreadPoolExecutor(compile_workers(), thread_name_prefix="record-compile")
        self.futures: dict[int, Future] = {}
        self._fill()

    def _fill(self) -> None:
        while self.pending and len(self.futures) < self.window:
            index, config = self.pending.popleft()
            self.futures[index] = self.pool.submit(self._compile, config)

    def _compile(self, config: dict[str, int]) -> dict:
        try:
            results = compile_variants(tuned(self.task, config), self.task, self.cases, self.arch)
        except HarnessError:  # evaluate reports the same problem as the point's failure
            return {}
        resources = results[0].resources if results else None
        return {"compile_ms": round(sum(r.compile_ms for r in results), 3), "variants": len(results),
                "compile_cached": bool(results) and all(r.cached for r in results),
                "registers": resources.registers if resources else None,
                "spill_store_bytes": resources.spill_store_bytes if resources else None,
                "spill_load_bytes": resources.spill_load_bytes if resources else None}

    def take(self, index: int) -> dict:
        """Wait for configuration ``index``'s compiles (submitted in order) and queue the next ones."""
        future = self.futures.pop(index)
        self._fill()
        return future.result()

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def measure(task, backend, config: dict[str, int], plan: EvaluationConfig) -> dict:
    """One configuration's row: correct, the score, each performance case's median, the first failure."""
    started = time.perf_counter()
    try:
        result = evaluate(task, tuned(task, config), backend, plan)
    except HarnessError as exc:  # e.g. a case that does not fit: a failed point, not a failed run
        return {"tunables": config, "correct": False, "failure": f"{type(exc).__name__}: {exc}".splitlines()[0],
                "score_ms": None, "case_medians_ms": {}, "eval_ms": round((time.perf_counter() - started) * 1e3, 3)}
    return {"tunables": config, "correct": result.correct,
            "failure": result.failure.splitlines()[0] if result.failure else None,
            "score_ms": result.score_ms,
            "case_medians_ms": {c.name: c.median_ms for c in result.cases if c.median_ms is not None},
            "eval_ms": round(result.overhead.total_ms, 3),
            "eval_compile_ms": round(result.overhead.compile_ms, 3)}  # 0 when the compile ahead was in time


class TableFile:
    """The table on disk, rewritten whole under a temporary name and renamed, so a reader never sees half."""

    def __init__(self, path: Path, header: dict, earlier: list[dict]):
        self.path, self.header, self.points, self.new = path, header, list(earlier), 0

    def add(self, point: dict) -> None:
        self.points.append(point)
        self.new += 1
        if len(self.points) % SAVE_EVERY == 0:
            self.save()

    def save(self, finished: bool = False) -> None:
        self.header.update(measured=len(self.points), finished=now() if finished else None)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({**self.header, "points": self.points}, indent=1))
        os.replace(tmp, self.path)


def header_for(task, backend, args, valid: int) -> dict:
    device = backend.device_info()
    return {"format": FORMAT, "task": task.name, "task_ref": args.task, "backend": backend.name, "device": device.name,
            "arch": device.arch, "driver": device.driver_version, "seed": args.seed,
            "plan": {"warmup": args.warmup, "reps": args.reps, "roles": ROLES}, "compile_workers": compile_workers(),
            "started": now(), "finished": None, "valid": valid, "measured": 0, "stopped": None,
            "top_of": f"the {args.top} fastest of {args.of.name}" if args.top else None}


def earlier_points(header: dict, path: Path) -> list[dict]:
    """With --resume: the points an earlier run with the same task, backend, seed and plan left in ``path``."""
    if not path.exists():
        return []
    earlier = json.loads(path.read_text())
    clash = [k for k in ("task", "backend", "device", "seed", "plan") if earlier.get(k) != header[k]]
    if clash:
        raise SystemExit(f"{path} was recorded with another {', '.join(clash)}: not resumed (give another --out)")
    return earlier["points"]


def record(task, backend, args) -> TableFile:
    valid = fastest_of(args.of, args.top) if args.top else valid_configurations(task, None)
    header = header_for(task, backend, args, len(valid))
    earlier = earlier_points(header, args.out) if args.resume else []
    done = {tuple(sorted(p["tunables"].items())) for p in earlier}
    configs = [c for c in valid[:args.limit] if tuple(sorted(c.items())) not in done]
    header["resumed_with"] = len(earlier)
    table = TableFile(args.out, header, earlier)
    plan = EvaluationConfig(seed=args.seed, timing=TimingPlan(warmup=args.warmup, reps=args.reps), roles=ROLES)
    cases = task.spec.cases_for(ROLES, backend.name)
    ahead = CompileAhead(task, cases, backend.device_info().arch, configs)
    started = time.perf_counter()
    try:
        for index, config in enumerate(configs):
            if args.time_budget_s is not None and time.perf_counter() - started > args.time_budget_s:
                table.header["stopped"] = f"time budget of {args.time_budget_s:g} s spent"
                break
            compiled = ahead.take(index)
            table.add({**measure(task, backend, config, plan), **compiled})
            if (index + 1) % SAVE_EVERY == 0:
                print(f"{index + 1}/{len(configs)} in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    except (KeyboardInterrupt, SystemExit) as exc:
        table.header["stopped"] = f"interrupted ({type(exc).__name__})"
    finally:
        ahead.close()
        table.header["wall_s"] = round(time.perf_counter() - started, 3)
        table.save(finished=True)
    return table


def fastest_of(path: Path | None, count: int) -> list[dict[str, int]]:
    """The ``count`` fastest correct configurations of a recorded table, fastest first (to time them again, longer:
    whether its best is alone within 3 % or only its noise says so)."""
    from benchmarks.tuner_replay import read_table

    if path is None:
        raise SystemExit("--top needs --of TABLE")
    _, points = read_table(path)
    correct = sorted((p for p in points if p.get("correct") and p.get("score_ms") is not None),
                     key=lambda p: p["score_ms"])
    return [dict(p["tunables"]) for p in correct[:count]]


def report(table: TableFile) -> None:
    points, wall = table.points, table.header["wall_s"]  # wall: this run's, over its table.new points
    correct = [p for p in points if p["correct"] and p["score_ms"] is not None]
    print(f"\n{'task':<22}{'measured':>10}{'correct':>9}{'best ms':>12}{'s/config':>10}{'wall s':>9}")
    best = min(correct, key=lambda p: p["score_ms"]) if correct else None
    per = wall / table.new if table.new else float("nan")
    measured = f"{len(points)}/{table.header['valid']}"
    print(f"{table.header['task']:<22}{measured:>10}{len(correct):>9}"
          f"{best['score_ms'] if best else float('nan'):>12.4g}{per:>10.3f}{wall:>9.1f}")
    if best:
        print("best: " + " ".join(f"{k}={v}" for k, v in best["tunables"].items()))
    failures = [p["failure"] for p in points if not p["correct"]]
    if failures:
        print(f"{len(failures)} failed, first: {failures[0]}")
    if table.header["stopped"]:
        print(f"stopped early: {table.header['stopped']}")


def _stop_on_sigterm(*_) -> None:
    raise SystemExit(143)  # unwinds through record(), which saves what was measured


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--limit", type=int, help="only the first N valid configurations")
    parser.add_argument("--time-budget-s", type=float, help="stop (and save) once this many seconds have passed")
    parser.add_argument("--resume", action="store_true", help="keep the points already in --out, measure the rest")
    parser.add_argument("--top", type=int, help="only the N fastest configurations of the table given by --of")
    parser.add_argument("--of", type=Path, help="a recorded table (with --top)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    task = resolve_task(args.task)
    backend = create_backend(args.backend)
    try:
        table = record(task, backend, args)
    finally:
        backend.close()
    report(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
