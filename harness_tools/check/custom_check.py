"""A task's own check of a case's outputs: ``check = {"file": "reference.py", "function": "check"}``.

Some outputs cannot be judged element by element: an argsort with ties, a set written in any order, an
output whose used length depends on a tunable. The task then names a function::

    check(outputs, expected, inputs, sizes) -> None | bool | str

``outputs``: each out/inout buffer as the kernel wrote it, in its own dtype (bfloat16 as ml_dtypes.bfloat16);
``expected``: the reference's float64 outputs; ``inputs``: what a NumPy reference gets (float buffers as
float64, ints as int64, plus the scalar arguments); ``sizes``: the case's sizes. Every array is read-only
(the expected outputs are cached for the next evaluation). ``None`` or ``True`` passes; ``False`` or a
message fails the case with status ``mismatch`` and the message ``custom check: <message>``. Any other return
value, or an exception, is the task's bug: a TaskSpecError naming the file, ``check.function`` and the problem.

It runs after the element-wise comparison. By default both must pass (the check is not called when the
comparison already failed). With ``replaces_tolerance`` the check alone decides: the comparison still runs
and reports its statistics, but every output's verdict is the check's (``judged_by`` = ``"check"``), NaN or
not (an output the kernel writes only in part keeps its poison where it was not written).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness_tools.check.compare import OutputComparison
from harness_tools.check.inputs import reference_inputs
from harness_tools.check.task_functions import call_task_function
from harness_tools.errors import TaskSpecError
from harness_tools.task.dtypes import as_dtype
from harness_tools.task.spec import Case, Task

FIELD = "check.function"


def custom_check_failure(task: Task, case: Case, outputs: dict[str, np.ndarray], expected: dict[str, np.ndarray],
                         input_files: dict[str, Path]) -> str | None:
    """Run the task's check on one case: None when it passes, else the reason it failed."""
    check = task.spec.check
    assert check is not None, "custom_check_failure is for tasks with a check"
    dtypes = {b.name: b.dtype for b in task.spec.buffers}
    arrays = {name: as_dtype(np.load(path, mmap_mode="r"), dtypes[name]) for name, path in input_files.items()}
    verdict = call_task_function(task, check.file, check.function, FIELD, _read_only(outputs), _read_only(expected),
                                 reference_inputs(task.spec, case, arrays), dict(case.sizes))
    if verdict is None or (isinstance(verdict, (bool, np.bool_)) and verdict):
        return None
    if isinstance(verdict, (bool, np.bool_)):
        return f"{check.function}() returned False"
    if isinstance(verdict, str):
        return verdict.strip()[:2000] or f"{check.function}() returned an empty message"
    raise TaskSpecError(str(task.folder / check.file), FIELD,
                        f"{check.function}() for case {case.name} must return None or True (pass), or False or a "
                        f"message string (fail); it returned {type(verdict).__name__}")


def judged_by_check(outputs: list[OutputComparison], passed: bool) -> list[OutputComparison]:
    """The comparisons with the check's verdict in place of the tolerance's (``replaces_tolerance``)."""
    return [o.model_copy(update={"passed": passed, "judged_by": "check"}) for o in outputs]


def _read_only(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    views = {}
    for name, arr in arrays.items():
        view = arr.view()
        view.flags.writeable = False
        views[name] = view
    return views
