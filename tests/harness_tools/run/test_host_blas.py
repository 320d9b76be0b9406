"""Forking a jailed child while another thread multiplies matrices hangs neither (harness_tools.run.host_blas).

Without the lock this hangs at once on a 2-core machine: ``subprocess.run(["true"], preexec_fn=...)`` while a thread
loops ``a @ a`` on a 600x600 float64 matrix never returned (OpenBLAS's atfork handler stopped its threads under the
running call). The script runs in its own interpreter, so a hang fails this test by its timeout instead of
hanging the suite.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = """
import threading, numpy as np
from harness_tools.run.host_blas import HOST_BLAS
from harness_tools.run.jail_limits import Limits, spawn_thread_popen

done = threading.Event()
products = [0]

def multiply():
    a = np.random.default_rng(0).random((600, 600))
    while not done.is_set():
        with HOST_BLAS:
            a @ a
        products[0] += 1

thread = threading.Thread(target=multiply)
thread.start()
for _ in range(40):
    assert spawn_thread_popen(["true"], Limits(processes=64)).wait(timeout=30) == 0
done.set()
thread.join(timeout=30)
assert not thread.is_alive() and products[0] > 0
print("ok", products[0])
"""


def test_jailed_spawns_and_matrix_products_in_two_threads_both_finish():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stderr[-2000:]
