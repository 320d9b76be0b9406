"""Our measured table as a Kernel Tuner cache file, and Kernel Tuner's strategies replayed on it (simulation mode).

    python -m benchmarks.kt_cache TABLE.json [--cache OUT.json]    # convert, then check the round trip

Kernel Tuner (1.5) replays a strategy without a GPU when every configuration of its search space is in its
cache (``tune_kernel(simulation_mode=True, cache=FILE)``): the file is JSON, keyed by the tunable values joined
with commas in ``tune_params`` order, each entry holding the tunables and ``time`` (our objective, in ms). A
configuration that failed with us gets ``time`` = ``"CompilationFailedConfig"`` or ``"RuntimeFailedConfig"``,
the strings Kernel Tuner writes for its own failures (its cache reader turns them back into errors, which
every strategy treats as the worst cost). Its search space is exactly our measured configurations: the
restriction is membership, so it never asks for one the table lacks (simulation mode raises then).

Kernel Tuner takes a ``seed`` but only its pymoo strategies use it; the others draw from the global
``random`` and ``numpy.random`` generators, so both are seeded before each run. Kernel Tuner is imported
inside functions: the benchmarks import without it.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import warnings
from pathlib import Path

KERNEL_NAME = "replayed"  # the cache and tune_kernel must agree on it; nothing is compiled
KERNEL_SOURCE = "__global__ void replayed() {}"
PROBLEM_SIZE = [1]
COMPILE_FAILED, RUN_FAILED = "CompilationFailedConfig", "RuntimeFailedConfig"

# Every strategy of Kernel Tuner 1.5 except brute_force (the exhaustive run itself).
STRATEGIES = ("random_sample", "genetic_algorithm", "pso", "simulated_annealing", "firefly_algorithm", "bayes_opt",
              "greedy_ils", "greedy_mls", "ordered_greedy_mls", "mls", "dual_annealing", "diff_evo", "basinhopping",
              "minimize", "hybrid_vndx", "adaptive_tabu_greywolf", "skopt", "pyatf_strategies", "nsga2")


def kt_key(names: list[str], tunables: dict[str, int]) -> str:
    return ",".join(str(tunables[n]) for n in names)


def tune_params(points: list[dict]) -> dict[str, list[int]]:
    """Each tunable's values as measured, sorted (the order Kernel Tuner's neighbourhoods walk)."""
    names = list(points[0]["tunables"])
    return {n: sorted({p["tunables"][n] for p in points}) for n in names}


def kt_time(point: dict, objective: str | None) -> float | str:
    """The cached ``time``: the score (or one case's median) of a correct point, else Kernel Tuner's failure name."""
    value = point.get("score_ms") if objective is None else point.get("case_medians_ms", {}).get(objective)
    if point.get("correct") and value is not None:
        return value
    return COMPILE_FAILED if (point.get("failure") or "").startswith("compile") else RUN_FAILED


def cache_document(points: list[dict], objective: str | None = None, device: str = "table") -> dict:
    params = tune_params(points)
    names = list(params)
    cache = {kt_key(names, p["tunables"]): {**p["tunables"], "time": kt_time(p, objective)} for p in points}
    return {"device_name": device, "kernel_name": KERNEL_NAME, "problem_size": PROBLEM_SIZE,
            "tune_params_keys": names, "tune_params": params, "objective": "time", "cache": cache}


def write_cache(points: list[dict], path: Path, objective: str | None = None, device: str = "table") -> Path:
    path.write_text(json.dumps(cache_document(points, objective, device)))
    return path


def membership(names: list[str], allowed: set[str]):
    """The restriction "is in the table", as a named function: Kernel Tuner rewrites lambdas into expressions.
    It gets the configuration as a dict, or (a one-parameter space, straight from python-constraint) the value."""
    def in_table(*args) -> bool:
        config = args[0] if len(args) == 1 and isinstance(args[0], dict) else dict(zip(names, args))
        return kt_key(names, config) in allowed

    return in_table


def kernel_tuner_version() -> str | None:
    try:
        from importlib.metadata import version

        import kernel_tuner  # noqa: F401 - the import is the check

        return version("kernel_tuner")
    except ImportError:
        return None


def run_strategy(cache: Path, strategy: str, budget: int, seed: int) -> list[str]:
    """The distinct configurations (cache keys) ``strategy`` evaluated, in the order it first asked for them."""
    import numpy as np
    from kernel_tuner import tune_kernel

    document = json.loads(cache.read_text())
    names, allowed = document["tune_params_keys"], set(document["cache"])
    random.seed(seed)
    np.random.seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results, _ = tune_kernel(KERNEL_NAME, KERNEL_SOURCE, PROBLEM_SIZE, [], document["tune_params"], lang="CUDA",
                                 restrictions=membership(names, allowed), cache=str(cache),
                                 simulation_mode=True, strategy=strategy, strategy_options={"max_fevals": budget},
                                 quiet=True, verbose=False, seed=seed)
    return list(dict.fromkeys(kt_key(names, r) for r in results))


def round_trip_problems(points: list[dict], cache: Path) -> list[str]:
    """Every measured configuration must come back from Kernel Tuner's own cache reader, and from a brute-force
    replay in simulation mode, with the same time (or as a failure where we failed)."""
    from kernel_tuner import tune_kernel
    from kernel_tuner.util import ErrorConfig, read_cache

    document = read_cache(str(cache), open_cache=False)
    names = document["tune_params_keys"]
    read = document["cache"]
    allowed = set(read)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        brute, _ = tune_kernel(KERNEL_NAME, KERNEL_SOURCE, PROBLEM_SIZE, [], document["tune_params"], lang="CUDA",
                               restrictions=membership(names, allowed), cache=str(cache),
                               simulation_mode=True, strategy="brute_force", quiet=True, verbose=False)
    replayed = {kt_key(names, r): r for r in brute}
    problems = []
    for p in points:
        key, want = kt_key(names, p["tunables"]), kt_time(p, None)
        for source, entries in (("read_cache", read), ("brute force", replayed)):
            got = entries.get(key)
            if got is None:
                problems.append(f"{key}: missing from {source}")
            elif isinstance(want, float) and got.get("time") != want:
                problems.append(f"{key}: {source} time {got.get('time')!r}, table {want!r}")
            elif isinstance(want, str) and not isinstance(got.get("__error__"), ErrorConfig):
                problems.append(f"{key}: failed in the table, {source} has {got.get('time')!r}")
    if len(replayed) != len(points):
        problems.append(f"brute force replayed {len(replayed)} configurations, the table has {len(points)}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", type=Path, help="a record_table.py file")
    parser.add_argument("--cache", type=Path, help="where to write the cache (default: a temporary file)")
    args = parser.parse_args()
    points = json.loads(args.table.read_text())["points"]
    with tempfile.TemporaryDirectory() as scratch:
        cache = write_cache(points, args.cache or Path(scratch) / "cache.json")
        problems = round_trip_problems(points, cache)
    failed = sum(not isinstance(kt_time(p, None), float) for p in points)
    print(f"{len(points)} configurations ({failed} failed) -> Kernel Tuner {kernel_tuner_version()} cache: "
          + ("round trip exact" if not problems else f"{len(problems)} problems"))
    for line in problems[:20]:
        print("  " + line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
