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


def pytest_collection_modifyitems(config, items):
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
