"""The cuda worker's own kernels compile with NVRTC for the H200's architecture, without a GPU: a typo in their
source would otherwise show only when a worker starts on one."""

from __future__ import annotations

import pytest

from harness_tools.backends.cuda import compare_kernels, device_kernels
from harness_tools.check.mismatch_map import MAX_BINS, MAX_ROW_BINS
from harness_tools.compile.nvrtc import nvrtc_version, run_nvrtc


@pytest.mark.parametrize("module", [device_kernels, compare_kernels], ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_the_workers_kernels_compile_for_sm_90(module):
    compiled = run_nvrtc(module.SOURCE, ["--gpu-architecture=sm_90", "-std=c++17"], "sm_90", module.KERNELS,
                         nvrtc_version())
    assert compiled.ok and compiled.cubin, compiled.log


def test_the_map_kernels_shared_histogram_holds_every_grid():
    assert max(MAX_BINS * MAX_BINS, MAX_ROW_BINS) <= compare_kernels.MAP_BINS
