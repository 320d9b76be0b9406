"""The cuda worker's jail on a real GPU: the driver makes a context and its threads, no new process starts."""

from __future__ import annotations

import sys
import textwrap

import pytest

from harness_tools.backends.cuda.backend import worker_jail
from harness_tools.run import jail
from tests.harness_tools.run.spawn_probe import SPAWN_ATTEMPTS

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not jail.status().active, reason=f"no jail here: {jail.status().detail}")]

PROBE = textwrap.dedent("""
    import errno, os, subprocess
    from cuda.bindings import driver
    said = []
    (err,) = driver.cuInit(0)
    err, dev = driver.cuDeviceGet(0)
    err, ctx = driver.cuDevicePrimaryCtxRetain(dev)
    (err,) = driver.cuCtxSetCurrent(ctx)
    err, ptr = driver.cuMemAlloc(1 << 20)
    said.append("context " + err.name)
""") + SPAWN_ATTEMPTS + 'print(" ".join(said))\n'


def test_the_cuda_worker_has_a_context_and_starts_no_process():
    code, out, err = jail.run([sys.executable, "-P", "-c", PROBE], worker_jail(), 60)
    assert code == 0, err
    assert out.split() == ["context", "CUDA_SUCCESS", "fork", "EPERM", "spawn", "EPERM"], (out, err)
