"""The executor's own kernels compile in threads (real NVRTC, which needs no GPU)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness_tools.backends.cuda import compare_kernels, device_kernels
from harness_tools.backends.cuda.own_cubins import OwnCubin
from harness_tools.compile.nvrtc import nvrtc_version, run_nvrtc
from harness_tools.errors import BackendError


def test_both_sources_compile_at_once_to_what_a_compile_in_the_foreground_gives():
    started = [OwnCubin(m.SOURCE, m.KERNELS, "sm_90", name)
               for m, name in ((device_kernels, "helper kernels"), (compare_kernels, "comparison kernels"))]
    for own, module in zip(started, (device_kernels, compare_kernels)):
        here = run_nvrtc(module.SOURCE, ["--gpu-architecture=sm_90", "-std=c++17"], "sm_90", module.KERNELS,
                         nvrtc_version())
        assert here.ok and own.cubin() == here.cubin
        assert own.cubin() == here.cubin  # asked again: the same, not compiled again


def test_a_source_that_does_not_compile_is_a_backend_error_with_nvrtcs_log_when_the_cubin_is_asked_for():
    own = OwnCubin('extern "C" __global__ void broken() { undeclared_thing(); }', ["broken"], "sm_90",
                   "comparison kernels")
    with pytest.raises(BackendError, match=r"comparison kernels did not compile for sm_90:(.|\n)*undeclared_thing"):
        own.cubin()


def test_an_arch_nvrtc_refuses_is_a_backend_error_too():
    own = OwnCubin(device_kernels.SOURCE, device_kernels.KERNELS, "sm_1", "helper kernels")
    with pytest.raises(BackendError, match="helper kernels did not compile for sm_1:"):
        own.cubin()


def test_a_process_that_exits_while_its_own_kernels_still_compile_exits_cleanly():
    # a sanitizer's launch child can finish its case before the comparison kernels it never used are compiled;
    # exiting under a running NVRTC crashed it (and the sanitizer called the clean run failed)
    code = ("from harness_tools.backends.cuda import compare_kernels as m\n"
            "from harness_tools.backends.cuda.own_cubins import OwnCubin\n"
            "OwnCubin(m.SOURCE, m.KERNELS, 'sm_90', 'comparison kernels')\n"
            "import time; time.sleep(0.1)\n")  # NVRTC is under way, not finished
    for _ in range(4):  # the crash came in most exits
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
