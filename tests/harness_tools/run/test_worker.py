"""The worker process: start, answer, time out, die, restart — with a device-free executor."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from harness_tools.errors import BackendUnavailable, WorkerDied, WorkerError, WorkerTimeout
from harness_tools.run.jail import JailSpec
from harness_tools.run.worker import Worker, close_side_by_side

ECHO = "tests.harness_tools.run.echo_executor:EchoExecutor"
ROOT = Path(__file__).resolve().parents[3]
# The echo executor lives in tests/: the jail shows that folder and the child imports it from there.
SPEC = JailSpec(purpose="test worker", read_only=(str(ROOT / "tests"),), env={"PYTHONPATH": str(ROOT)})


@pytest.fixture
def worker():
    w = Worker(ECHO, device=0, spec=SPEC)
    yield w
    w.close()


def test_start_and_round_trip(worker):
    info = worker.start()
    assert info["device"] == 0 and worker.alive
    assert worker.call("echo", {"a": [1, 2], "b": b"\x00\xff"}, timeout_s=10) == {"a": [1, 2], "b": b"\x00\xff"}


def test_timeout_kills_and_next_call_gets_a_fresh_process(worker):
    first = worker.start()["instance"]
    with pytest.raises(WorkerTimeout, match="no answer within 0.5 s"):
        worker.call("sleep", 30, timeout_s=0.5)
    assert not worker.alive
    assert worker.call("echo", 1, timeout_s=10) == 1
    assert worker.info["instance"] != first and worker.restarts == 1


def test_crash_is_reported_with_exit_code_and_recovered(worker):
    worker.start()
    with pytest.raises(WorkerDied, match="exit code 7"):
        worker.call("crash", None, timeout_s=10)
    assert worker.call("echo", "back", timeout_s=10) == "back"


def test_dead_executor_answers_then_the_process_ends(worker):
    first = worker.start()["instance"]
    assert worker.call("poison", None, timeout_s=10) == "poisoned"
    assert worker.call("echo", 2, timeout_s=10) == 2
    assert worker.info["instance"] != first


def test_executor_bug_is_an_exception_with_its_traceback(worker):
    worker.start()
    with pytest.raises(WorkerError, match="KeyError: 'a bug in the executor'"):
        worker.call("bug", None, timeout_s=10)
    assert worker.call("echo", 3, timeout_s=10) == 3  # a bug does not kill the worker


def test_failed_start_is_backend_unavailable():
    w = Worker(ECHO, device=-1, spec=SPEC)
    with pytest.raises(BackendUnavailable, match="no such device"):
        w.start()


def test_child_stdout_never_reaches_parent_stdout(tmp_path):
    script = textwrap.dedent(f"""
        from harness_tools.run.jail import JailSpec
        from harness_tools.run.worker import Worker, close_side_by_side
        w = Worker({ECHO!r}, 0, JailSpec(purpose="t", read_only=({str(ROOT / "tests")!r},), env={{"PYTHONPATH": {str(ROOT)!r}}}))
        w.start()
        assert w.call("shout", "SECRET-PRINTF", 10) == "ok"
        w.close()
        print("done")
    """)  # no main guard on purpose: the worker must not re-import the caller's script
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=str(tmp_path),
                         env={**__import__("os").environ, "PYTHONPATH": str(__import__("pathlib").Path(__file__).parents[3])})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "done"
    assert "SECRET-PRINTF" in out.stderr


def test_workers_close_side_by_side_and_one_failing_close_stops_none_of_the_others():
    both_closing = threading.Barrier(2, timeout=20)  # one after the other, the first would wait here in vain
    done: list[str] = []

    def close(name: str):
        def run():
            both_closing.wait()
            done.append(name)
        return run

    def broken():
        raise OSError("this close failed")

    close_side_by_side([close("a"), broken, close("b")])
    assert sorted(done) == ["a", "b"]


def test_a_close_not_waited_for_still_lets_the_worker_exit_on_its_own_and_reaps_it():
    workers = [Worker(ECHO, device=0, spec=SPEC) for _ in range(2)]
    for w in workers:
        w.start()
    pids = [w.pid for w in workers]
    close_side_by_side([w.close for w in workers], wait=False)
    deadline = time.monotonic() + 30
    while any(_exists(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_exists(pid) for pid in pids)  # exited and reaped (no zombie left) by the close's own thread
    assert not any(w.alive for w in workers)


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
