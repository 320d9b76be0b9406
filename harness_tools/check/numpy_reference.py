"""A Python reference's float64 outputs, checked against the spec: the NumPy call itself (made in whichever process
computes it, :mod:`harness_tools.check.reference_process`) and the check of what a NumPy or torch function returned."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from harness_tools.check.inputs import reference_inputs
from harness_tools.check.task_functions import call_task_function
from harness_tools.errors import TaskSpecError
from harness_tools.task.spec import Case, NumpyReference, Task, TorchReference


def numpy_outputs(task: Task, case: Case, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The float64 outputs of ``task``'s NumPy reference on ``inputs``, computed here (in this process)."""
    ref = task.spec.reference
    assert isinstance(ref, NumpyReference)
    returned = call_task_function(task, ref.file, ref.function, "reference.function",
                                  reference_inputs(task.spec, case, inputs), dict(case.sizes))
    return checked_outputs(task, ref, case, returned)


def checked_outputs(task: Task, ref: NumpyReference | TorchReference, case: Case, returned: object) -> dict[str, np.ndarray]:
    """A Python reference's result as float64 arrays: a dict holding every output in the spec's shape."""
    where = str(task.folder / ref.file)
    if not isinstance(returned, dict):
        raise TaskSpecError(where, "reference.function", f"{ref.function}() must return a dict of arrays, returned "
                                                         f"{type(returned).__name__}")
    outputs = {}
    for buf in task.spec.outputs:
        if buf.name not in returned:
            raise TaskSpecError(where, "reference.function", f"{ref.function}() did not return output {buf.name!r}")
        try:
            arr = np.asarray(returned[buf.name], dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TaskSpecError(where, "reference.function", f"{ref.function}() returned {buf.name} that is not an array "
                                                             f"of numbers: {exc}") from None
        shape = task.spec.shape_of(buf, case.sizes)
        if arr.shape != shape:
            raise TaskSpecError(where, "reference.function", f"{ref.function}() returned {buf.name} with shape "
                                                             f"{arr.shape}, expected {shape}")
        outputs[buf.name] = arr
    return outputs
