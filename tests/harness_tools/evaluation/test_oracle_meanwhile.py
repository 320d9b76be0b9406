"""A case's host oracle is computed while the backend runs the case, unless the host's cores are the backend's clock.

The reference below returns the right outputs only if the case's run has started by the time it is computed (it
waits a while for that): an evaluation whose oracle overlaps the run passes, one that computes the oracle first
fails with a mismatch. Real cpu workers and g++; the overlapping backend is the cpu backend registered with its
traits saying its clock is not the host's (as the cuda backend's is not).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path

import pytest

from harness_tools import EvaluationConfig, create_backend, evaluate
from harness_tools.backends import register
from harness_tools.backends.cpu.backend import CpuBackend
from harness_tools.errors import TaskSpecError
from harness_tools.task import candidate as candidates
from harness_tools.task.loading import load_task

FLAG = "CUDAOPT_TEST_RUN_STARTED"  # where the backend marks that a case's run has started

SCALE = ('extern "C" __global__ void scale(const float* x, float* y, int n) {\n'
         "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 3.0f * x[i];\n}\n")
REFERENCE = '''
import os, time
from pathlib import Path


def reference(inputs, sizes):
    flag, deadline = Path(os.environ["CUDAOPT_TEST_RUN_STARTED"]), time.monotonic() + WAIT_S
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    if RAISE:
        raise ValueError("the reference's own bug")
    return {"y": 3.0 * inputs["x"] + (0.0 if flag.exists() else 1.0)}
'''


class OffHostClock(CpuBackend):
    """The cpu backend as a plugin whose clock is not the host's cores, marking when each case starts to run."""

    name = "cpu-off-host-clock"
    traits = CpuBackend.traits.model_copy(update={"buffers_in_host_memory": False})

    def run_case(self, request, timeout_s):
        Path(os.environ[FLAG]).touch()
        return super().run_case(request, timeout_s)


register("cpu-off-host-clock", f"{__name__}:OffHostClock")


