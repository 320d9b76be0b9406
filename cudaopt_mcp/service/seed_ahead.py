"""The first evaluation's inputs and oracle, made while ``cudaopt optimize`` starts (harness_tools.check.seed_ahead).

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
from harness_tools.check.seed_ahead import draw_ahead as draw_cases_ahead
from harness_tools.errors import BackendError
from harness_tools.evaluation import check_memory


def draw_ahead(state: ServerState, task: Task, seed: int) -> list[str]:
    """Make the inputs and host oracle of ``task``'s first evaluation on ``seed``; return the cases made."""
    backend = state.backend_name
    cases = task.spec.cases_for(task.spec.default_roles(backend), backend)
    try:
        check_memory(task, cases, backend, DeviceInfo(backend=backend, name="not known yet", arch="-"))
    except BackendError:
        return []  # the evaluation refuses it with the reason; drawing it would only take the memory
    return draw_cases_ahead(task, cases, seed, backend, device_compare_min_bytes=SEARCH_DEVICE_COMPARE_MIN_BYTES)
