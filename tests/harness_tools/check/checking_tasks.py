"""Small task folders for the tests of a task's own checking (generated inputs, custom checks, mismatch budgets,
torch references): task.json, kernel.cu and reference.py written into one folder, then loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness_tools import evaluate
from harness_tools.evaluation import EvaluationConfig, EvaluationResult
from harness_tools.task import candidate as candidates
from harness_tools.task.spec import Task

VALIDATION = EvaluationConfig(roles=["validation"], seed=2024, timeout_s=120)


def write_task(folder: Path, *, kernel_name: str, kernel: str, params: list[dict], sizes: list[str],
               cases: list[dict], reference_py: str, launch: dict, tolerance: dict | None = None,
               **extra: object) -> Path:
    """A task folder; ``extra`` adds top-level task.json fields (``inputs``, ``check``, ``reference``, ...)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.cu").write_text(kernel)
    (folder / "reference.py").write_text(reference_py)
    spec = {"name": kernel_name, "description": "a test task", "kernel_name": kernel_name, "sizes": sizes,
            "params": params, "cases": cases, "reference": {"kind": "numpy"},
            "tolerance": tolerance or {"float32": {"atol": 1e-5, "rtol": 1e-5}},
            "baseline": {"source": "kernel.cu", "launch": launch}, **extra}
    (folder / "task.json").write_text(json.dumps(spec))
    return folder


def run(task: Task, backend, source: str | None = None, config: EvaluationConfig = VALIDATION) -> EvaluationResult:
    """Evaluate the baseline (or ``source`` in its place) through the engine's public entry point."""
    cand = (candidates.baseline(task) if source is None
            else candidates.from_kernel_source(task, task.spec.baseline, source))
    return evaluate(task, cand, backend, config)


def cudaopt(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The ``cudaopt`` command line as a real subprocess."""
    return subprocess.run([sys.executable, "-m", "cudaopt_mcp.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd, check=False)