def _task(folder: Path, wait_s: float, raises: bool = False):
    spec = {
        "name": "scale", "description": "y = 3x", "kernel_name": "scale", "sizes": ["n"],
        "params": [{"kind": "buffer", "name": "x", "dtype": "float32", "shape": ["n"], "role": "in"},
                   {"kind": "buffer", "name": "y", "dtype": "float32", "shape": ["n"], "role": "out"},
                   {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"}],
        "cases": [{"name": "v", "role": "validation", "sizes": {"n": 1001}}],
        "reference": {"kind": "numpy", "file": "reference.py", "function": "reference"},
        "tolerance": {"float32": {"atol": 0, "rtol": 1e-6}},
        "baseline": {"source": "scale.cu", "launch": {"grid": ["ceil_div(n, 256)"], "block": [256]}},
    }
    folder.mkdir()
    (folder / "scale.cu").write_text(SCALE)
    (folder / "reference.py").write_text(f"WAIT_S = {wait_s}\nRAISE = {raises}\n" + REFERENCE)
    (folder / "task.json").write_text(json.dumps(spec))
    return load_task(folder)


@pytest.fixture
def flag(tmp_path, monkeypatch):
    path = tmp_path / "run-started"
    monkeypatch.setenv(FLAG, str(path))
    return path


def _evaluate(task, backend_name: str, seed: int):
    backend = create_backend(backend_name)
    try:
        cand = candidates.from_kernel_source(task, task.spec.baseline, SCALE)
        return evaluate(task, cand, backend, EvaluationConfig(seed=seed, roles=["validation"], timing=None))
    finally:
        backend.close()


def test_the_oracle_is_computed_while_the_case_runs(tmp_path, flag):
    result = _evaluate(_task(tmp_path / "task", wait_s=30), "cpu-off-host-clock", seed=11)
    assert result.correct, result.failure  # the oracle saw the run start: it was being computed meanwhile
    assert result.overhead.reference_ms < 30_000


def test_on_the_host_clock_the_oracle_comes_first(tmp_path, flag):
    """The cpu backend times on the host's cores: nothing of ours computes beside its case."""
    result = _evaluate(_task(tmp_path / "task", wait_s=0.5), "cpu", seed=12)
    assert not result.correct and result.cases[0].status == "mismatch"  # computed before the run began


def test_a_reference_that_fails_meanwhile_still_fails_the_evaluation(tmp_path, flag):
    with pytest.raises(TaskSpecError, match="the reference's own bug"):
        _evaluate(_task(tmp_path / "task", wait_s=0, raises=True), "cpu-off-host-clock", seed=13)


def test_the_oracle_thread_keeps_the_callers_context(tmp_path, flag):
    """It runs in a copy of the caller's context (so a cancellation token set for the evaluation reaches it)."""
    import contextvars

    from harness_tools.check.device_compare import Once

    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")
    marker.set("the caller's")
    seen = Once(lambda: (marker.get(), threading.current_thread().name))
    seen.meanwhile()
    assert seen() == ("the caller's", "cudaopt-oracle")


COUNTING_REFERENCE = '''
import os
from pathlib import Path


def reference(inputs, sizes):
    with Path(os.environ["CUDAOPT_TEST_ORACLE_CALLS"]).open("a") as calls:
        calls.write("called\\n")
    return {"y": 3.0 * inputs["x"]}
'''


@pytest.mark.gpu
def test_an_oracle_all_compared_on_the_device_is_not_computed_again(cuda_backend, tmp_path, monkeypatch):
    """Once a case's oracle is held in its device form, an evaluation that compares every output on the device
    computes nothing on the host: not before the run, and not while it runs (the oracle cache keeps nothing here)."""
    from harness_tools.check import reference

    calls = tmp_path / "calls"
    monkeypatch.setenv("CUDAOPT_TEST_ORACLE_CALLS", str(calls))
    monkeypatch.setattr(reference.CACHE, "max_bytes", 0)
    task = _task(tmp_path / "task", wait_s=0)
    (task.folder / "reference.py").write_text(COUNTING_REFERENCE)
    task = load_task(task.folder)
    cand = candidates.from_kernel_source(task, task.spec.baseline, SCALE)
    config = EvaluationConfig(seed=14, roles=["validation"], timing=None, verify="device")
    first = evaluate(task, cand, cuda_backend, config)
    assert first.correct, first.failure
    if not first.cases[0].run.comparisons:
        pytest.skip("this GPU's outputs are compared on the host (its kernels can read pageable host memory)")
    assert calls.read_text().count("called") == 1
    again = evaluate(task, cand, cuda_backend, config)
    assert again.correct, again.failure
    assert calls.read_text().count("called") == 1, "the oracle was computed again"


REWRITE_INPUTS = r"""
    /* during the run, while the oracle is computed: rewrite every drawn input file this worker can see */
    int tried = 0, refused = 0;  /* counts only: a long-lived process's input cache holds many files */
    void* shm = opendir("/dev/shm");
    while (jx_dirent* a = shm ? readdir(shm) : nullptr) {
        if (strncmp(a->name, "cudaopt-inputs-", 15)) continue;
        char dir[512];
        snprintf(dir, sizeof dir, "/dev/shm/%s/inputs", a->name);
        void* d1 = opendir(dir);
        while (jx_dirent* b = d1 ? readdir(d1) : nullptr) {
            if (b->name[0] == '.') continue;
            char sub[800];
            snprintf(sub, sizeof sub, "%s/%s", dir, b->name);
            void* d2 = opendir(sub);
            while (jx_dirent* c = d2 ? readdir(d2) : nullptr) {
                if (c->name[0] == '.') continue;
                char file[1100];
                snprintf(file, sizeof file, "%s/%s", sub, c->name);
                ++tried;
                int fd = open(file, 02);  /* O_RDWR */
                if (fd < 0) { refused += jx_errno() == 30; continue; }  /* EROFS */
                char junk[64];
                memset(junk, 0x7f, sizeof junk);
                JX_PRINTF("T %s: REWROTE %ld\n", file, write(fd, junk, sizeof junk));
                close(fd);
            }
            if (d2) closedir(d2);
        }
        if (d1) closedir(d1);
    }
    if (shm) closedir(shm);
    JX_PRINTF("T tried %d refused %d\n", tried, refused);
"""


def test_a_kernel_rewriting_its_inputs_while_the_oracle_is_computed_changes_nothing(tmp_path, flag, capfd):
    """The oracle now reads the drawn inputs while the candidate runs. A kernel that tries to rewrite every input file
    it can see at that moment (inside the cpu worker's jail) is refused, the files keep their bytes, and the case is
    judged against the oracle of the inputs as drawn."""
    from harness_tools.check.case_request import case_inputs
    from harness_tools.run import jail
    from tests.cudaopt_mcp.jail_attack_kit.payloads import kernel
    from tests.cudaopt_mcp.jail_attack_kit.tasks import jailbox_task

    if not jail.status().active:
        pytest.skip(f"no jail here: {jail.status().detail}")
    task = load_task(jailbox_task(tmp_path))
    case = task.spec.cases[0]
    seed = 15
    _, files = case_inputs(task, case, seed)
    before = {name: Path(path).read_bytes() for name, path in files.items()}
    cand = candidates.from_kernel_source(task, task.spec.baseline, kernel(REWRITE_INPUTS, where="kernel",
                                                                          to_output=False))
    backend = create_backend("cpu-off-host-clock")
    try:
        result = evaluate(task, cand, backend, EvaluationConfig(seed=seed, roles=["validation"], timing=None))
    finally:
        backend.close()
    said = capfd.readouterr().err
    counts = re.search(r"T tried (\d+) refused (\d+)", said)
    assert counts and int(counts[1]) >= 1, said[-2000:]  # the attack ran and met its input file (and any other)
    assert "REWROTE" not in said, [line for line in said.splitlines() if "REWROTE" in line]
    assert counts[1] == counts[2], said[-2000:]  # every one refused as on a read-only file system
    assert {name: Path(path).read_bytes() for name, path in files.items()} == before
    assert result.correct, result.failure


GATED_REFERENCE = '''
import os, time
from pathlib import Path


def reference(inputs, sizes):
    while not Path(os.environ["CUDAOPT_TEST_GATE"]).exists():
        time.sleep(0.01)
    return {"y": 3.0 * inputs["x"]}
'''


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["right", "wrong"])
def test_a_case_whose_oracle_is_being_drawn_ahead_runs_meanwhile_and_is_compared_on_the_host(cuda_backend, tmp_path,
                                                                                            monkeypatch, kernel):
    """While another thread makes a seed's oracle (``optimize`` draws its first evaluation's ahead), an evaluation
    on that seed does not wait for the oracle's device form before running the case: it runs, then compares on the
    host once the oracle is there, and gives the same verdict. The next evaluation finds the device form kept."""
    from harness_tools.check.reference import oracle_being_computed
    from harness_tools.check.seed_ahead import draw_ahead

    gate = tmp_path / "gate"
    monkeypatch.setenv("CUDAOPT_TEST_GATE", str(gate))
    task = _task(tmp_path / "task", wait_s=0)
    (task.folder / "reference.py").write_text(GATED_REFERENCE)
    task = load_task(task.folder)
    case, seed = task.spec.cases[0], 21 if kernel == "right" else 22
    drawing = threading.Thread(target=draw_ahead, args=(task, [case], seed, "cuda"),
                               kwargs={"device_compare_min_bytes": 1}, daemon=True)
    drawing.start()
    deadline = time.monotonic() + 10
    while not oracle_being_computed(task, case, seed):
        assert time.monotonic() < deadline and drawing.is_alive(), "the draw ahead never started its oracle"
        time.sleep(0.005)
    threading.Timer(1.0, gate.touch).start()  # the oracle comes a second later
    source = SCALE if kernel == "right" else SCALE.replace("3.0f * x[i]", "3.0f * x[i] + 1.0f")
    cand = candidates.from_kernel_source(task, task.spec.baseline, source)
    config = EvaluationConfig(seed=seed, roles=["validation"], timing=None, device_compare_min_bytes=1)
    first = evaluate(task, cand, cuda_backend, config)
    drawing.join(10)
    assert first.correct == (kernel == "right"), first.failure
    assert first.cases[0].status == ("passed" if kernel == "right" else "mismatch")
    assert first.cases[0].outputs[0].compared_on == "host"  # it did not wait for the device form
    again = evaluate(task, cand, cuda_backend, config)
    assert again.correct == first.correct
    if not again.cases[0].run.comparisons:
        pytest.skip("this GPU's outputs are compared on the host (its kernels can read pageable host memory)")
    assert again.cases[0].outputs[0].compared_on == "device"
