"""The oracle's device form (hi + bfloat16 rest): within its stated bound of the float64 values, written once per
case and seed, and refused for values float32 cannot hold. The comparison kernel itself runs on the GPU
(tests/harness_tools/backends/cuda/test_device_compare.py)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from harness_tools.check.compare import compare
from harness_tools.check.device_compare import device_checks_for
from harness_tools.check.device_reference import (
    ABS_BOUND,
    CHUNK,
    REL_BOUND,
    bfloat16_bits,
    form_of,
    from_form,
    reference_key,
    split,
)
from harness_tools.run.scratch import inputs_root
from harness_tools.task.loading import load_task
from harness_tools.task.spec import Tolerance
from tests.harness_tools.check.checking_tasks import run, write_task


def _values(n: int = 200_000) -> np.ndarray:
    rng = np.random.default_rng(5)
    scales = 10.0 ** rng.uniform(-44, 38, n)  # float32 subnormals up to near its largest
    values = rng.standard_normal(n) * scales
    values[:6] = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-320]
    return values


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int32", "uint8"])
def test_the_device_form_stays_within_its_bound_of_the_float64_reference(tmp_path, dtype):
    values = _values()
    form = form_of(dtype)
    paths = split(values, form, tmp_path / "ref")
    assert paths is not None and set(paths) == ({"hi", "lo"} if dtype == "float32" else {"hi"})
    hi = np.load(paths["hi"])
    lo = np.load(paths["lo"]) if "lo" in paths else None
    got = from_form(hi, lo)
    finite = np.isfinite(values)
    assert np.array_equal(np.isnan(got), np.isnan(values)) and np.array_equal(got[~finite & ~np.isnan(values)],
                                                                               values[~finite & ~np.isnan(values)])
    error = np.abs(got[finite] - values[finite])
    assert np.all(error <= REL_BOUND[form] * np.abs(values[finite]) + ABS_BOUND[form])
    if form == "rest":  # the rest earns its bytes: far closer than float32 alone
        alone = np.abs(hi[finite].astype(np.float64) - values[finite])
        assert np.median(error / np.maximum(alone, 1e-300)) < 1e-2


def test_a_finite_value_beyond_float32_has_no_device_form(tmp_path):
    values = np.array([1.0, 2.0, 1e39])
    assert split(values, "rest", tmp_path / "ref") is None
    assert not list(tmp_path.iterdir())  # nothing half-written is left
    assert split(values, "exact", tmp_path / "ref") is not None  # float64 holds it


def test_a_reference_of_many_chunks_splits_as_one_and_any_chunk_can_refuse(tmp_path):
    """The chunks are split side by side: every element lands where it belongs, the last (short) chunk included,
    and a value float32 cannot hold refuses the whole form from whichever chunk it is in."""
    values = np.resize(_values(), 2 * CHUNK + 12_345)
    values[CHUNK - 1 : CHUNK + 2] = [1.5, -2.25, 3.0]  # across a boundary
    paths = split(values, "rest", tmp_path / "ref")
    assert paths is not None
    got = from_form(np.load(paths["hi"]), np.load(paths["lo"]))
    assert got.shape == values.shape and got[CHUNK - 1 : CHUNK + 2].tolist() == [1.5, -2.25, 3.0]
    finite = np.isfinite(values)
    assert np.all(np.abs(got[finite] - values[finite]) <= REL_BOUND["rest"] * np.abs(values[finite]) + ABS_BOUND["rest"])
    values[-1] = 1e39  # in the last chunk only
    assert split(values, "rest", tmp_path / "again") is None
    assert not list(tmp_path.glob("again*"))


def test_bfloat16_rounding_is_round_to_nearest_even():
    values = np.random.default_rng(1).standard_normal(100_000).astype(np.float32) * np.float32(1e-8)
    expected = values.astype(ml_dtypes.bfloat16).view(np.uint16)
    assert np.array_equal(bfloat16_bits(values), expected)


def _big_output_task(folder):
    params = [{"kind": "buffer", "name": "x", "dtype": "float32", "shape": ["n"], "role": "in"},
              {"kind": "buffer", "name": "y", "dtype": "float32", "shape": ["n"], "role": "out"},
              {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"}]
    kernel = ('extern "C" __global__ void twice(const float* x, float* y, int n) {\n'
              '  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2.0f * x[i]; }\n')
    return load_task(write_task(folder, kernel_name="twice", kernel=kernel, params=params, sizes=["n"],
                                cases=[{"name": "small", "role": "validation", "sizes": {"n": 1000}},
                                       {"name": "big", "role": "validation", "sizes": {"n": 5_000_000}}],
                                reference_py="def reference(inputs, sizes):\n    return {'y': 2.0 * inputs['x']}\n",
                                launch={"grid": ["ceil_div(n, 256)"], "block": [256]}))


def test_only_big_outputs_go_to_the_device_and_the_oracle_runs_once_per_seed(tmp_path):
    task = _big_output_task(tmp_path / "t")
    small, big = task.spec.cases
    calls = []

    def oracle():
        calls.append(1)
        return {"y": np.arange(5_000_000, dtype=np.float64) / 3}
    assert device_checks_for(task, small, 3, "cuda", "auto", oracle) == {}  # 4 KB: downloaded
    assert device_checks_for(task, big, 3, "cpu", "auto", oracle) == {}  # the cpu backend cannot
    assert device_checks_for(task, big, 3, "cuda", "host", oracle) == {}
    checks = device_checks_for(task, big, 3, "cuda", "auto", oracle)
    again = device_checks_for(task, big, 3, "cuda", "auto", oracle)
    assert calls == [1] and checks == again  # kept: the oracle is not asked again for this seed
    check = checks["y"]
    assert check.key == f"{reference_key(task, big, 3)}|y" and (check.atol, check.rtol) == (1e-5, 1e-5)
    assert check.lo_file and all(p.startswith(str(inputs_root())) for p in (check.hi_file, check.lo_file))
    assert device_checks_for(task, big, 4, "cuda", "auto", oracle)["y"].key != check.key and calls == [1, 1]
    assert set(device_checks_for(task, small, 3, "cuda", "device", oracle)) == {"y"}  # every output, when asked


def test_a_task_with_a_custom_check_is_compared_on_the_host(tmp_path):
    task = _big_output_task(tmp_path / "t")
    big = task.spec.cases[1]

    def oracle():
        return {"y": np.zeros(5_000_000)}
    assert set(device_checks_for(task, big, 1, "cuda", "auto", oracle)) == {"y"}
    checked = task.model_copy(update={"spec": task.spec.model_copy(update={"check": object()})})
    assert device_checks_for(checked, big, 1, "cuda", "auto", oracle) == {}  # the check needs the outputs here


def test_the_host_comparison_counts_nans_and_infs():
    ref = np.ones(10)
    got = ref.copy()
    got[[1, 4]] = np.nan
    got[7] = -np.inf
    out = compare("y", got, ref, Tolerance(atol=0, rtol=0), {})
    assert (out.nans, out.infs, out.nonfinite, out.mismatches, out.compared_on) == (2, 1, 3, 3, "host")


def test_asking_for_the_device_on_the_cpu_backend_compares_on_the_host(cpu_backend, tmp_path):
    from harness_tools.evaluation import EvaluationConfig

    task = _big_output_task(tmp_path / "t")
    result = run(task, cpu_backend, config=EvaluationConfig(roles=["validation"], seed=1, verify="device"))
    assert result.correct, result.failure
    assert [o.compared_on for c in result.cases for o in c.outputs] == ["host", "host"]


def test_a_tight_tolerance_gets_the_exact_reference():
    assert form_of("float32", 1e-5, 1e-5) == "rest"
    assert form_of("float32", 0.0, 6e-8) == "exact"  # vector_add: just above float32's own rounding
    assert form_of("float32", 4e-6, 2.4e-7) == "exact"  # a relative part of a few ulps
    assert form_of("float32", 2e-6, 0.0) == "rest"  # an absolute tolerance alone
    assert form_of("bfloat16", 0.0, 0.0) == form_of("float16", 0.0, 0.0) == "exact"  # exact results asked for
    assert form_of("bfloat16", 2.0 ** -8, 2.0 ** -7) == "float32"


def test_the_form_follows_the_task_tolerance(tmp_path):
    task = _big_output_task(tmp_path / "t")
    tight = task.model_copy(update={"spec": task.spec.model_copy(
        update={"tolerance": {"float32": Tolerance(atol=0, rtol=6e-8)}})})
    big = task.spec.cases[1]

    def oracle():
        return {"y": np.arange(5_000_000, dtype=np.float64) / 3}
    check = device_checks_for(tight, big, 9, "cuda", "auto", oracle)["y"]
    assert check.lo_file is None and check.rel_bound == 0 and np.load(check.hi_file).dtype == np.float64
