"""Outputs compared on the GPU against the reference held there: the same verdicts and numbers as the host's.

Every case is evaluated twice through ``evaluate``, once with ``verify="device"`` (the comparison kernel, no
download) and once with ``verify="host"`` (NumPy, the definition), and each output's comparison must agree:
wrong elements, NaN, ±Inf, unwritten (poisoned) elements, values near the tolerance, and an output larger than
the verifier's staging buffer. A separate process shows that a kernel in the candidates' context cannot read
the reference held by the verifier.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from harness_tools.check.device_reference import REL_BOUND, form_of
from harness_tools.evaluation import EvaluationConfig
from harness_tools.task.loading import load_task
from tests.harness_tools.check.checking_tasks import run, write_task

pytestmark = pytest.mark.gpu

KERNEL = """
#include <cuda_fp16.h>
#include <cuda_bf16.h>
typedef %(ctype)s out_t;
__device__ out_t store(float v) { return %(convert)s; }
extern "C" __global__ void twice(const float* x, out_t* y, int n, int mode) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = 2.0f * x[i];
  if (mode == 1 && (i == 7 || i == n - 3)) v += 1.0f;
  if (mode == 2 && i == 5) v = __int_as_float(0x7fc00000);
  if (mode == 3 && (i == 9 || i == 11)) v = i == 9 ? __int_as_float(0x7f800000) : __int_as_float(0xff800000);
  if (mode == 4 && i %% 100 == 7) return;  // left unwritten: the poison stays
  if (mode == 5) v = v * (1.0f + %(rtol)s);  // about at the tolerance
  y[i] = store(v);
}
"""
DTYPES = {  # dtype: (C type, conversion from float, rtol)
    "float32": ("float", "v", "1e-5f"),
    "float64": ("double", "(double)v", "1e-5f"),
    "float16": ("__half", "__float2half_rn(v)", "2.0f * 0.00048828125f"),
    "bfloat16": ("__nv_bfloat16", "__float2bfloat16_rn(v)", "2.0f * 0.00390625f"),
    "int32": ("int", "(int)rintf(v * 100.0f)", "0.0f"),
}
# float outputs: a reference float32 cannot hold (2x·(1 + 2^-30)), so the device form's rest is used
REFERENCE = """import numpy as np
def reference(inputs, sizes):
    y = 2.0 * inputs['x']
    return {'y': np.rint(np.float32(y) * np.float32(100.0)) if %r == 'int32' else y * (1.0 + 2.0 ** -30)}
