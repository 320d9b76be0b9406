"""An attack through ``cudaopt optimize`` itself: the command now hosts its server in-process and starts the
workers from a thread before anything else, in the process that holds the user's API key. A task folder whose
baseline is hostile native code (the cpu backend) dumps the environment and reads a host secret file when its
library loads: the jail's minimal environment is all it sees, and no secret reaches the output, the log or the
results folder. The same through Ray (``--ray local``): its actors run outside the jail, in the environment of the
process that started the cluster, key included; the worker each actor starts is jailed all the same."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.cudaopt_mcp import jail_attack_kit as kit


@pytest.mark.parametrize("extra", [[], ["--ray", "local", "--parallel", "2"]], ids=["local", "ray"])
def test_a_hostile_baseline_under_optimize_sees_neither_the_key_nor_host_files(tmp_path, extra):
    if extra:
        pytest.importorskip("ray", reason="Ray is the [ray] extra: pip install 'cudaopt[ray]'")
    secrets = kit.make_secrets(tmp_path / "host-secrets")
    task = kit.jailbox_task(tmp_path / "tasks")
    payload = kit.ENV_DUMP + "\n" + kit.read_files([str(secrets.file), "/etc/passwd"])
    (task / "baseline.cu").write_text(kit.kernel(payload, where="static"))
    results = tmp_path / "results"
    out = subprocess.run([sys.executable, "-m", "cudaopt_mcp.cli", "-v", "optimize", str(task), "--backend", "cpu",
                          "--max-iterations", "0", "--no-report", "--results", str(results), *extra],
                         capture_output=True, text=True, timeout=300, cwd=kit.ROOT,
                         env={**os.environ, **secrets.env(), "PYTHONPATH": str(kit.ROOT)})
    assert "baseline: c0001" in out.stderr, out.stderr[-3000:]  # it ran: evaluated, wrong (the leak is its output)
    leak = b"".join(p.read_bytes() for p in results.rglob("*.npy"))
    assert b"ENV PATH=" in leak and b"E OPENAI_API_KEY=(unset)" in leak, leak[:2000]  # positive control
    assert f"F {secrets.file}: errno".encode() in leak and b"F /etc/passwd: opened" in leak
    hits = kit.secret_hits(secrets, out.stdout, out.stderr, folders=[results])
    assert not hits, hits
