"""How long a hidden check's compile waits for a compiler child when the compiler children are busy with compiles made ahead.

    python -m benchmarks.compile_queue [--configs 4] [--repeat 3]

A cold tuning run of matmul compiles its next candidates ahead (three size variants each) while a new best goes to
its hidden check, whose size variant nobody compiled yet. This replays that moment on the real compile service and
NVRTC (no GPU needed): ``--configs`` random matmul configurations' variants are submitted as compiles made ahead,
then, a moment later, one hidden-size variant. Side by side in one process, alternately: the burst made ahead
asked as ``urgent=False`` (what the ``compile`` step does now) and as urgent (as every compile was before the
queue had an order). No configuration is drawn twice, and the compile cache starts empty (a fresh folder): every compile is cold.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path

from harness_tools.compile import compile_candidate
from harness_tools.compile.case_variants import case_variants
from harness_tools.compile.child import SERVICE, compile_workers
from harness_tools.task import candidate as candidates
from harness_tools.task.loading import resolve_task
from harness_tools.task.tunable_space import TunableSpace

MATMUL = Path(__file__).resolve().parents[1] / "examples" / "matmul"
HIDDEN_N = 1536  # a size no public case has: the hidden check's compile is a variant of its own
ARCH = "sm_90"


def one_round(task, configs: list[dict], ahead_urgent: bool) -> float:
    """Seconds the hidden-size compile waited (its latency less its own NVRTC time), submitted 50 ms after the burst
    of compiles made ahead."""
    cases = task.spec.cases_for(["validation", "performance"], "cuda")
    burst = [v for c in configs[1:] for v in case_variants(candidates.tuned(task, c), task, cases)]
    hidden = candidates.for_case(candidates.tuned(task, configs[0]), task, {"N": HIDDEN_N})
    threads = [threading.Thread(target=compile_candidate, args=(v, ARCH), kwargs={"urgent": ahead_urgent})
               for v in burst]
    for thread in threads:
        thread.start()
    time.sleep(0.05)
    started = time.perf_counter()
    result = compile_candidate(hidden, ARCH)
    waited = time.perf_counter() - started
    for thread in threads:
        thread.join()
    assert result.ok and not result.cached, result.log
    return waited - result.compile_ms / 1000.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", type=int, default=4, help="configurations compiled ahead per round")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    os.environ["CUDAOPT_CUBIN_CACHE"] = tempfile.mkdtemp(prefix="cudaopt-bench-cubins-")  # every compile cold
    task = resolve_task(MATMUL)
    space = TunableSpace(task.spec.tunables.params, task.spec.tunables.constraints)
    valid = space.valid()
    random.Random(time.monotonic_ns()).shuffle(valid)  # no configuration twice: each round's compiles are all cold
    per_round = args.configs + 1
    if per_round * 2 * args.repeat > len(valid):
        parser.error(f"matmul has {len(valid)} valid configurations: at most {len(valid) // (2 * per_round)} repeats "
                     f"of {args.configs} configurations")
    SERVICE.start_ahead(compile_workers())
    time.sleep(2.0)  # the children are up, as in a run past its start
    waits: dict[str, list[float]] = {"ahead not urgent (now)": [], "ahead urgent (before)": []}
    fresh = iter(valid)
    for _ in range(args.repeat):
        for label, urgent in (("ahead not urgent (now)", False), ("ahead urgent (before)", True)):
            picked = [space.as_dict(next(fresh)) for _ in range(per_round)]
            waits[label].append(one_round(task, picked, urgent))
    print(f"compiler children: {compile_workers()}; per round {args.configs} configurations made ahead "
          f"(3 variants each) and one hidden-size compile")
    print("| compiles made ahead asked as | the hidden-size compile waited, s (each round) | median |")
    print("|---|---|---:|")
    for label, values in waits.items():
        print(f"| {label} | {' / '.join(f'{v:.3f}' for v in values)} | {statistics.median(values):.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
