"""A NumPy reference of a large case is computed in the reference process, with what the in-process call gives; its
errors are the task's, a process that dies is reported and replaced (harness_tools.check.reference_process)."""

from __future__ import annotations

import os
import shutil
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from harness_tools.check.case_request import case_inputs
from harness_tools.check.numpy_reference import numpy_outputs
from harness_tools.check.reference import host_expected_outputs
from harness_tools.check.reference_process import MIN_INPUT_BYTES, REFERENCES, needed_for
from harness_tools.errors import TaskSpecError
from harness_tools.task.loading import load_task

# c = a + b, and the process it ran in; KILL (a file beside it) makes it die as an out-of-memory kill would
REFERENCE = '''
import os
import signal
from pathlib import Path

HERE = Path(__file__).parent


def reference(inputs, sizes):
    (HERE / f"pid-{sizes['n']}").write_text(str(os.getpid()))
    if (HERE / "KILL").exists():
        os.kill(os.getpid(), signal.SIGKILL)
    if (HERE / "RAISE").exists():
        raise ValueError("n is not what this reference expected")
    return {"c": inputs["a"] * 3.0 + inputs["b"]}
'''
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "vector_add"
LARGE = MIN_INPUT_BYTES // 8 + 1  # two float32 inputs of n: just over the bound
SMALL = 1000


@pytest.fixture
def task(tmp_path):
    shutil.copytree(EXAMPLE, tmp_path / "task", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "task" / "reference.py").write_text(REFERENCE)
    return load_task(tmp_path / "task")


def _case(task, n):
    return task.spec.cases[0].model_copy(update={"name": f"n{n}", "sizes": {"n": n}})


def _oracle(task, n, seed):
    case = _case(task, n)
    inputs, files = case_inputs(task, case, seed)
    return host_expected_outputs(task, case, seed, inputs, files), inputs


def _pid(task, n) -> int:
    return int((task.folder / f"pid-{n}").read_text())


def test_a_large_cases_reference_runs_in_another_process_and_gives_what_the_call_in_this_one_gives(task):
    outputs, inputs = _oracle(task, LARGE, 5)
    assert _pid(task, LARGE) != os.getpid()
    here = numpy_outputs(task, _case(task, LARGE), inputs)
    assert outputs["c"].dtype == np.float64 and outputs["c"].shape == (LARGE,)
    assert np.array_equal(outputs["c"], here["c"])
    assert np.array_equal(outputs["c"], inputs["a"].astype(np.float64) * 3.0 + inputs["b"])
    outputs["c"][0] = 1.5  # writable, as a computed array is; the kept files are untouched
    assert not list((task.folder).glob("*.npy"))


def test_a_small_cases_reference_runs_in_this_process(task):
    outputs, inputs = _oracle(task, SMALL, 5)
    assert _pid(task, SMALL) == os.getpid()
    assert np.allclose(outputs["c"], inputs["a"] * 3.0 + inputs["b"])


def test_with_the_reference_process_off_a_large_case_runs_in_this_process(task, monkeypatch):
    monkeypatch.setenv("CUDAOPT_REFERENCE_PROCESS", "off")
    _oracle(task, LARGE, 6)
    assert _pid(task, LARGE) == os.getpid()


def test_a_reference_that_raises_there_is_the_tasks_error_naming_its_file_and_what_it_raised(task):
    (task.folder / "RAISE").touch()
    with pytest.raises(TaskSpecError) as caught:
        _oracle(task, LARGE, 7)
    assert caught.value.field == "reference.function" and caught.value.file.endswith("reference.py")
    assert "reference() raised ValueError: n is not what this reference expected" in str(caught.value)
    (task.folder / "RAISE").unlink()
    assert _oracle(task, LARGE, 7)[0]["c"].shape == (LARGE,)  # the same process answers the next request


def test_a_reference_process_that_dies_is_reported_with_its_signal_and_a_fresh_one_takes_the_next_case(task):
    (task.folder / "KILL").touch()
    with pytest.raises(TaskSpecError, match="ended during the call \\(killed by SIGKILL\\)"):
        _oracle(task, LARGE, 8)
    died = _pid(task, LARGE)
    (task.folder / "KILL").unlink()
    outputs, inputs = _oracle(task, LARGE, 8)  # the failure was not kept: computed again, by a new process
    assert _pid(task, LARGE) not in (died, os.getpid())
    assert np.array_equal(outputs["c"], inputs["a"].astype(np.float64) * 3.0 + inputs["b"])


def test_the_reference_process_outlives_the_thread_that_started_it(task):
    # it asks to die with its parent, which Linux takes to be the thread that started it: a draw-ahead thread ends
    REFERENCES.close()
    started = threading.Thread(target=_oracle, args=(task, LARGE, 9))
    started.start()
    started.join()
    first = _pid(task, LARGE)
    _oracle(task, LARGE, 10)
    assert _pid(task, LARGE) == first != os.getpid()


