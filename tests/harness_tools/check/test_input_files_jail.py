"""A drawn input's file is the server's own array (the drawing threads filled a shared map of it): a candidate's
worker, which is given the input cache to read, must not be able to change it by any path, or the oracle would be
computed from what the candidate wrote."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from harness_tools import resolve_task
from harness_tools.backends.cpu.backend import worker_jail as cpu_worker_jail
from harness_tools.backends.cuda.backend import worker_jail as cuda_worker_jail
from harness_tools.check.case_request import case_inputs
from harness_tools.check.inputs import PIECE
from harness_tools.run import jail

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

pytestmark = pytest.mark.skipif(not jail.status().active, reason=f"no jail here: {jail.status().detail}")

WRITES = """
import os, mmap, sys
p = sys.argv[1]
def open_rw():
    with open(p, "r+b") as f:
        f.seek(200)
        f.write(b"\\xff" * 64)
def map_shared():
    mmap.mmap(os.open(p, os.O_RDWR), 0)[200:264] = b"\\x00" * 64
ways = {"open r+": open_rw, "map shared": map_shared, "truncate": lambda: os.truncate(p, 0),
        "unlink": lambda: os.unlink(p), "rename": lambda: os.rename(p, p + ".x"),
        "replace": lambda: open(p + ".new", "wb").close() or os.replace(p + ".new", p)}
for how, do in ways.items():
    try:
        do()
        print(how, "SUCCEEDED")
    except OSError as exc:
        print(how, "refused:", exc.strerror)
"""


@pytest.mark.parametrize("spec", [cpu_worker_jail, cuda_worker_jail], ids=["cpu", "cuda"])
def test_a_jailed_worker_cannot_change_a_drawn_input(spec):
    task = resolve_task(str(EXAMPLES / "reduction"))
    case = task.spec.cases[0].model_copy(update={"name": f"jailed_{spec.__module__}", "sizes": {"n": PIECE + 7}})
    arrays, files = case_inputs(task, case, 5)
    assert isinstance(arrays["x"], np.memmap)  # drawn into its file: the server's array is the file's pages
    before = np.array(arrays["x"])
    code, out, _ = jail.run([sys.executable, "-P", "-c", WRITES, str(files["x"])], spec(), 60, merge=True)
    assert code == 0, out
    assert "SUCCEEDED" not in out and out.count("refused") == 6, out
    assert np.array_equal(arrays["x"], before) and np.array_equal(np.load(files["x"]), before)
