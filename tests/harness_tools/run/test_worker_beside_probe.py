"""A process's first worker starts jailed beside the jail's probe, and is kept only as the probe's verdict says
(harness_tools.run.jail.popen, ``beside_probe``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness_tools.errors import BackendUnavailable
from harness_tools.run import jail
from harness_tools.run.jail import JailSpec
from harness_tools.run.worker import Worker

ECHO = "tests.harness_tools.run.echo_executor:EchoExecutor"
ROOT = Path(__file__).resolve().parents[3]
SPEC = JailSpec(purpose="test worker", read_only=(str(ROOT / "tests"),), env={"PYTHONPATH": str(ROOT)})

# bubblewrap behind a script that logs each start and makes the probe (its `print('ok')`) take a second
SLOW_PROBE = """#!/bin/sh
case "$*" in
  *"print('ok')"*) echo probe-start >> "{log}"; sleep 1; "{real}" "$@"; code=$?; echo probe-end >> "{log}"; exit $code;;
  *harness_tools.run.worker*) echo worker-start >> "{log}";;
esac
exec "{real}" "$@"
"""


def _fresh_status(monkeypatch, **env: str) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(jail, "_STATUS", {})


def _command_line(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_the_first_worker_starts_while_the_probe_runs_and_stays_jailed(monkeypatch, tmp_path):
    real = jail.bwrap_path()
    if real is None or not jail.status().active:
        pytest.skip("bubblewrap cannot make a jail on this machine")
    log = tmp_path / "starts.log"
    wrapper = tmp_path / "bwrap"
    wrapper.write_text(SLOW_PROBE.format(log=log, real=real))
    wrapper.chmod(0o755)
    _fresh_status(monkeypatch, CUDAOPT_BWRAP=str(wrapper), CUDAOPT_JAIL="auto")
    worker = Worker(ECHO, device=0, spec=SPEC)
    try:
        assert worker.start()["device"] == 0
        assert log.read_text().split() == ["probe-start", "worker-start", "probe-end"]  # it did not wait
        assert jail.status().active and _command_line(worker.pid).startswith(f"{real} --unshare-all")  # jailed
        assert worker.call("echo", {"a": 1}, timeout_s=10) == {"a": 1}
    finally:
        worker.close()


def test_when_the_probe_finds_no_jail_the_first_worker_is_started_again_unjailed(monkeypatch):
    _fresh_status(monkeypatch, CUDAOPT_BWRAP="/bin/false", CUDAOPT_JAIL="auto")  # runs, and can make no jail
    children_before = _children()
    worker = Worker(ECHO, device=0, spec=SPEC)
    try:
        assert worker.start()["device"] == 0
        assert not jail.status().active
        assert "/bin/false" not in _command_line(worker.pid) and "harness_tools.run.worker" in _command_line(worker.pid)
        assert worker.call("echo", {"a": 2}, timeout_s=10) == {"a": 2}
        assert _children() - children_before == {worker.pid}  # the jailed try was reaped, not left behind
    finally:
        worker.close()


def test_under_require_a_first_worker_the_probe_rejects_is_refused_and_reaped(monkeypatch):
    _fresh_status(monkeypatch, CUDAOPT_BWRAP="/bin/false", CUDAOPT_JAIL="require")
    children_before = _children()
    with pytest.raises(BackendUnavailable, match="CUDAOPT_JAIL=require"):
        Worker(ECHO, device=0, spec=SPEC).start()
    assert _children() == children_before


def _children() -> set[int]:
    """This process's child processes, zombies included (a process not reaped stays listed)."""
    me = str(os.getpid())
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == me:
                found.add(int(entry.name))
    return found
