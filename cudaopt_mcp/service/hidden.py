"""The hidden-shape check: a candidate on cases the model never sees, before it may become the run's best.

The cases are the task's hidden ones plus sizes derived from its validation cases
(:mod:`harness_tools.check.hidden_shapes`); they run validation-style (correctness only, no timing) through
the same engine as every evaluation. Hidden means hidden: the full record, sizes included, goes to
``PRIVATE_RECORD`` in the candidate folder, a name outside :data:`~cudaopt_mcp.service.runs.ARTIFACT` so
no resource serves it; the verdict names classes and counts, never a size or an engine message (those
quote indices and shapes). :func:`public_task_json` is the run's task.json as clients may read it.
"""

from __future__ import annotations

import json
import logging
import threading
import time

from cudaopt_mcp.api import HiddenVerdict
from cudaopt_mcp.service.hidden_seeds import HIDDEN_DEVICE_COMPARE_MIN_BYTES
from cudaopt_mcp.service.pooled import evaluate_pooled
from cudaopt_mcp.service.runs import ARTIFACT, atomic_write
from cudaopt_mcp.service.state import ServerState
from harness_tools import Candidate, EvaluationConfig, Task
from harness_tools.check.hidden_shapes import HiddenShape, hidden_shapes, hidden_task
from harness_tools.compile.case_variants import compile_variants
from harness_tools.errors import BackendError
from harness_tools.evaluation import EvaluationResult, check_memory

log = logging.getLogger("cudaopt.mcp")
PRIVATE_RECORD = ".hidden-check.json"
assert not ARTIFACT.match(PRIVATE_RECORD), "the private record must not be a servable artifact name"
HIDDEN_TIMEOUT_S = 120.0
PRIVATE_TASK_KEYS = ("hidden",)  # task.json keys clients never read


def check_hidden(state: ServerState, run_id: str, task: Task, candidate: Candidate, candidate_id: str,
                 timeout_s: float = HIDDEN_TIMEOUT_S) -> HiddenVerdict:
    """Evaluate ``candidate`` on the task's hidden cases; call under the run's lock (``store.locked``).

    ``passed`` is false when any hidden case did not pass (mismatch, crash, not run): such a candidate is
    never the run's best. A hidden case too big for this machine is skipped, not failed, and counted out."""
    started = time.perf_counter()
    shapes = hidden_shapes(task.spec, state.backend_name)
    runnable, too_big = fitting_shapes(state, task, shapes)
    result = None
    if runnable:
        seed = state.hidden_seeds.take(task, runnable, state.backend_name)  # fresh, its cases made ahead
        result = evaluate_pooled(state, hidden_task(task, runnable), candidate, hidden_config(seed, timeout_s))
    verdict = _verdict(runnable, too_big, result)
    _store(state, run_id, candidate_id, verdict, runnable, too_big, result)
    log.debug("hidden check of %s: %d case(s) in %.3f s", candidate_id, len(runnable), time.perf_counter() - started)
    return verdict


def compile_meanwhile(state: ServerState, task: Task, candidate: Candidate) -> None:
    """Start compiling ``candidate`` for the hidden cases, all variants side by side, in a thread: a head-to-head
    times on the GPU meanwhile, and the check that follows it finds the cubins made (or joins their compiles). Only
    a task with size defines compiles per case; any other's hidden check reuses the evaluation's one compile."""
    if not task.spec.size_defines:
        return
    shapes = fitting_shapes(state, task, hidden_shapes(task.spec, state.backend_name))[0]
    if not shapes:
        return
    checked = hidden_task(task, shapes)
    cases = checked.spec.cases_for(hidden_config(0).roles, state.backend_name)
    arch = state.device_info().arch
    threading.Thread(target=compile_variants, args=(candidate, checked, cases, arch), daemon=True,
                     name="cudaopt-hidden-compile").start()  # failures are the check's to report, as data


def hidden_config(seed: int, timeout_s: float = HIDDEN_TIMEOUT_S) -> EvaluationConfig:
    """How a hidden check evaluates: validation-style on ``seed``, compared like a search step."""
    return EvaluationConfig(timing=None, roles=["validation"], timeout_s=timeout_s, seed=seed,
                            device_compare_min_bytes=HIDDEN_DEVICE_COMPARE_MIN_BYTES)


def fitting_shapes(state: ServerState, task: Task, shapes: list[HiddenShape]) -> tuple[list[HiddenShape], list[HiddenShape]]:
    """(cases that fit this machine, cases that do not): a hidden case the user cannot run blocks nothing."""
    device = state.device_info()
    fits, too_big = [], []
    for shape in shapes:
        try:
            check_memory(task, [shape.case], state.backend_name, device)
            fits.append(shape)
        except BackendError:
            too_big.append(shape)
    return fits, too_big


def _verdict(runnable: list[HiddenShape], too_big: list[HiddenShape],
             result: EvaluationResult | None) -> HiddenVerdict:
    skipped = f"; {len(too_big)} too large for this machine were skipped" if too_big else ""
    if result is None:
        return HiddenVerdict(passed=True, checked=0, message=f"no hidden case to check on this backend{skipped}")
    n = len(runnable)
    if not result.compile.ok or not result.cases:
        return HiddenVerdict(passed=False, checked=n, message=f"the candidate did not compile for its {n} hidden "
                                                              f"case(s){skipped}")
    classes = {s.case.name: s.shape_class for s in runnable}
    bad = [c for c in result.cases if not c.passed]
    failed = sorted({classes[c.name] for c in bad})
    if not bad:
        return HiddenVerdict(passed=True, checked=n, message=f"passed all {n} hidden cases{skipped}")
    statuses = ", ".join(sorted({c.status for c in bad}))
    return HiddenVerdict(passed=False, checked=n, failed_classes=failed,
                         message=f"failed {len(bad)} of {n} hidden cases ({statuses}) in classes {', '.join(failed)}: "
                                 "sizes it was not validated on; handle any size (bounds checks, partial tiles, "
                                 f"tails){skipped}")


def _store(state: ServerState, run_id: str, candidate_id: str, verdict: HiddenVerdict, runnable: list[HiddenShape],
           too_big: list[HiddenShape], result: EvaluationResult | None) -> None:
    record = {"candidate_id": candidate_id, "backend": state.backend_name, "time": time.time(),
              "verdict": verdict.model_dump(),
              "cases": [{"name": s.case.name, "class": s.shape_class, "sizes": s.case.sizes} for s in runnable],
              "skipped_too_large": [{"name": s.case.name, "class": s.shape_class, "sizes": s.case.sizes}
                                    for s in too_big],
              "evaluation": result.model_dump(mode="json") if result else None}
    folder = state.store.candidate_dir(run_id, candidate_id)
    atomic_write(folder / PRIVATE_RECORD, json.dumps(record, indent=2))


def read_private_record(state: ServerState, run_id: str, candidate_id: str) -> dict | None:
    """The stored hidden check of a candidate (for the service and tests only; never served)."""
    path = state.store.candidate_dir(run_id, candidate_id) / PRIVATE_RECORD
    return json.loads(path.read_text()) if path.is_file() else None


def public_task_json(text: str) -> str:
    """The run's task.json without its hidden cases, as resources serve it (the text as is when it has none)."""
    raw = json.loads(text)
    if not isinstance(raw, dict) or not any(k in raw for k in PRIVATE_TASK_KEYS):
        return text
    return json.dumps({k: v for k, v in raw.items() if k not in PRIVATE_TASK_KEYS}, indent=2)
