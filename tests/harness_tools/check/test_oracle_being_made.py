"""A case whose oracle another thread is making (a seed drawn ahead while ``optimize`` starts) need not wait for it:
``device_checks_for(wait=False)`` answers None, and the evaluation then runs the case meanwhile and compares its
outputs on the host. Only then: not once the device form is kept, not when the device was asked for, not for
outputs too large to download. The end-to-end run is on the GPU (tests/harness_tools/evaluation/
test_oracle_meanwhile.py)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from harness_tools.check import device_compare
from harness_tools.check.device_compare import device_checks_for
from harness_tools.check.reference import host_expected_outputs, oracle_being_computed
from harness_tools.task.loading import load_task
from tests.harness_tools.check.checking_tasks import write_task

N = 5_000_000


def _gated_task(folder, gate):
    """A 20 MB output whose NumPy reference waits until the file ``gate`` exists."""
    params = [{"kind": "buffer", "name": "x", "dtype": "float32", "shape": ["n"], "role": "in"},
              {"kind": "buffer", "name": "y", "dtype": "float32", "shape": ["n"], "role": "out"},
              {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"}]
    kernel = ('extern "C" __global__ void twice(const float* x, float* y, int n) {\n'
              '  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2.0f * x[i]; }\n')
    reference = ("import pathlib, time\n"
                 "def reference(inputs, sizes):\n"
                 f"    while not pathlib.Path({str(gate)!r}).exists():\n"
                 "        time.sleep(0.01)\n"
                 "    return {'y': 2.0 * inputs['x']}\n")
    return load_task(write_task(folder, kernel_name="twice", kernel=kernel, params=params, sizes=["n"],
                                cases=[{"name": "big", "role": "validation", "sizes": {"n": N}}],
                                reference_py=reference, launch={"grid": ["ceil_div(n, 256)"], "block": [256]}))


def _until(predicate, timeout_s: float = 10.0) -> None:
    end = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < end, "not within 10 s"
        time.sleep(0.005)


def _asked(call, wait_s: float) -> list:
    """``[answer]`` when ``call`` answers within ``wait_s``, else ``[]`` (it is waiting; it ends with the gate)."""
    got: list = []
    caller = threading.Thread(target=lambda: got.append(call()), daemon=True)
    caller.start()
    caller.join(wait_s)
    return got


@pytest.fixture
def gated(tmp_path):
    gate = tmp_path / "gate"
    task = _gated_task(tmp_path / "t", gate)
    inputs = {"x": np.linspace(0, 1, N, dtype=np.float32)}
    threads: list[threading.Thread] = []

    def elsewhere(seed: int) -> None:
        """Another thread starts computing the oracle of ``seed``, and holds it until the gate opens."""
        thread = threading.Thread(target=host_expected_outputs, args=(task, task.spec.cases[0], seed, inputs),
                                  daemon=True)
        thread.start()
        threads.append(thread)
        _until(lambda: oracle_being_computed(task, task.spec.cases[0], seed))

    yield task, inputs, gate, elsewhere
    gate.touch()  # whatever a test left waiting ends
    for thread in threads:
        thread.join(10)


def test_a_caller_that_will_not_wait_is_told_while_another_thread_computes_the_oracle(gated):
    task, inputs, gate, elsewhere = gated
    big = task.spec.cases[0]

    def oracle():
        return host_expected_outputs(task, big, 11, inputs)
    elsewhere(11)
    for _ in range(2):  # still, until it is done
        assert _asked(lambda: device_checks_for(task, big, 11, "cuda", "auto", oracle, wait=False), 5.0) == [None]
    gate.touch()
    checks = device_checks_for(task, big, 11, "cuda", "auto", oracle)  # waits for the other thread's oracle
    assert set(checks) == {"y"}
    assert device_checks_for(task, big, 11, "cuda", "auto", oracle, wait=False) == checks  # kept: no reason to wait


def test_with_no_one_making_it_a_caller_that_will_not_wait_makes_the_device_form_itself(gated):
    task, inputs, gate, _ = gated
    big = task.spec.cases[0]
    gate.touch()
    checks = device_checks_for(task, big, 12, "cuda", "auto", lambda: host_expected_outputs(task, big, 12, inputs),
                               wait=False)
    assert checks is not None and set(checks) == {"y"}


@pytest.mark.parametrize("why", ["the device was asked for", "too large to download"])
def test_a_caller_that_may_not_compare_on_the_host_waits(gated, monkeypatch, why):
    task, inputs, gate, elsewhere = gated
    big = task.spec.cases[0]
    verify = "device" if why == "the device was asked for" else "auto"
    if why == "too large to download":
        monkeypatch.setattr(device_compare, "MEANWHILE_HOST_COMPARE_MAX_BYTES", 4 * N - 1)
    elsewhere(13)
    got = _asked(lambda: device_checks_for(task, big, 13, "cuda", verify,
                                           lambda: host_expected_outputs(task, big, 13, inputs), wait=False), 0.3)
    assert got == []  # waiting for the other thread's oracle
    gate.touch()
    _until(lambda: bool(got))
    assert got[0] is not None and set(got[0]) == {"y"}
