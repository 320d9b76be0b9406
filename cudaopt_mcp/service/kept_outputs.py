"""Which kernel outputs a run folder keeps: the evidence of failures, the baseline's and the best's, within a budget.

Every output is replayable (inputs come from the recorded seed), so outputs are kept only where someone will look:
a failed case's (where in the output it is wrong: up to 64 MiB per case, and up to ``CUDAOPT_RUN_OUTPUTS_MB`` of
failures per run, default 256), and a passed case's of the baseline and of the current best (8 MiB per case).
A passing candidate that a scored ``evaluate`` (the search's step) does not make the best loses its outputs
(``run``, ``time`` and validation-only evaluations keep theirs: they are how a client looks at outputs); a best
that is displaced loses them too. Before this, every passing candidate of a small task kept a 4 MiB output: 90 MB after 23.
A search step compares outputs of 64 KiB or more on the GPU (service.evaluations): of those only failures come back,
so its baseline and best keep their smaller outputs only (``run`` brings back the rest).

The worker wrote the files and runs candidate code: each file is opened once (never through a link, only inside
the scratch folder) and its content copied, so nothing it swaps in later reaches the results folder. The cases
whose outputs are kept are listed in ``outputs/kept.json`` ({case: "passed" | "failed"}).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from cudaopt_mcp.service.runs import ARTIFACT, atomic_write
from harness_tools.check.worker_files import open_worker_file
from harness_tools.evaluation import CaseResult, EvaluationResult

KEEP_OUTPUT_BYTES = 64 << 20  # outputs of a failed case: the evidence
KEEP_PASSED_OUTPUT_BYTES = 8 << 20  # a passed case's: copying big ones to disk on every call cost more than the rest
RUN_BUDGET_MB = 256
MANIFEST = "kept.json"


def run_budget_bytes() -> int:
    text = os.environ.get("CUDAOPT_RUN_OUTPUTS_MB", "")
    try:
        return max(0, int(text)) << 20 if text else RUN_BUDGET_MB << 20
    except ValueError:
        raise ValueError(f"CUDAOPT_RUN_OUTPUTS_MB={text!r} is not a whole number of MiB") from None


def keep_outputs(result: EvaluationResult, scratch: Path, folder: Path, run_dir: Path, passed: bool = True) -> list[str]:
    """Copy each case's outputs (when small, and failures within the run's budget) into the candidate folder.
    ``passed=False``: a passed case's outputs are neither copied nor named in its run (a search step's candidate
    keeps them only once it is the best; copying them to delete them a moment later was most of a step's own time)."""
    target = folder / "outputs"
    shutil.rmtree(target, ignore_errors=True)
    # what the run's failures hold already is read only when this one has some: it reads every candidate's manifest
    failures_left = run_budget_bytes() - failure_bytes(run_dir) if not all(c.passed for c in result.cases) else 0
    manifest: dict[str, str] = {}
    for case in result.cases:
        if case.passed and not passed:
            if case.run is not None:
                case.run.outputs = {}
            continue
        size = _keep_case(case, scratch, target, failures_left)
        if size is None:
            continue
        manifest[case.name] = "passed" if case.passed else "failed"
        failures_left -= 0 if case.passed else size
    if manifest:
        atomic_write(target / MANIFEST, json.dumps(manifest))
    return list(manifest)


def _keep_case(case: CaseResult, scratch: Path, target: Path, failures_left: int) -> int | None:
    """Bytes kept for ``case``, or None (its run then names no output files)."""
    if case.run is None or not case.run.outputs or not ARTIFACT.match(case.name):
        return None
    handles = {name: open_worker_file(path, scratch) for name, path in case.run.outputs.items() if ARTIFACT.match(name)}
    files = {name: handle for name, handle in handles.items() if handle is not None}
    try:
        size = sum(os.fstat(h.fileno()).st_size for h in files.values())
        limit = KEEP_PASSED_OUTPUT_BYTES if case.passed else min(KEEP_OUTPUT_BYTES, failures_left)
        if not files or size > limit:
            case.run.outputs = {}
            return None
        (target / case.name).mkdir(parents=True, exist_ok=True)
        for name, handle in files.items():
            with open(target / case.name / f"{name}.npy", "wb") as out:
                shutil.copyfileobj(handle, out)
    finally:
        for handle in files.values():
            handle.close()
    case.run.outputs = {name: f"outputs/{case.name}/{name}.npy" for name in files}
    return size


def failure_bytes(run_dir: Path) -> int:
    """Bytes of failed cases' outputs kept in the run so far."""
    total = 0
    for manifest in run_dir.glob(f"candidates/*/outputs/{MANIFEST}"):
        try:
            kept = json.loads(manifest.read_text())
        except (OSError, ValueError):
            continue
        for case, status in kept.items():
            if status == "failed" and ARTIFACT.match(case):
                total += sum(f.stat().st_size for f in (manifest.parent / case).glob("*.npy"))
    return total


def forget_passed_outputs(folder: Path) -> list[str]:
    """Remove a candidate's passed cases' outputs (and their paths from its records); the cases still kept."""
    target = folder / "outputs"
    try:
        kept = json.loads((target / MANIFEST).read_text())
    except (OSError, ValueError):
        return []
    dropped = {case for case, status in kept.items() if status == "passed" and ARTIFACT.match(case)}
    for case in dropped:
        shutil.rmtree(target / case, ignore_errors=True)
    left = {case: status for case, status in kept.items() if case not in dropped}
    atomic_write(target / MANIFEST, json.dumps(left))
    for record in folder.glob("*.json"):
        _unlink_outputs(record, dropped)
    return list(left)


def _unlink_outputs(record: Path, cases: set[str]) -> None:
    try:
        data = json.loads(record.read_text())
    except (OSError, ValueError):
        return
    changed = False
    for case in data.get("cases", []) if isinstance(data, dict) else []:
        run = case.get("run") if isinstance(case, dict) else None
        if isinstance(run, dict) and case.get("name") in cases and run.get("outputs"):
            run["outputs"], changed = {}, True
    if changed:
        atomic_write(record, json.dumps(data, indent=2))
