"""Where a short ``cudaopt optimize`` spends the time that is not its configurations (issue 17's one-off costs).

    python -m benchmarks.fixed_costs --examples vector_add reduction --iterations 8 --repeat 3 --out DIR

Per example, ``--repeat`` runs of the real CLI (``--proposer tuner --no-confirm --no-report``, one seed, one
cubin cache: the first run is cold, the rest warm), alternately with the examples so that noise hits all. Printed:

* the wall split from the loop's journal (start-up until the baseline's evaluate, the baseline's evaluate,
  the configurations' evaluates, between calls, after the last call);
* inside the baseline's evaluate: the worker's start as the server logged it ("ready in"), the evaluation's
  own stages (``overhead`` in its evaluation.json) and its hidden-shape check's (it becomes the first best);
* the bare import time of the client's and the server's modules, in fresh interpreters, for scale.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.installed_bytecode import compile_installed
from benchmarks.kernel_tuner_examples import read_json, wall_split

ROOT = Path(__file__).resolve().parents[1]
SEED = 20261129
SPLIT = ["startup", "baseline", "configs", "between", "after"]
STAGES = ["compile_ms", "inputs_ms", "reference_ms", "load_ms", "transfer_ms", "validate_ms", "time_ms", "compare_ms",
          "total_ms", "hidden_ms"]  # hidden: the hidden-shape check the baseline passes as the first best
IMPORTS = {"client": "import cudaopt_mcp.cli.main, cudaopt_mcp.client.loop, cudaopt_mcp.client.session",
           "server": "import cudaopt_mcp.server.app"}


def one_run(example: str, iterations: int, out: Path, index: int, backend: str | None) -> dict:
    results = out / "results" / f"{example}-{index}"
    shutil.rmtree(results, ignore_errors=True)
    cmd = [sys.executable, "-m", "cudaopt_mcp.cli", "-v", "optimize", _task(example), "--proposer", "tuner",
           "--max-iterations", str(iterations), "--seed", str(SEED), "--results", str(results), "--json",
           "--no-confirm", "--no-report"] + (["--backend", backend] if backend else [])
    env = {**os.environ, "OPENAI_API_KEY": "", "CUDAOPT_CUBIN_CACHE": str(out / "cache" / example)}
    started, started_epoch = time.perf_counter(), time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    wall = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        return {"error": f"optimize rc {proc.returncode}: {proc.stderr[-1500:]}"}
    run_id = json.loads(proc.stdout)["run_id"]
    split = wall_split(results / run_id / "optimize.jsonl", started_epoch, wall)
    baseline = results / run_id / "candidates" / "c0001"
    overhead = read_json(baseline / "evaluation.json").get("overhead") or {}
    hidden = (read_json(baseline / ".hidden-check.json").get("evaluation") or {}).get("overhead") or {}
    ready = [float(s) for s in re.findall(r"ready in ([0-9.]+) s", proc.stderr)]
    return {"wall": wall, **split, "worker_ready": ready[0] if ready else None, **overhead,
            "hidden_ms": hidden.get("total_ms")}


def _task(example: str) -> str:
    return f"examples/{example}" if (ROOT / "examples" / example).is_dir() else example


def import_seconds(code: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def table(rows: dict[str, list[dict]]) -> str:
    keys = ["wall"] + SPLIT + ["worker_ready"]
    lines = ["seconds; run 1 is cold (empty cubin cache), the others warm; baseline stages in ms",
             "| example | run | " + " | ".join(keys) + " | " + " | ".join(s.removesuffix("_ms") for s in STAGES) + " |",
             "|---|---:|" + "---:|" * (len(keys) + len(STAGES))]
    for example, runs in rows.items():
        for i, r in enumerate(runs, 1):
            if "error" in r:
                lines.append(f"| {example} | {i} | {r['error'][:200]} |")
                continue
            lines.append(f"| {example} | {i} | " + " | ".join(_fmt(r.get(k), ".2f") for k in keys) + " | "
                         + " | ".join(_fmt(r.get(s), ".0f") for s in STAGES) + " |")
    return "\n".join(lines)


def _fmt(x, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", nargs="+", default=["vector_add", "stencil", "reduction"])
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--backend", choices=["cuda", "cpu"])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    print(compile_installed(), file=sys.stderr, flush=True)
    for example in args.examples:
        shutil.rmtree(args.out / "cache" / example, ignore_errors=True)
    rows: dict[str, list[dict]] = {e: [] for e in args.examples}
    for index in range(args.repeat):
        for example in args.examples:
            rows[example].append(one_run(example, args.iterations, args.out, index, args.backend))
    print(table(rows))
    print("\nbare imports, fresh interpreter, median of 3: " + ", ".join(
        f"{name} {import_seconds(code, 3):.2f} s" for name, code in IMPORTS.items()))
    (args.out / "fixed_costs.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
