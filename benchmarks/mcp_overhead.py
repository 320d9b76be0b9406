"""MCP overhead: `evaluate` through the MCP server (a real stdio subprocess) against a direct engine call.

    python benchmarks/mcp_overhead.py [--backend cuda] [--repeats 3] [--tasks ...]

Both paths evaluate each task's baseline on the same backend with the same seed (so both oracles are
cached after the first call, which is dropped as warm-up). Wall time of the direct `evaluate()` call is
compared with the client-side wall time of the `evaluate` tool call. Also checks that both paths give
the same verdict (correct, and the status of every case).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

from harness_tools import candidate as candidates  # noqa: E402
from harness_tools.backends import create_backend  # noqa: E402
from harness_tools.evaluate import EvaluationConfig, evaluate  # noqa: E402
from harness_tools.spec import bundled_task_names, resolve_task  # noqa: E402

SEED = 20261129


def direct(task_name: str, backend_name: str, repeats: int, roles: list[str]) -> tuple[list[float], tuple]:
    backend = create_backend(backend_name)
    task = resolve_task(task_name)
    times, verdict = [], None
    try:
        for _ in range(repeats + 1):
            start = time.perf_counter()
            result = evaluate(task, candidates.baseline(task), backend, EvaluationConfig(seed=SEED, roles=roles))
            times.append(time.perf_counter() - start)
            verdict = (result.correct, tuple(c.status for c in result.cases))
    finally:
        backend.close()
    return times[1:], verdict


async def through_mcp(task_name: str, backend_name: str, repeats: int, results: str,
                      roles: list[str]) -> tuple[list[float], tuple]:
    params = StdioServerParameters(command=sys.executable, cwd=str(Path(__file__).resolve().parents[1]),
                                   args=["-m", "cudaopt_mcp.server", "--results", results, "--backend", backend_name])
    times, verdict = [], None
    async with Client(params) as client:
        run_id = (await client.call_tool("create_run", {"task": task_name})).structured_content["run_id"]
        for i in range(repeats + 1):
            args = {"run_id": run_id, "seed": SEED, "roles": roles, "timeout_s": 120}
            if i:
                args["candidate_id"] = "c0001"
            start = time.perf_counter()
            out = (await client.call_tool("evaluate", args)).structured_content
            times.append(time.perf_counter() - start)
            verdict = (out["correct"], tuple(c["status"] for c in out["cases"]))
    return times[1:], verdict


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tasks", nargs="*", default=bundled_task_names())
    parser.add_argument("--roles", nargs="*", default=["validation", "performance"])
    args = parser.parse_args()
    print(f"# MCP overhead on backend {args.backend}, {args.repeats} timed evaluations per path (after one warm-up)")
    print(f"{'task':<14}{'direct_s':>10}{'mcp_s':>10}{'overhead':>10}  same verdict")
    with tempfile.TemporaryDirectory() as results:
        for name in args.tasks:
            d_times, d_verdict = direct(name, args.backend, args.repeats, args.roles)
            m_times, m_verdict = anyio.run(through_mcp, name, args.backend, args.repeats, results, args.roles)
            d, m = statistics.median(d_times), statistics.median(m_times)
            print(f"{name:<14}{d:>10.3f}{m:>10.3f}{m / d - 1:>+10.1%}  {d_verdict == m_verdict} "
                  f"({'correct' if d_verdict[0] else 'NOT correct'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
