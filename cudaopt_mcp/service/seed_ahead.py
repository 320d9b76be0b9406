"""The first evaluation's inputs and oracle, made while ``cudaopt optimize`` starts (harness_tools.check.seed_ahead),
then those of the baseline's hidden-shape check (:mod:`.hidden_seeds`).

The cases are the ones a first ``evaluate`` runs: the task's default roles on this server's backend, with the
search step's threshold for comparing on the device (service.evaluations). Only the
host's memory is checked here (the device's is known once a worker has started, and the evaluation checks it
before anything else): a set of cases the host cannot hold is not drawn at all.
"""

from __future__ import annotations

from cudaopt_mcp.service.state import ServerState
from harness_tools import Task
from harness_tools.backends.contract import DeviceInfo
from harness_tools.check.device_compare import SEARCH_DEVICE_COMPARE_MIN_BYTES
from harness_tools.check.hidden_shapes import hidden_shapes
from harness_tools.check.seed_ahead import draw_ahead as draw_cases_ahead
from harness_tools.errors import BackendError
from harness_tools.evaluation import check_memory
from harness_tools.task.spec import Case


def draw_ahead(state: ServerState, task: Task, seed: int) -> list[str]:
    """Make the inputs and host oracle of ``task``'s first evaluation on ``seed``; return the cases made."""
    backend = state.backend_name
    cases = task.spec.cases_for(task.spec.default_roles(backend), backend)
    if not _fits(task, cases, backend):
        return []  # the evaluation refuses it with the reason; drawing it would only take the memory
    made = draw_cases_ahead(task, cases, seed, backend, device_compare_min_bytes=SEARCH_DEVICE_COMPARE_MIN_BYTES)
    # then the baseline's hidden check, the first best's (a fresh seed of its own, chosen now)
    shapes = [s for s in hidden_shapes(task.spec, backend) if _fits(task, [s.case], backend)]
    state.hidden_seeds.prepare(task, shapes, backend)
    return made


def _fits(task: Task, cases: list[Case], backend: str) -> bool:
    try:
        check_memory(task, cases, backend, DeviceInfo(backend=backend, name="not known yet", arch="-"))
    except BackendError:
        return False
    return True
