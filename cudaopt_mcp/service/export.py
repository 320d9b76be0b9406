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


def export_best(run_dir: Path, run_id: str, task: Task, candidate: Candidate, record: BestRecord) -> None:
    cases = []
    for case in task.spec.cases_for(["performance"], record.backend):
        try:
            grid, block, shared = candidate.launch_dims(case.sizes)
        except CandidateError:
            continue
        cases.append({"case": case.name, "sizes": case.sizes, "grid": grid, "block": block, "shared_mem": shared})
    launch = {"kernel_name": candidate.kernel_name, "launch": candidate.launch.model_dump(),
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
        f"// kernel: {candidate.kernel_name}; launch, as expressions over the case sizes "
        f"({', '.join(task.spec.sizes)}) and the defines below:",
        f"//   grid  = {candidate.launch.grid}",
        f"//   block = {candidate.launch.block}",
        f"//   dynamic shared memory = {candidate.launch.shared_mem} bytes",
    ]
    for c in cases:
        sizes = ", ".join(f"{k}={v}" for k, v in c["sizes"].items())
        lines.append(f"//   {c['case']} ({sizes}): grid {tuple(c['grid'])}, block {tuple(c['block'])}, "
                     f"shared {c['shared_mem']}")
    if candidate.options:
        lines.append(f"// NVRTC options: {' '.join(candidate.options)}")
    for name, value in candidate.defines.items():
        lines += [f"#ifndef {name}", f"#define {name} {value}", "#endif"]
    return "\n".join(lines) + "\n\n" + candidate.source.rstrip() + "\n"
