"""Where one configuration's evaluation goes, case by case, on the GPU host (issue 17: a configuration should
cost its compile plus its GPU time).

    python -m benchmarks.case_costs [--examples vector_add matmul ...] [--configs 6] [--compare-from 16777216 65536]
                                    [--profile 25] [--profile-host 25]

Per example (folders in examples/), ``--configs`` tunable configurations (a fixed seed's sample), one seed:
the baseline first (it draws the inputs and the oracle), then each configuration twice (the second is warm:
compiled, its module loaded), through ``evaluate()`` on the real ``cuda`` backend (jailed worker). One row per
case of the warm evaluations, medians over the configurations, in ms:

- the worker's own stages (``CaseRun``: load, set-up, the validation launch, collect = download and checks,
  device compare, timed launches);
- ``round trip``: the parent's wall time of ``run_case`` less the worker's stages (the pipe, JSON, pydantic);
- ``host``: the rest of the evaluation in ``evaluate()`` (inputs, the oracle's lookup, the requests, the verdicts).

One table per ``--compare-from`` (``EvaluationConfig.device_compare_min_bytes``: outputs from that size on are
compared on the device; the default is a search step's, as the ``evaluate`` tool uses).

With ``--profile N`` the same warm evaluations run again on an in-process executor (no worker, no jail): its table,
then a cProfile of it (the N functions with the most own time, and the most in all): what the worker's stages are
made of. ``--profile-host N`` profiles the parent's side with the jailed worker.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import random
import statistics
import time
from collections import defaultdict
from pathlib import Path

from harness_tools import EvaluationConfig, TimingPlan, create_backend, evaluate, resolve_task
from harness_tools.backends.contract import CaseRequest, CaseRun, DeviceInfo
from harness_tools.check.device_compare import SEARCH_DEVICE_COMPARE_MIN_BYTES
from harness_tools.task import candidate as candidates

ROOT = Path(__file__).resolve().parent.parent
STAGES = ("load", "setup", "run", "collect", "device_compare", "time", "round_trip", "host", "case")


class InProcessCuda:
    """The cuda executor in this process: for profiling its Python only (no jail, no worker)."""

    name = "cuda"

    def __init__(self):
        from harness_tools.backends.cuda.backend import CudaBackend
        from harness_tools.backends.cuda.executor import CudaExecutor

        self.traits = CudaBackend.traits
        self.executor = CudaExecutor(0)
        self._info = DeviceInfo.model_validate(self.executor.info())

    def device_info(self) -> DeviceInfo:
        return self._info

    def run_case(self, request: CaseRequest, timeout_s: float) -> CaseRun:
        return CaseRun.model_validate(self.executor.run_case(request.model_dump()))

    def close(self) -> None:
        pass


class TimedBackend:
    """Wraps a backend: the parent's wall time of each run_case, in order."""

    def __init__(self, inner):
        self.inner, self.name, self.traits = inner, inner.name, inner.traits
        self.walls: list[float] = []

    def device_info(self):
        return self.inner.device_info()

    def run_case(self, request, timeout_s):
        started = time.perf_counter()
        run = self.inner.run_case(request, timeout_s)
        self.walls.append((time.perf_counter() - started) * 1e3)
        return run

    def close(self):
        self.inner.close()


def configs_of(task, count: int) -> list[dict[str, int]]:
    from harness_tools.task.tunable_space import TunableSpace

    tun = task.spec.tunables
    space = TunableSpace(tun.params, tun.constraints)
    valid = [space.as_dict(c) for c in space.valid()]
    return random.Random(17).sample(valid, min(count, len(valid)))


