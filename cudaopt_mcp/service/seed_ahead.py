"""The first evaluation's inputs and oracle, made while ``cudaopt optimize`` starts (harness_tools.check.seed_ahead),
then those of the baseline's hidden-shape check (:mod:`.hidden_seeds`); and, on a GPU, the baseline's first evaluation
and its hidden check themselves (:func:`evaluate_ahead`, :mod:`.evaluations_ahead`).

The cases are the ones a first ``evaluate`` runs: the task's default roles on this server's backend, with the
search step's threshold for comparing on the device (service.evaluations). Only the
host's memory is checked here (the device's is known once a worker has started, and the evaluation checks it
before anything else): a set of cases the host cannot hold is not drawn at all.
"""

from __future__ import annotations

from cudaopt_mcp.service.arguments import TimingArgs
from cudaopt_mcp.service.evaluations_ahead import Planned, evaluation_key
from cudaopt_mcp.service.state import ServerState
from harness_tools import EvaluationResult, Task
from harness_tools.backends.contract import DeviceInfo
from harness_tools.check.device_compare import SEARCH_DEVICE_COMPARE_MIN_BYTES
from harness_tools.check.hidden_shapes import hidden_shapes, hidden_task
from harness_tools.check.seed_ahead import draw_ahead as draw_cases_ahead
from harness_tools.errors import BackendError
from harness_tools.evaluation import check_memory
from harness_tools.task import candidate as candidates
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


def evaluate_ahead(state: ServerState, task: Task, seed: int, warmup: int | None, reps: int | None) -> None:
    """Make the baseline's first evaluation on ``seed`` as ``evaluate`` with no candidate does it in a new run (the
    task's default roles, a search step's plan with ``warmup`` and ``reps``, no best yet, so no early stop), then, when
    it is clean, its hidden check on the seed chosen for it; each is kept for the step that asks for it. Call after
    ``state.ahead.arm()``: this disarms it when done."""
    from cudaopt_mcp.service.evaluations import step_config
    from cudaopt_mcp.service.hidden import fitting_shapes, hidden_config
    from cudaopt_mcp.service.pooled import evaluate_on_pool

    try:
        baseline = candidates.baseline(task)
        plan = state.timing_plan(warmup, reps, state.config.search_budget_ms)
        config = step_config("evaluate", TimingArgs(seed=seed, warmup=warmup, reps=reps), plan, {})
        config = config.model_copy(update={"roles": task.spec.default_roles(state.backend_name)})
        first = Planned(evaluation_key(task, baseline, config), "the baseline's first evaluation",
                        lambda folder: evaluate_on_pool(state, task, baseline,
                                                        config.model_copy(update={"outputs_dir": folder})), _clean)

        def hidden_check() -> Planned | None:  # planned once the worker is up: which hidden cases fit its memory
            shapes = fitting_shapes(state, task, hidden_shapes(task.spec, state.backend_name))[0]
            if not shapes:
                return None
            checked, hidden = hidden_task(task, shapes), hidden_config(state.hidden_seeds.chosen(task))
            return Planned(evaluation_key(checked, baseline, hidden), "the baseline's hidden check",
                           lambda _folder: evaluate_on_pool(state, checked, baseline, hidden), _clean)

        state.ahead.make(first, hidden_check)
    finally:
        state.ahead.disarm()


def _clean(result: EvaluationResult) -> bool:
    """Handed over only when correct and measured on the worker it began on (a task with no performance case has
    no score, and is clean all the same)."""
    return result.correct and result.retried is None
