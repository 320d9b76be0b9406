"""MCP overhead: `evaluate` through the MCP server (a real stdio subprocess) against a direct engine call.

    python -m benchmarks.mcp_overhead [--backend cuda] [--repeats 3] [--tasks ...]

Both paths evaluate each task's baseline on the same backend with the same seed (so both oracles are
cached after the first call, which is dropped as warm-up). Wall time of the direct `evaluate()` call is
compared with the client-side wall time of the `evaluate` tool call. Also checks that both paths give
the same verdict (correct, and the status of every case).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

from harness_tools import EvaluationConfig, bundled_task_names, create_backend, evaluate, resolve_task
from harness_tools.task import candidate as candidates

SEED = 20261129


PHASES = ("inputs_ms", "reference_ms", "load_ms", "validate_ms", "time_ms", "compare_ms")


def phases(overhead: dict) -> dict[str, float]:
    """The engine's own stages, plus 'other': worker round trips, file I/O, environment reads."""
    parts = {k: overhead[k] for k in PHASES}
    parts["other_ms"] = overhead["total_ms"] - sum(parts.values()) - overhead.get("compile_ms", 0.0)
    return parts


def direct_once(task_name: str, backend, roles: list[str], timing: dict) -> tuple[float, dict, tuple]:
    task = resolve_task(task_name)
    start = time.perf_counter()
    config = EvaluationConfig(seed=SEED, roles=roles, **({"timing": timing} if timing else {}))
    result = evaluate(task, candidates.baseline(task), backend, config)
    return time.perf_counter() - start, result.overhead.model_dump(), (
        result.correct, tuple(c.status for c in result.cases))


async def side_by_side(task_name: str, backend_name: str, repeats: int, results: str, roles: list[str],
                       timing: dict) -> dict:
    """Alternate direct and MCP evaluations (ABAB...), so drifts of the machine hit both alike."""
    # The SDK passes only a minimal environment to a stdio server: hand over ours (PYTHONPATH, caches).
    params = StdioServerParameters(command=sys.executable, cwd=str(Path(__file__).resolve().parents[1]),
                                   args=["-m", "cudaopt_mcp.server", "--results", results, "--backend", backend_name],
                                   env=dict(os.environ))
    rows: dict[str, list] = {"direct": [], "direct_engine": [], "mcp": [], "mcp_engine": [], "verdicts": set(),
                             "direct_phases": [], "mcp_phases": []}
    backend = create_backend(backend_name)
    try:
        async with Client(params) as client:
            run_id = (await client.call_tool("create_run", {"task": task_name})).structured_content["run_id"]
            for i in range(repeats + 1):
                wall, direct_overhead, verdict = await anyio.to_thread.run_sync(direct_once, task_name, backend, roles, timing)
                args = {"run_id": run_id, "seed": SEED, "roles": roles, "timeout_s": 120, **timing}
                if i:
                    args["candidate_id"] = "c0001"
                start = time.perf_counter()
                out = (await client.call_tool("evaluate", args)).structured_content
                mcp_wall = time.perf_counter() - start
                record = Path(results) / run_id / "candidates" / "c0001" / "evaluation.json"
                mcp_overhead = json.loads(record.read_text())["overhead"]
                rows["verdicts"] |= {verdict, (out["correct"], tuple(c["status"] for c in out["cases"]))}
                if i:  # the first round is warm-up: worker start, compile, oracle
                    for key, value in (("direct", wall), ("direct_engine", direct_overhead["total_ms"] / 1e3),
                                       ("mcp", mcp_wall), ("mcp_engine", mcp_overhead["total_ms"] / 1e3),
                                       ("direct_phases", phases(direct_overhead)),
                                       ("mcp_phases", phases(mcp_overhead))):
                        rows[key].append(value)
    finally:
        backend.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tasks", nargs="*", default=bundled_task_names())
    parser.add_argument("--roles", nargs="*", default=["validation", "performance"])
    parser.add_argument("--warmup", type=int, help="timing warm-up for both paths (default: each path's own)")
    parser.add_argument("--reps", type=int, help="timed launches for both paths (default: each path's own)")
    args = parser.parse_args()
    print(f"# MCP overhead on backend {args.backend}, {args.repeats} timed evaluations per path (after one warm-up)")
    print("direct_s / mcp_s: wall time of one evaluation (median); engine_s: the engine's own total inside each")
    print(f"{'task':<14}{'direct_s':>10}{'engine_s':>10}{'mcp_s':>10}{'engine_s':>10}{'overhead':>10}  same verdict")
    breakdown = []
    with tempfile.TemporaryDirectory() as results:
        for name in args.tasks:
            timing = {k: v for k, v in (("warmup", args.warmup), ("reps", args.reps)) if v is not None}
            rows = anyio.run(side_by_side, name, args.backend, args.repeats, results, args.roles, timing)
            d, de = statistics.median(rows["direct"]), statistics.median(rows["direct_engine"])
            m, me = statistics.median(rows["mcp"]), statistics.median(rows["mcp_engine"])
            same = len(rows["verdicts"]) == 1
            correct = all(v[0] for v in rows["verdicts"])
            print(f"{name:<14}{d:>10.3f}{de:>10.3f}{m:>10.3f}{me:>10.3f}{m / d - 1:>+10.1%}  {same} "
                  f"({'correct' if correct else 'NOT correct'})")
            breakdown.append((name, rows))
    print("\nengine stages, median ms per evaluation (direct / mcp)")
    names = [*PHASES, "other_ms"]
    print(f"{'task':<14}" + "".join(f"{n[:-3]:>18}" for n in names))
    for name, rows in breakdown:
        cells = [f"{statistics.median(p[n] for p in rows['direct_phases']):.0f} / "
                 f"{statistics.median(p[n] for p in rows['mcp_phases']):.0f}" for n in names]
        print(f"{name:<14}" + "".join(f"{c:>18}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
