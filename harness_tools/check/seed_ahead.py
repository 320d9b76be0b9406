"""A seed's inputs and oracle, made before the first evaluation asks for them.

``cudaopt optimize`` knows its task and input seed before its first evaluation, and spends its first seconds
importing (the client, the MCP SDK) while its worker starts. Drawing the cases' inputs, computing the host's
float64 oracle and writing the device's form of it meanwhile takes that work out of the baseline's evaluation
(on the H200, the 800M-element reduction drew its input in 1.8 s and computed its oracle in 1.0 s, after a
2 s start). What is made goes into the caches the evaluation reads (keyed by the task folder's content, so the
run's copy of the folder finds it); a case being made when the evaluation asks is waited for, not made twice.

Only what the host makes is made ahead: not a reference kernel's outputs (it runs on a worker), and not a torch
reference's (torch's import would compete with the start's own imports for the interpreter).
"""

from __future__ import annotations

import contextlib
import logging
import time

from harness_tools.check.case_request import case_inputs
from harness_tools.check.device_compare import DEVICE_COMPARE_MIN_BYTES, device_checks_for
from harness_tools.check.reference import host_expected_outputs
from harness_tools.check.reference_process import REFERENCES, needed_for
from harness_tools.errors import ReferenceProcessError
from harness_tools.task.spec import Case, Task, TorchReference

log = logging.getLogger("harness_tools")


def draw_ahead(task: Task, cases: list[Case], seed: int, backend: str, verify: str = "auto",
               device_compare_min_bytes: int = DEVICE_COMPARE_MIN_BYTES) -> list[str]:
    """Make the inputs of ``cases`` for ``seed``, and their oracle where the host computes it, as an evaluation
    on ``backend`` with ``verify`` and ``device_compare_min_bytes`` would; return the cases made. The caller
    checks that the cases fit the machine."""
    started = time.perf_counter()
    host_oracle = not isinstance(task.spec.reference, TorchReference)
    if host_oracle and needed_for(task, cases):
        with contextlib.suppress(ReferenceProcessError):  # then the cases are computed here, saying why
            REFERENCES.start()  # its imports overlap the drawing of the inputs
    # case by case, as the evaluation goes (a bounded input cache may not hold them all); validation cases come
    # first and their oracles are small, so a worker's start, which waits for the process's BLAS, barely waits
    for case in cases:
        inputs, files = case_inputs(task, case, seed)
        outputs = host_expected_outputs(task, case, seed, inputs, files) if host_oracle else None  # None: a kernel's
        if outputs is not None:
            device_checks_for(task, case, seed, backend, verify, lambda outputs=outputs: outputs,
                              device_compare_min_bytes)
    log.debug("%d case(s) of seed %d made ahead in %.3f s", len(cases), seed, time.perf_counter() - started)
    return [case.name for case in cases]