def test_when_the_reference_process_fails_on_its_own_the_case_is_computed_in_this_process(task, tmp_path, caplog):
    case = _case(task, LARGE)
    inputs, files = case_inputs(task, case, 11)
    unreadable = tmp_path / "not-an-npy"
    unreadable.write_bytes(b"\0" * files["a"].stat().st_size)  # the process cannot read it; this one has the arrays
    outputs = host_expected_outputs(task, case, 11, inputs, {**files, "a": unreadable})
    assert _pid(task, LARGE) == os.getpid()
    assert np.array_equal(outputs["c"], inputs["a"].astype(np.float64) * 3.0 + inputs["b"])
    assert "computing the reference of n" in caplog.text and "the reference process failed" in caplog.text


def test_the_reference_imports_what_it_would_import_in_this_process(task, tmp_path, monkeypatch):
    helpers = tmp_path / "site"
    helpers.mkdir()
    (helpers / "cudaopt_test_scale.py").write_text("FACTOR = 3.0\n")
    monkeypatch.syspath_prepend(str(helpers))  # importable here only through this process's sys.path
    (task.folder / "reference.py").write_text(REFERENCE.replace("inputs[\"a\"] * 3.0", "inputs[\"a\"] * FACTOR")
                                              + "\nfrom cudaopt_test_scale import FACTOR\n")
    REFERENCES.close()  # a process started now sees the path
    outputs, inputs = _oracle(task, LARGE, 12)
    assert _pid(task, LARGE) != os.getpid()
    assert np.array_equal(outputs["c"], inputs["a"].astype(np.float64) * 3.0 + inputs["b"])


def test_a_process_started_ahead_for_the_cases_that_need_it_is_the_one_that_computes_them(task):
    assert needed_for(task, [_case(task, SMALL), _case(task, LARGE)])
    assert not needed_for(task, [_case(task, SMALL)])
    REFERENCES.close()
    REFERENCES.start()
    started = REFERENCES._process.pid  # which process the start made
    _oracle(task, LARGE, 13)
    assert _pid(task, LARGE) == started


def test_when_the_reference_process_cannot_start_the_case_is_computed_in_this_process(task, monkeypatch, caplog):
    REFERENCES.close()
    monkeypatch.setattr(sys, "executable", str(task.folder / "no-such-python"))
    outputs, inputs = _oracle(task, LARGE, 14)
    assert _pid(task, LARGE) == os.getpid()
    assert np.array_equal(outputs["c"], inputs["a"].astype(np.float64) * 3.0 + inputs["b"])
    assert "the reference process cannot start" in caplog.text


def test_a_case_whose_float64_outputs_are_too_large_for_the_file_runs_in_this_process(task, monkeypatch):
    # the outputs travel as a file, 0.4 s a GB: above the bound the call stays here (a 1 GiB bound, lowered to fit)
    from harness_tools.check import reference_process

    monkeypatch.setattr(reference_process, "MAX_OUTPUT_BYTES", 8 * LARGE - 1)
    assert not needed_for(task, [_case(task, LARGE)])
    _oracle(task, LARGE, 15)
    assert _pid(task, LARGE) == os.getpid()
    monkeypatch.setattr(reference_process, "MAX_OUTPUT_BYTES", 8 * LARGE)
    _oracle(task, LARGE, 16)
    assert _pid(task, LARGE) != os.getpid()


# what the folders hold while the reference computes: the process's output folder already exists then
PEEKING = REFERENCE.replace('    return {"c"', '''    import glob
    (HERE / "seen").write_text("\\n".join(glob.glob(os.environ["T_SCRATCH"] + "/*") + ["--"]
                                          + glob.glob(os.environ["T_ORACLE"] + "/*")))
    return {"c"''')


def test_the_oracle_passes_through_a_folder_no_candidate_jail_can_write(task, monkeypatch):
    # a cpu worker runs native candidate code with scratch/ writable: had the outputs passed there, a kernel could
    # have rewritten its own oracle between the reference process's write and this process's read
    from harness_tools.backends.cpu.backend import worker_jail
    from harness_tools.run import jail
    from harness_tools.run.scratch import oracle_root, scratch_root

    monkeypatch.setenv("T_SCRATCH", str(scratch_root()))
    monkeypatch.setenv("T_ORACLE", str(oracle_root()))
    (task.folder / "reference.py").write_text(PEEKING)
    REFERENCES.close()  # a process started now has the variables
    _oracle(task, LARGE, 17)
    in_scratch, in_oracle = (task.folder / "seen").read_text().split("--")
    assert "cudaopt-reference-" not in in_scratch and "cudaopt-reference-" in in_oracle
    if not jail.status().active:
        pytest.skip("no jail on this machine: nothing to keep out")
    target = oracle_root() / "planted"
    code, _, _ = jail.run(["/bin/sh", "-c", f"echo x > {target}"], worker_jail(), 30)
    assert code != 0 and not target.exists()
    code, _, _ = jail.run(["/bin/sh", "-c", f"echo x > {scratch_root() / 'planted'}"], worker_jail(), 30)
    assert code == 0  # the same jail does write its own folder