"""
MODES = range(6)


def _task(folder, dtype: str, large: bool):
    ctype, convert, rtol = DTYPES[dtype]
    cases = [{"name": f"mode{m}", "role": "validation", "sizes": {"n": 4099, "mode": m}} for m in MODES]
    if large:  # past the verifier's 256 MB staging buffer: chunks, and a first mismatch in the last one
        cases.append({"name": "large", "role": "validation", "sizes": {"n": 70_000_003, "mode": 1}})
    params = [{"kind": "buffer", "name": "x", "dtype": "float32", "shape": ["n"], "role": "in"},
              {"kind": "buffer", "name": "y", "dtype": dtype, "shape": ["n"], "role": "out"},
              {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"},
              {"kind": "scalar", "name": "mode", "dtype": "int32", "value": "mode"}]
    return load_task(write_task(folder, kernel_name="twice", kernel=KERNEL % {"ctype": ctype, "convert": convert,
                                                                              "rtol": rtol},
                                params=params, sizes=["n", "mode"], cases=cases, reference_py=REFERENCE % dtype,
                                launch={"grid": ["ceil_div(n, 256)"], "block": [256]},
                                tolerance={"float32": {"atol": 1e-6, "rtol": 1e-5}, "float64": {"atol": 1e-6, "rtol": 1e-5},
                                           "int32": {"atol": 0, "rtol": 0}}))


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_the_device_comparison_agrees_with_the_host_on_every_kind_of_wrong(cuda_backend, tmp_path, dtype):
    task = _task(tmp_path / dtype, dtype, large=dtype == "float32")
    config = EvaluationConfig(roles=["validation"], seed=11, timeout_s=300)
    on_device = run(task, cuda_backend, config=config.model_copy(update={"verify": "device"}))
    on_host = run(task, cuda_backend, config=config.model_copy(update={"verify": "host"}))
    assert on_device.compile.ok, on_device.compile.log
    undecided = 0
    for dev, host in zip(on_device.cases, on_host.cases, strict=True):
        d, h = dev.outputs[0], host.outputs[0]
        where = (dtype, dev.name, d, h)
        assert h.compared_on == "host" and not host.run.comparisons
        decided = dev.run.comparisons["y"].decided  # else the reference's last bits matter: the host decides
        assert d.compared_on == ("device" if decided else "host"), where
        undecided += not decided
        assert (dev.status, d.passed, d.mismatches, d.nonfinite, d.nans, d.infs) == \
               (host.status, h.passed, h.mismatches, h.nonfinite, h.nans, h.infs), where
        # the statistics are the device form's: within its bound of the float64 reference (|ref| <= 2 here)
        bound = REL_BOUND[form_of(dtype)]
        assert abs(d.max_abs_err - h.max_abs_err) <= 4 * bound + 1e-9 * h.max_abs_err or d.max_abs_err == h.max_abs_err, where
        assert abs(d.max_rel_err - h.max_rel_err) <= 4 * bound * (1 + h.max_rel_err) or d.max_rel_err == h.max_rel_err, where
        if bound == 0:  # an exact form: the same numbers, bit for bit
            assert (d.max_abs_err, d.max_rel_err) == (h.max_abs_err, h.max_rel_err), where
        if h.first_mismatch is None:
            assert d.first_mismatch is None, where
        else:
            assert d.first_mismatch.index == h.first_mismatch.index, where
            assert d.first_mismatch.got == pytest.approx(h.first_mismatch.got, nan_ok=True), where
            assert d.first_mismatch.expected == pytest.approx(h.first_mismatch.expected, rel=1e-9), where
        assert (dev.message or "").split("; first at")[0] == (host.message or "").split("; first at")[0], where
    assert undecided <= 1
    by_name = {c.name: c for c in on_device.cases}
    assert by_name["mode0"].passed
    assert not by_name["mode1"].passed and by_name["mode1"].outputs[0].first_mismatch.index == [7]
    if dtype != "int32":
        assert by_name["mode2"].outputs[0].nans == 1 and by_name["mode2"].outputs[0].nonfinite == 1
        assert by_name["mode3"].outputs[0].infs == 2
        assert by_name["mode4"].outputs[0].nans == 41  # i % 100 == 7 below 4099: poison reads as NaN
    if dtype == "float32":
        large = by_name["large"].outputs[0]
        assert large.mismatches == 2 and large.elements == 70_000_003
    assert on_device.overhead.compare_ms > 0


def test_a_failure_decided_on_the_device_is_downloaded_as_evidence_and_a_pass_is_not(cuda_backend, tmp_path):
    """A search step compares small outputs on the device too (device_compare_min_bytes): the outputs it no longer
    downloads it still brings back where they matter: a failing output comes back as a file (the evidence a run
    folder keeps) and the same-inputs re-run reads it."""
    task = _task(tmp_path / "task", "float32", large=False)
    config = EvaluationConfig(roles=["validation"], seed=11, timeout_s=300, device_compare_min_bytes=0,
                              outputs_dir=str(tmp_path / "searched"))
    searched = {c.name: c for c in run(task, cuda_backend, config=config).cases}
    # the default keeps small outputs on the host: downloaded whatever the verdict
    default = {c.name: c for c in run(task, cuda_backend, config=config.model_copy(update={
        "device_compare_min_bytes": 16 << 20, "outputs_dir": str(tmp_path / "default")})).cases}
    assert all(c.outputs[0].compared_on == "host" and "y" in c.run.outputs for c in default.values())

    passed, failed = searched["mode0"], searched["mode1"]
    assert passed.passed and passed.outputs[0].compared_on == "device" and passed.run.outputs == {}
    assert not failed.passed and failed.outputs[0].compared_on == "device"
    assert failed.outputs[0].first_mismatch.index == [7] and failed.outputs[0].mismatches == 2
    evidence, downloaded = np.load(failed.run.outputs["y"]), np.load(default["mode1"].run.outputs["y"])
    assert evidence.tobytes() == downloaded.tobytes()  # the same seed's output, as the host path kept it
    assert failed.rerun_differs == {"y": 0}  # deterministic: the re-run downloaded the same bytes
    nan_case = searched["mode2"]  # a NaN alone (no element outside tolerance otherwise) is a failure too
    assert not nan_case.passed and nan_case.outputs[0].compared_on == "device" and "y" in nan_case.run.outputs


PEEK = textwrap.dedent("""
    import ctypes, tempfile, numpy as np
    from cuda.bindings import driver as cu
    from harness_tools.backends.contract import DeviceCheck
    from harness_tools.backends.cuda.executor import CudaExecutor, _ok
    from harness_tools.compile.nvrtc import nvrtc_version, run_nvrtc

    ex = CudaExecutor(0)
    print("compares on the device:", ex.compare_here)
    n = 1 << 20
    truth = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    folder = tempfile.mkdtemp()
    np.save(folder + "/hi.npy", truth)
    out = _ok(cu.cuMemAlloc(n * 4), "alloc")
    _ok(cu.cuMemcpyHtoD(out, truth.ctypes.data, n * 4), "upload")
    check = DeviceCheck(key="peek", hi_file=folder + "/hi.npy", atol=0, rtol=0)
    result = ex._verifier().compare("float32", out, n, check)
    print("compared", result.mismatches, result.decided)
    held = next(iter(ex.verifier.kept.values())).hi
    # what a hostile kernel that knows where the reference is would copy into its output
    src = ('extern "C" __global__ void steal(const float* p, float* o, int n) '
           '{ int i = blockIdx.x * 256 + threadIdx.x; if (i < n) o[i] = p[i]; }')
    built = run_nvrtc(src, ["--gpu-architecture=" + ex.arch], ex.arch, ["steal"], nvrtc_version())
    module = _ok(cu.cuModuleLoadData(built.cubin), "load")
    fn = _ok(cu.cuModuleGetFunction(module, b"steal"), "fn")
    stolen = _ok(cu.cuMemAlloc(n * 4), "alloc")
    values = [ctypes.c_uint64(int(held)), ctypes.c_uint64(int(stolen)), ctypes.c_int(n)]
    array = (ctypes.c_void_p * 3)(*[ctypes.addressof(v) for v in values])
    _ok(cu.cuLaunchKernel(fn, n // 256, 1, 1, 256, 1, 1, 0, ex.stream, ctypes.addressof(array), 0), "launch")
    _ok(cu.cuStreamSynchronize(ex.stream), "steal")
    copy = np.empty(n, dtype=np.float32)
    _ok(cu.cuMemcpyDtoH(copy.ctypes.data, stolen, n * 4), "download")
    print("stolen equal:", int(np.count_nonzero(copy == truth)))
    again = ex.verifier.compare("float32", stolen, n, check)
    print("stolen passes:", again.mismatches == 0, again.mismatches)
""")


def test_a_kernel_that_reads_the_held_reference_gets_noise():
    done = subprocess.run([sys.executable, "-c", PEEK], capture_output=True, text=True, timeout=120)
    text = done.stdout + done.stderr
    assert "compares on the device: True" in text and "compared 0 True" in text, text
    equal = int(text.split("stolen equal: ")[1].split()[0])
    assert equal < 16, text  # of 1M elements: chance agreements of random 32-bit patterns only
    assert "stolen passes: False" in text, text
