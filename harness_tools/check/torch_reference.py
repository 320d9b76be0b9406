"""A torch reference: the task's function gets the inputs as float64 CPU tensors (ints as int64) and the sizes.

The values are exactly those a NumPy reference gets (:func:`harness_tools.check.inputs.reference_inputs`:
bfloat16 and float16 inputs upcast exactly, scalars as Python numbers); the function may return tensors (any
dtype, any device) or arrays, and each is converted to float64 NumPy here. torch is an optional extra
(``pip install cudaopt[torch]``): it is imported only when a torch reference runs, and a machine without it
gets a TaskSpecError saying so, not an ImportError from the middle of an evaluation.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from harness_tools.check.inputs import reference_inputs
from harness_tools.check.task_functions import call_task_function
from harness_tools.errors import TaskSpecError
from harness_tools.task.spec import Case, Task, TorchReference

INSTALL_HINT = "pip install 'cudaopt[torch]'"


def import_torch(where: str) -> ModuleType:
    """The torch module, or a TaskSpecError naming the task file and what to install."""
    try:
        import torch
    except ImportError as exc:
        raise TaskSpecError(where, "reference.kind", f"a torch reference needs PyTorch, which cannot be imported here "
                                                     f"({exc}): {INSTALL_HINT}") from None
    return torch


def run_torch(task: Task, ref: TorchReference, case: Case, inputs: dict[str, np.ndarray]) -> object:
    """What the reference function returned, its tensors converted to float64 arrays (other values untouched:
    the oracle checks the result's keys and shapes)."""
    torch = import_torch(str(task.folder / ref.file))
    given = {name: torch.from_numpy(np.ascontiguousarray(value)) if isinstance(value, np.ndarray) else value
             for name, value in reference_inputs(task.spec, case, inputs).items()}
    with torch.no_grad():
        returned = call_task_function(task, ref.file, ref.function, "reference.function", given, dict(case.sizes))
    if not isinstance(returned, dict):
        return returned
    return {name: _as_array(torch, value) for name, value in returned.items()}


def _as_array(torch: ModuleType, value: object) -> object:
    if isinstance(value, torch.Tensor):
        return value.detach().to(device="cpu", dtype=torch.float64).numpy()
    return value
