"""Hostile candidates against the jail through ``cudaopt eval TASK --kernel FILE --backend cpu``, a real
subprocess with a token and an API key in its environment and a secret file beside it.

The payloads (``jail_attack_kit.py``) run as native code in the cpu worker (or in the race-check executable);
each test checks that the payload ran, then that no secret reached stdout, stderr or the ``--keep`` folder and
that nothing happened on the host.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets as random_tokens
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from harness_tools.run import jail
from tests.cudaopt_mcp import jail_attack_kit as kit

pytestmark = pytest.mark.skipif(not jail.status().active, reason=f"no jail here: {jail.status().detail}")


@pytest.fixture(scope="module")
def secrets(tmp_path_factory) -> kit.Secrets:
    return kit.make_secrets(tmp_path_factory.mktemp("cli-secrets"))


@pytest.fixture(scope="module")
def task(tmp_path_factory) -> Path:
    return kit.jailbox_task(tmp_path_factory.mktemp("cli-tasks"))


class Eval:
    def __init__(self, out: subprocess.CompletedProcess, keep: Path):
        self.out, self.keep = out, keep
        self.result = json.loads(out.stdout) if out.stdout.strip().startswith("{") else {}
        path = keep / "outputs" / kit.CASE / "out" / "out.npy"
        self.leak = np.load(path).tobytes() if path.is_file() else b""

    @property
    def leak_text(self) -> str:
        end = self.leak.find(b"JX-END")
        return (self.leak[: end + 6] if end >= 0 else self.leak).decode(errors="replace")


def cudaopt_eval(task: Path, source: str, tmp: Path, secrets: kit.Secrets, *extra: str) -> Eval:
    kernel, keep = tmp / f"k-{random_tokens.token_hex(4)}.cu", tmp / f"keep-{random_tokens.token_hex(4)}"
    kernel.write_text(source)
    out = subprocess.run([sys.executable, "-m", "cudaopt_mcp.cli", "eval", str(task), "--kernel", str(kernel),
                          "--backend", "cpu", "--only", "validation", "--json", "--keep", str(keep), *extra],
                         env=kit.server_env(secrets), cwd=tmp, capture_output=True, text=True, timeout=300, check=False)
    return Eval(out, keep)


def contained(ev: Eval, secrets: kit.Secrets, error: type[AssertionError] = AssertionError) -> None:
    hits = kit.secret_hits(secrets, ev.out.stdout, ev.out.stderr, ev.leak, folders=[ev.keep, secrets.folder])
    if hits:
        raise error(f"secrets reached the caller: {hits}")
    assert "Traceback" not in ev.out.stderr, ev.out.stderr[-3000:]


def test_cli_host_code_reads_neither_the_secret_file_nor_the_environment(task, secrets, tmp_path):
    payload = kit.read_files([*kit.secret_paths(secrets.file), "/etc/shadow", "/etc/passwd"]) + kit.ENV_DUMP
    ev = cudaopt_eval(task, kit.kernel(payload), tmp_path, secrets)
    assert ev.out.returncode == 1, ev.out.stderr[-3000:]  # ran, and is not correct: the leak is its output
    text = ev.leak_text
    assert text.startswith("JX-BEGIN") and text.endswith("JX-END"), text[:500]
    assert "F /etc/passwd: opened" in text and "ENV HOME=/tmp" in text  # positive controls
    assert "E CUDAOPT_MCP_TOKEN=(unset)" in text and "E OPENAI_API_KEY=(unset)" in text
    for path in kit.secret_paths(secrets.file):
        assert f"F {path}: errno" in text
    assert "JX-END" in ev.out.stderr  # the worker's stderr is the CLI's
    contained(ev, secrets)


def test_cli_system_popen_start_no_shell_and_file_writes_stay_in_the_jail(task, secrets, tmp_path):
    """The cpu worker starts no process: system() and popen run no shell; of the writes, only the scratch folder's
    lands (inside the jail), none on the host."""
    nonce = random_tokens.token_hex(6)
    host_out = [secrets.folder / f"jx-cat-{nonce}", tmp_path / f"jx-env-{nonce}", Path("/tmp") / f"jx-cp-{nonce}"]
    new = [task / f"jx-{nonce}", Path.home() / f".jx-{nonce}", kit.ROOT / f"jx-{nonce}", tmp_path / f"jx-w-{nonce}",
           jail.ENGINE_DIR / f"jx-{nonce}"]
    payload = kit.system_and_popen(secrets.file, host_out) + kit.host_writes(new, [secrets.file, task / "task.json"])
    ev = cudaopt_eval(task, kit.kernel(payload), tmp_path, secrets)
    text = ev.leak_text
    assert "S system rc=" in text and "JX-POPEN-RAN" not in text and "JX-SYSTEM-RAN" not in ev.out.stderr, text[:2000]
    assert re.search(r"W \S+/scratch/jx-inside-scratch: WROTE", text)
    assert "OPENED FOR WRITING" not in text
    created = [str(p) for p in host_out + new if p.exists()]
    for p in host_out + new:
        p.unlink(missing_ok=True)
    assert not created, f"written on the host: {created}"
    contained(ev, secrets)


def test_cli_host_loopback_is_unreachable(task, secrets, tmp_path):
    ears = kit.listeners()
    port = ears.port
    try:
        ev = cudaopt_eval(task, kit.kernel(kit.connects(port, ears.abstract)), tmp_path, secrets)
        time.sleep(0.2)
        got = ears.connections()
    finally:
        ears.close()
    text = ev.leak_text
    assert f"C 127.0.0.1:{port} rc=-1" in text and f"U @{ears.abstract} rc=-1" in text, text[:2000]
    assert got == [], got
    contained(ev, secrets)


def test_cli_fork_bomb_is_bounded_and_leaves_nothing(task, secrets, tmp_path):
    comm = "jx" + random_tokens.token_hex(5)
    ev = cudaopt_eval(task, kit.kernel(kit.fork_bomb(comm)), tmp_path, secrets)
    found = re.search(r"FORK ok=(\d+) fail=(\d+) errno=(\d+)", ev.out.stderr)
    assert found, ev.out.stderr[-3000:]
    assert int(found.group(1)) == 0 and int(found.group(3)) == errno.EPERM, found.group(0)  # no process at all
    left = kit.wait_gone(lambda: kit.with_comm(comm), 2)  # the CLI has exited: its jail is gone, children too
    assert not left, f"forked children outlived cudaopt eval: {left}"
    contained(ev, secrets)


def test_cli_race_check_executable_is_jailed(task, secrets, tmp_path):
    """--race-check runs the candidate once more as a TSan executable: the payload runs only there (it
    looks for TSAN_OPTIONS), reads what it can and ends the run, so its stderr comes back as the excerpt."""
    paths = kit.secret_paths(secrets.file)[:3]
    payload = ("    if (!getenv(\"TSAN_OPTIONS\")) return;\n    jx_puts(\"JX-RACE\\n\");\n" + kit.read_files(paths)
               + kit.ENV_DUMP + "    fwrite(jx_buf, 1, jx_len, stderr);\n    fflush(stderr);\n    _exit(7);")
    ev = cudaopt_eval(task, kit.kernel(payload, to_output=False), tmp_path, secrets, "--race-check")
    case = ev.result["cases"][0]
    excerpt = json.dumps(case.get("races"))
    assert "JX-RACE" in excerpt and "ENV HOME=/tmp" in excerpt, case  # the payload ran in the race-check run
    for path in paths:
        assert f"F {path}: errno" in excerpt
    contained(ev, secrets)


def test_cli_kill9_during_a_hung_kernel_leaves_no_jailed_process(task, secrets, tmp_path):
    kernel, errlog = tmp_path / "hung.cu", tmp_path / "stderr.log"
    kernel.write_text(kit.hung_kernel())
    with errlog.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "cudaopt_mcp.cli", "eval", str(task), "--kernel", str(kernel),
                                 "--backend", "cpu", "--only", "validation", "--timeout", "120"],
                                env=kit.server_env(secrets), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=err)
    jailed: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 60
        while "JX-HUNG" not in errlog.read_text(errors="replace"):
            assert proc.poll() is None and time.monotonic() < deadline, errlog.read_text()[-3000:]
            time.sleep(0.05)
        jailed = kit.descendants(proc.pid)
        cmds = [Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode() for p in jailed]
        assert any("harness_tools.run.worker" in c and "backends.cpu.executor" in c for c in cmds), cmds
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        left = kit.wait_gone(lambda: kit.alive(jailed), 2.0)
        assert not left, f"alive 2 s after kill -9 of cudaopt eval: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in kit.alive(jailed):
            os.kill(pid, signal.SIGKILL)


def test_cli_worker_answer_pipe_cannot_run_code_in_the_caller(task, secrets, tmp_path):
    """Found: cudaopt eval unpickled the worker's answer pipe, so kernel host code ran commands as the
    calling user, outside the jail (harness_tools/run/worker.py; JSON frames now)."""
    stolen = tmp_path / "stolen"
    ev = cudaopt_eval(task, kit.kernel(kit.pickle_injection(f"cat {secrets.file} > {stolen}; env >> {stolen}")),
                      tmp_path, secrets)
    assert "P frame on fd" in ev.out.stderr, ev.out.stderr[-2000:]  # the payload wrote its frame
    escaped = stolen.exists()
    stolen.unlink(missing_ok=True)
    assert not escaped, f"cudaopt eval ran the candidate's command outside the jail: {ev.out.stderr[-500:]}"
    assert ev.out.returncode == 1
    contained(ev, secrets)
