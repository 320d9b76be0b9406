"""A local Ray cluster started by the first call that needs it outlives the thread that made that call.

Ray starts its raylet and GCS with PDEATHSIG, which fires when the forking *thread* ends: a cluster started from
an evaluation's thread (or anyio's, idle after 10 s) was killed mid-run, and with it the process that joined it
(Ray ends a driver that loses its raylet). Each case runs in a fresh interpreter: Ray is one per process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="Ray is the [ray] extra: pip install 'cudaopt[ray]'")

ROOT = Path(__file__).resolve().parents[3]


def test_a_local_cluster_joined_from_a_short_lived_thread_keeps_working_after_it_ends():
    script = textwrap.dedent("""
        import threading, time
        from harness_tools.backends.ray_members import connect
        starter = threading.Thread(target=connect, args=("local", 2))
        starter.start(); starter.join()
        time.sleep(3)  # the starting thread is gone; a fate-shared daemon would have died with it
        ray = connect("local", 2)
        square = ray.remote(lambda x: x * x)
        print("answers", ray.get([square.remote(i) for i in range(4)], timeout=120))
        ray.shutdown()
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "answers [0, 1, 4, 9]" in done.stdout


def test_a_server_whose_backend_is_named_by_the_cluster_starts_it_with_a_cpu_per_worker(tmp_path):
    # with the backend left to the cluster, naming it connected first, with two CPUs: four cpu actors never started
    # and `cudaopt optimize --ray local --parallel 4` waited for them for good
    script = textwrap.dedent(f"""
        from cudaopt_mcp.service.state import ServerConfig, ServerState
        state = ServerState.open(ServerConfig(results_dir={str(tmp_path / "results")!r}, ray_address="local", workers=4))
        print("backend", state.backend_name)
        import ray
        print("cpus", int(ray.cluster_resources().get("CPU", 0)))
        state.close()
        ray.shutdown()
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "backend cpu" in done.stdout and "cpus 4" in done.stdout, done.stdout