def warm_rows(task, backend: TimedBackend, config: EvaluationConfig, configs) -> tuple[dict, list[float]]:
    """Per case name, per stage, the values over the warm evaluations; and the evaluations' walls."""
    rows: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    walls = []
    for tunables in configs:
        cand = candidates.tuned(task, tunables)
        evaluate(task, cand, backend, config)  # cold: compile, module load
        backend.walls.clear()
        started = time.perf_counter()
        result = evaluate(task, cand, backend, config)
        walls.append((time.perf_counter() - started) * 1e3)
        case_walls = iter(backend.walls)
        for case in result.cases:
            run = case.run
            if run is None:
                continue
            wall = next(case_walls, 0.0)
            compare = sum(c.compare_ms for c in run.comparisons.values())
            stages = {"load": run.load_ms, "setup": run.setup_ms, "run": run.run_ms,
                      "collect": run.collect_ms - compare, "device_compare": compare, "time": run.time_ms}
            stages["round_trip"] = wall - sum(stages.values())
            for stage, value in stages.items():
                rows[case.name][stage].append(value)
            rows[case.name]["wall"].append(wall)
    return rows, walls


def print_rows(example: str, rows: dict, walls: list[float]) -> None:
    print(f"\n{example}: warm evaluate() median {statistics.median(walls):.1f} ms over {len(walls)} configurations;"
          " per case, medians in ms")
    head = ("load", "setup", "run", "collect", "device_compare", "time", "round_trip", "wall")
    print(f"{'case':<24}" + "".join(f"{h:>15}" for h in head))
    totals = defaultdict(float)
    for name, stages in rows.items():
        values = {h: statistics.median(stages[h]) for h in head}
        for h, v in values.items():
            totals[h] += v
        print(f"{name:<24}" + "".join(f"{values[h]:>15.2f}" for h in head))
    print(f"{'sum':<24}" + "".join(f"{totals[h]:>15.2f}" for h in head)
          + f"   host (evaluate less run_case): {statistics.median(walls) - totals['wall']:.1f}")


def profile(task, config: EvaluationConfig, configs, top: int, backend=None) -> None:
    """cProfile of warm evaluations: on ``backend`` (the jailed worker: what the parent's Python costs), or on an
    in-process executor when None (what the worker's Python costs)."""
    own = backend is None
    backend = backend or TimedBackend(InProcessCuda())
    try:
        if own:
            evaluate(task, candidates.baseline(task), backend, config)
            rows, walls = warm_rows(task, backend, config, configs)  # the same table without the pipe and the jail
            print_rows(f"{task.name}, in-process executor", rows, walls)
        profiler = cProfile.Profile()
        profiler.enable()
        for tunables in configs:
            evaluate(task, candidates.tuned(task, tunables), backend, config)
        profiler.disable()
    finally:
        if own:
            backend.close()
    for order in ("tottime", "cumulative"):
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats(order).print_stats(top)
        print(f"--- {'in-process executor' if own else 'parent, jailed worker'}, by {order}")
        print(text.getvalue())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", nargs="+", default=["vector_add", "stencil", "reduction", "matmul", "convolution"])
    parser.add_argument("--configs", type=int, default=6)
    parser.add_argument("--profile", type=int, default=0, help="print this many functions of an in-process profile")
    parser.add_argument("--profile-host", type=int, default=0,
                        help="print this many functions of the parent's profile (jailed worker)")
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--backend", default="cuda", help="cpu: a smoke test of this script on a machine without a GPU")
    parser.add_argument("--compare-from", type=int, nargs="+", default=[SEARCH_DEVICE_COMPARE_MIN_BYTES],
                        help="device_compare_min_bytes, one table each (default: a search step's, as evaluate uses)")
    args = parser.parse_args()
    backend = TimedBackend(create_backend(args.backend))
    base = EvaluationConfig(seed=args.seed, timing=TimingPlan(warmup=3, reps=30), timeout_s=600)
    try:
        for example in args.examples:
            task = resolve_task(str(ROOT / "examples" / example))
            configs = configs_of(task, args.configs)
            started = time.perf_counter()
            evaluate(task, candidates.baseline(task), backend, base)
            print(f"\n{example}: baseline (inputs, oracle) {time.perf_counter() - started:.2f} s", flush=True)
            for threshold in args.compare_from:
                config = base.model_copy(update={"device_compare_min_bytes": threshold})
                rows, walls = warm_rows(task, backend, config, configs)
                print_rows(f"{example}, outputs from {threshold} B compared on the device", rows, walls)
            if args.profile_host:
                profile(task, config, configs, args.profile_host, backend)
            if args.profile and args.backend == "cuda":
                profile(task, config, configs, args.profile)
    finally:
        backend.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
