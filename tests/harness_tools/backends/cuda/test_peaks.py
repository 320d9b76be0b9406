"""The device's measured peaks (DeviceInfo.peak_copy_gbps, peak_fp32_tflops): plausible on an H200, measured once
per worker."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.gpu

INFO_TWICE = textwrap.dedent("""
    import json, time
    from harness_tools.backends.cuda.executor import CudaExecutor

    ex = CudaExecutor(0)
    started = time.perf_counter()
    first = ex.info()
    seconds = time.perf_counter() - started
    print(json.dumps({"first": first, "second": ex.info(), "seconds": seconds}))
""")


def test_peaks_are_plausible_and_measured_once_per_worker():
    done = subprocess.run([sys.executable, "-c", INFO_TWICE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    first, second = report["first"], report["second"]
    assert (first["peak_copy_gbps"], first["peak_fp32_tflops"]) == (second["peak_copy_gbps"], second["peak_fp32_tflops"])
    if "H200" in first["name"]:
        assert 1500 <= first["peak_copy_gbps"] <= 5000, first
        assert 20 <= first["peak_fp32_tflops"] <= 80, first
    else:
        assert first["peak_copy_gbps"] > 0 and first["peak_fp32_tflops"] > 0, first
    assert report["seconds"] < 1.0, report  # the timing floor and both peaks


def test_the_backend_reports_the_peaks(cuda_backend):
    info = cuda_backend.device_info()
    assert info.peak_copy_gbps and info.peak_fp32_tflops
