"""Shared test setup: the ``gpu`` marker skips, with its reason, where no NVIDIA GPU is usable."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

from harness_tools.backends.cuda.backend import gpu_present

# A compile cache of this test session only (servers and CLIs the tests start inherit it): a test that expects a
# fresh compile must not find one from an earlier session or from the user's own runs.
os.environ["CUDAOPT_CUBIN_CACHE"] = tempfile.mkdtemp(prefix="cudaopt-test-compile-cache-")
atexit.register(shutil.rmtree, os.environ["CUDAOPT_CUBIN_CACHE"], True)


# What `pytest -m "not slow"` leaves out: tests that run kernels (a backend worker), start MCP servers, the CLI or
# the optimisation loop as processes, or run every example. What remains checks the engine's and the server's logic
# in about a minute on two cores (README).
SLOW_FIXTURES = {"cpu_backend", "cuda_backend"}
SLOW_PATHS = ("tests/cudaopt_mcp/server/", "tests/cudaopt_mcp/cli/", "tests/cudaopt_mcp/service/", "tests/examples/",
              "tests/cudaopt_mcp/client/test_optimize.py", "tests/cudaopt_mcp/client/test_tuner",
              "tests/cudaopt_mcp/client/test_llm_proposer.py", "tests/harness_tools/run/", "tests/harness_tools/inspect/",
              "tests/harness_tools/backends/", "tests/harness_tools/compile/test_compile_pool.py",
              "tests/harness_tools/compile/test_disk_cache.py", "tests/cudaopt_mcp/test_api_uris.py",
              "tests/harness_tools/tasks/", "tests/harness_tools/test_kernel_programs.py",
              "tests/harness_tools/evaluation/", "tests/cudaopt_mcp/report/")
SLOW_NAMES = ("cli", "cudaopt_", "mcp")  # tests that start the CLI or a server as a process


def _is_slow(item, path: str) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    backend_param = any(isinstance(v, str) and (v.endswith("_backend") or v in ("cpu", "cuda")) for v in params.values())
    return (bool(SLOW_FIXTURES & set(getattr(item, "fixturenames", ()))) or path.startswith(SLOW_PATHS) or backend_param
            or any(n in item.originalname for n in SLOW_NAMES if hasattr(item, "originalname")))


def pytest_collection_modifyitems(config, items):
    root = str(config.rootpath)
    for item in items:
        path = str(item.path)[len(root) + 1:] if str(item.path).startswith(root) else str(item.path)
        if _is_slow(item, path):
            item.add_marker(pytest.mark.slow)
    if gpu_present():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU: no /dev/nvidia* device and nvidia-smi lists none")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cuda_backend():
    """One worker process for the whole session (tests that crash it check that it comes back)."""
    from harness_tools.backends import create_backend

    backend = create_backend("cuda")
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def cpu_backend():
    """The cpu backend's worker, shared by the tests that run kernels on the CPU."""
    from harness_tools.backends import create_backend

    backend = create_backend("cpu")
    yield backend
    backend.close()
