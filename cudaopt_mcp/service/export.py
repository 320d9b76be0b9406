"""The best kernel as a standalone ``.cu`` users can take away: defines baked in, launch written down.

Written into the run folder (``best_kernel.cu`` and ``best_launch.json``) each time the run's best
changes, so it always matches ``best.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

from cudaopt_mcp.service.runs import BestRecord, atomic_write
from harness_tools import Candidate, Task, backend_traits
from harness_tools.errors import CandidateError
from harness_tools.task.candidate import for_case


def export_best(run_dir: Path, run_id: str, task: Task, candidate: Candidate, record: BestRecord) -> None:
    cases = []
    for case in task.spec.cases_for(["performance"], record.backend):
        try:
            plan = for_case(candidate, task, case.sizes).launch_plan(case.sizes)
        except CandidateError:
            continue
        cases.append({"case": case.name, "sizes": case.sizes,
                      "launches": [{"kernel": k, "grid": g, "block": b, "shared_mem": m} for k, (g, b, m) in plan]})
    launch = {"kernel_name": candidate.kernel_name,
              "launch": candidate.launch.model_dump() if candidate.launch else None,
              "launches": [s.model_dump() for s in candidate.launches] if candidate.launches else None,
              "scratch": [b.model_dump() for b in candidate.scratch], "size_defines": dict(task.spec.size_defines),
              "defines": dict(candidate.defines), "options": list(candidate.options), "per_case": cases,
              "run_id": run_id, "candidate_id": record.candidate_id, "score_ms": record.score_ms,
              "backend": record.backend, "seed": record.seed}
    atomic_write(run_dir / "best_launch.json", json.dumps(launch, indent=2))
    atomic_write(run_dir / "best_kernel.cu", standalone_source(run_id, task, candidate, record, cases))


def standalone_source(run_id: str, task: Task, candidate: Candidate, record: BestRecord, cases: list[dict]) -> str:
    clock = backend_traits(record.backend).clock
    lines = [
        f"// cudaopt: best kernel of {run_id} (task {task.name}), candidate {record.candidate_id}",
        f"// score {record.score_ms:.6g} ms: geometric mean of the performance cases' median latencies "
        f"({clock}, {record.backend} backend, input seed {record.seed})",
        (f"// launches, as expressions over the case sizes ({', '.join(task.spec.sizes)}) and the defines below "
         "(in order, on one stream):"),
    ]
    for kernel, launch, args in candidate.steps():
        lines.append(f"//   {kernel}: grid {launch.grid}, block {launch.block}, dynamic shared memory "
                     f"{launch.shared_mem} bytes" + (f", args {[_arg(a) for a in args]}" if args is not None else ""))
    for buf in candidate.scratch:
        lines.append(f"//   scratch {buf.name}: {buf.count} x {buf.dtype}")
    if task.spec.size_defines:
        lines.append(f"// per case, the task also defines: {', '.join(f'{k} = {v}' for k, v in task.spec.size_defines.items())}")
    for c in cases:
        sizes = ", ".join(f"{k}={v}" for k, v in c["sizes"].items())
        shown = "; ".join(f"grid {tuple(x['grid'])}, block {tuple(x['block'])}, shared {x['shared_mem']}"
                          for x in c["launches"])
        lines.append(f"//   {c['case']} ({sizes}): {shown}")
    if candidate.options:
        lines.append(f"// NVRTC options: {' '.join(candidate.options)}")
    for name, value in candidate.defines.items():
        lines += [f"#ifndef {name}", f"#define {name} {value}", "#endif"]
    return "\n".join(lines) + "\n\n" + candidate.source.rstrip() + "\n"


def _arg(ref) -> str:
    return ref if isinstance(ref, str) else f"{ref.value} ({ref.dtype})"
