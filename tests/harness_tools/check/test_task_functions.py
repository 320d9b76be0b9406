"""Task functions (references, input generators, checks) of the server's process run one at a time, as does the
tuner's model: NumPy's OpenBLAS can hang when two threads multiply at once (harness_tools.run.host_blas)."""

from __future__ import annotations

import shutil
import threading
import time

import numpy as np

from cudaopt_mcp.client.proposers.gaussian_process import GaussianProcess
from harness_tools.check.task_functions import call_task_function
from harness_tools.task.loading import load_task, resolve_task

RECORDING = '''
import time

SPANS = []


def reference(inputs, sizes):
    start = time.perf_counter()
    time.sleep(0.2)
    SPANS.append((start, time.perf_counter()))
    return SPANS
'''


def test_task_functions_called_from_two_threads_never_overlap_and_the_model_waits_for_them(tmp_path):
    shutil.copytree(resolve_task("reduce_sum").folder, tmp_path / "task", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "task" / "reference.py").write_text(RECORDING)
    task = load_task(tmp_path / "task")
    spans: list = []

    def call():
        spans[:] = call_task_function(task, "reference.py", "reference", "reference.function", {}, {})
    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    fitted_at = time.perf_counter()
    GaussianProcess(np.random.default_rng(0).random((8, 2)), np.arange(8.0))  # waits for the task functions
    fitted_at = time.perf_counter() - fitted_at
    for t in threads:
        t.join()
    ordered = sorted(spans)
    assert len(ordered) == 3 and all(a[1] <= b[0] for a, b in zip(ordered, ordered[1:]))  # one at a time
    assert fitted_at >= 0.1  # the model's fit waited for the function in flight
