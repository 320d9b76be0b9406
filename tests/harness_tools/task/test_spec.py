"""Task folders: a good one loads; every bad one is a TaskSpecError naming file, field and problem."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from harness_tools.compile import compile_candidate
from harness_tools.errors import TaskSpecError
from harness_tools.task.candidate import baseline, tuned
from harness_tools.task.loading import bundled_task_names, load_task, resolve_task
from harness_tools.task.spec import BufferParam

BASELINE_CU = """\
extern "C" __global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""
REFERENCE_PY = """\
def reference(x, y, n):
    y[:] = 2.0 * x
"""
GOOD = {
    "name": "scale",
    "description": "y = 2 x",
    "kernel_name": "scale",
    "params": [
        {"kind": "buffer", "name": "x", "dtype": "float32", "shape": ["N"], "role": "in"},
        {"kind": "buffer", "name": "y", "dtype": "float32", "shape": ["N"], "role": "out"},
        {"kind": "scalar", "name": "n", "dtype": "int32", "value": "N"},
    ],
    "sizes": ["N"],
    "cases": [
        {"name": "small", "role": "validation", "sizes": {"N": 1000}},
        {"name": "large", "role": "performance", "sizes": {"N": 1 << 20}},
    ],
    "reference": {"kind": "numpy"},
    "tolerance": {"float32": {"atol": 1e-6, "rtol": 1e-6}},
    "baseline": {"source": "baseline.cu", "launch": {"grid": ["ceil_div(N, 256)"], "block": [256]}},
}


def make_task(folder: Path, spec: dict | None = None, *, text: str | None = None) -> Path:
    """A task folder with task.json (``spec`` or raw ``text``), baseline.cu and reference.py."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.json").write_text(text if text is not None else json.dumps(spec if spec is not None else GOOD))
    (folder / "baseline.cu").write_text(BASELINE_CU)
    (folder / "reference.py").write_text(REFERENCE_PY)
    return folder


def spec_error(tmp_path: Path, mutate) -> TaskSpecError:
    spec = copy.deepcopy(GOOD)
    mutate(spec)
    folder = make_task(tmp_path / "task", spec)
    with pytest.raises(TaskSpecError) as info:
        load_task(folder)
    err = info.value
    assert err.file == str(folder / "task.json")
    assert str(folder / "task.json") in str(err)
    return err


def test_good_task_loads(tmp_path):
    folder = make_task(tmp_path / "scale")
    task = load_task(folder)
    assert task.name == "scale"
    assert task.folder == folder.resolve()
    assert task.read(task.spec.baseline.source) == BASELINE_CU
    assert [p.name for p in task.spec.outputs] == ["y"]
    assert [p.name for p in task.spec.buffers] == ["x", "y"]
    large = task.spec.case("large")
    assert large.role == "performance"
    x = task.spec.params[0]
    assert isinstance(x, BufferParam)
    assert task.spec.shape_of(x, large.sizes) == (1 << 20,)
    with pytest.raises(KeyError, match="small"):
        task.spec.case("nope")


def test_resolve_task_accepts_a_folder_path(tmp_path):
    folder = make_task(tmp_path / "scale")
    assert resolve_task(str(folder)).name == "scale"


def test_good_baseline_compiles(tmp_path):
    task = load_task(make_task(tmp_path / "scale"))
    result = compile_candidate(baseline(task), "sm_90")
    assert result.ok, result.log


def test_missing_task_json(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(TaskSpecError) as info:
        load_task(tmp_path / "empty")
    assert info.value.file == str(tmp_path / "empty" / "task.json")
    assert "no task.json" in info.value.problem


def test_invalid_json_names_line_and_column(tmp_path):
    text = '{\n  "name": "scale",\n  "description": oops\n}\n'
    folder = make_task(tmp_path / "task", text=text)
    with pytest.raises(TaskSpecError) as info:
        load_task(folder)
    err = info.value
    assert err.file == str(folder / "task.json")
    assert err.field == "line 3 column 18"
    assert "invalid JSON" in err.problem


def test_unknown_field_is_refused(tmp_path):
    err = spec_error(tmp_path, lambda s: s.update(kernel_nmae="scale"))
    assert err.field == "kernel_nmae"
    assert "not permitted" in err.problem


def test_unknown_field_in_a_nested_object_is_refused(tmp_path):
    err = spec_error(tmp_path, lambda s: s["baseline"]["launch"].update(threads=256))
    assert err.field == "baseline.launch.threads"


def test_wrong_dtype(tmp_path):
    err = spec_error(tmp_path, lambda s: s["params"][1].update(dtype="float128"))
    assert err.field.startswith("params.1") and err.field.endswith("dtype")
    assert "float32" in err.problem  # lists what is accepted


def test_bad_role(tmp_path):
    err = spec_error(tmp_path, lambda s: s["params"][1].update(role="output"))
    assert err.field.startswith("params.1") and err.field.endswith("role")
    assert "'out'" in err.problem


def test_kernel_names_of_the_engine_are_reserved(tmp_path):
    err = spec_error(tmp_path, lambda s: s.update(kernel_name="cudaopt_evict_l2"))
    assert err.field == "kernel_name" and "'cudaopt_'" in err.problem and "Nsight Compute" in err.problem


def test_tolerance_for_an_unknown_dtype(tmp_path):
    err = spec_error(tmp_path, lambda s: s["tolerance"].update(float8={"atol": 1}))
    assert err.field == "tolerance"
    assert "float8" in err.problem


def test_case_missing_a_size(tmp_path):
    def mutate(s):
        s["sizes"] = ["N", "M"]
        s["params"][0]["shape"] = ["N", "M"]

    err = spec_error(tmp_path, mutate)
    assert err.field.startswith("cases")
    assert "'small'" in err.problem and "M" in err.problem


def test_shape_using_an_unknown_symbol(tmp_path):
    err = spec_error(tmp_path, lambda s: s["params"][0].update(shape=["N", "K"]))
    assert err.field.startswith("params")
    assert "'x'" in err.problem and "K" in err.problem


def test_missing_tolerance_for_an_output_dtype(tmp_path):
    err = spec_error(tmp_path, lambda s: s.update(tolerance={}))
    assert err.field.startswith("tolerance")
    assert "float32" in err.problem and "'y'" in err.problem


def test_no_output_buffer(tmp_path):
    err = spec_error(tmp_path, lambda s: s["params"][1].update(role="in"))
    assert err.field.startswith("params")
    assert "no out/inout buffer" in err.problem


def test_repeated_param_names(tmp_path):
    err = spec_error(tmp_path, lambda s: s["params"][2].update(name="x"))
    assert err.field.startswith("params")
    assert "repeat" in err.problem and "'x'" in err.problem


def test_referenced_file_missing(tmp_path):
    err = spec_error(tmp_path, lambda s: s["baseline"].update(source="other.cu"))
    assert err.field == "baseline.source"
    assert "'other.cu'" in err.problem and "does not exist" in err.problem


def test_missing_reference_file(tmp_path):
    err = spec_error(tmp_path, lambda s: s.update(reference={"kind": "numpy", "file": "ref2.py"}))
    assert err.field == "reference.file"
    assert "'ref2.py'" in err.problem


@pytest.mark.parametrize("name", ["../x.cu", "sub/baseline.cu", "/etc/hostname"])
def test_file_name_with_a_path_is_refused(tmp_path, name):
    # The file exists where the path points, so only the path check can refuse it.
    (tmp_path / "x.cu").write_text(BASELINE_CU)
    (tmp_path / "task" / "sub").mkdir(parents=True)
    (tmp_path / "task" / "sub" / "baseline.cu").write_text(BASELINE_CU)
    err = spec_error(tmp_path, lambda s: s["baseline"].update(source=name))
    assert err.field == "baseline.source"
    assert "plain file name" in err.problem


def test_stored_reference_dir_must_stay_inside_the_task_folder(tmp_path):
    # Every array exists where "../expected" points, so only a path check can refuse it.
    for case in GOOD["cases"]:
        for buffer in ("x", "y"):
            (tmp_path / "expected" / case["name"]).mkdir(parents=True, exist_ok=True)
            np.save(tmp_path / "expected" / case["name"] / f"{buffer}.npy", np.ones(4, np.float32))
    err = spec_error(tmp_path, lambda s: s.update(reference={"kind": "stored", "dir": "../expected"}))
    assert err.field == "reference.dir"


@pytest.mark.parametrize(("shape", "n"), [(["N"], 0), (["N - 2000"], 1000)])
def test_non_positive_shape_for_a_case(tmp_path, shape, n):
    def mutate(s):
        s["params"][0]["shape"] = shape
        s["cases"][0]["sizes"]["N"] = n

    err = spec_error(tmp_path, mutate)
    assert err.field.startswith("params.0") and "'small'" in err.field
    assert "non-positive" in err.problem


def test_bad_expression_in_a_shape_is_a_spec_error(tmp_path):
    err = spec_error(tmp_path, lambda s: s["params"][0].update(shape=["N / 3"]))
    assert err.field.startswith("params.0")
    assert "not an integer" in err.problem


def test_complex_valued_shape_is_a_spec_error_not_a_crash(tmp_path):
    err = spec_error(tmp_path, lambda s: s["params"][0].update(shape=["(-N) ** 0.5"]))
    assert err.field.startswith("params.0")


def test_bad_metrics_expression(tmp_path):
    err = spec_error(tmp_path, lambda s: s.update(metrics={"flops": "2 * N * K"}))
    assert err.field == "metrics.flops"
    assert "'K'" in err.problem


def test_resolve_task_on_an_unknown_name():
    with pytest.raises(TaskSpecError) as info:
        resolve_task("no_such_task_7f3a")
    assert info.value.file == "no_such_task_7f3a"
    assert "not a bundled task" in info.value.problem


def test_every_bundled_task_loads_and_its_baseline_compiles():
    names = bundled_task_names()
    assert names, "no bundled tasks found under harness_tools/tasks/*/task.json"
    for name in names:
        task = resolve_task(name)
        result = compile_candidate(baseline(task), "sm_90")
        assert result.ok, f"{name}: {result.log}"


def test_an_unknown_dtype_is_refused_with_the_field_and_bfloat16_among_the_known(tmp_path):
    err = spec_error(tmp_path, lambda s: s["params"][0].update(dtype="float4_e2m1"))
    assert err.field.startswith("params.0") and err.field.endswith("dtype")
    assert "'bfloat16'" in err.problem and "'float16'" in err.problem


def test_half_outputs_default_to_the_derived_tolerance_and_a_task_may_override_it(tmp_path):
    spec = copy.deepcopy(GOOD)
    spec["params"][1]["dtype"], spec["tolerance"] = "bfloat16", {}
    task = load_task(make_task(tmp_path / "default", spec))
    tol = task.spec.tolerance_for("bfloat16")
    assert (tol.atol, tol.rtol) == (2.0 ** -8, 2.0 ** -7)  # u and 2u (docs/dtypes.md)
    assert task.spec.tolerance_for("float16").rtol == 2.0 ** -10 and task.spec.tolerance_for("float32") is None
    spec["tolerance"] = {"bfloat16": {"atol": 0, "rtol": 0.05}}
    assert load_task(make_task(tmp_path / "stated", spec)).spec.tolerance_for("bfloat16").rtol == 0.05


HOPPER_CU = """\
extern "C" __global__ void scale(const float* x, float* y, int n) {
    asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");  // sm_90a only
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""


def test_a_tunable_kernel_with_compile_options_builds_its_points_with_them(tmp_path):
    spec = copy.deepcopy(GOOD)
    spec["tunables"] = {"source": "hopper.cu", "params": {"THREADS": [128, 256]}, "options": ["--arch-specific"],
                        "launch": {"grid": ["ceil_div(N, THREADS)"], "block": ["THREADS"]}}
    folder = make_task(tmp_path / "task", spec)
    (folder / "hopper.cu").write_text(HOPPER_CU)
    task = load_task(folder)
    point = tuned(task, {"THREADS": 128})
    assert point.options == ["--arch-specific"]
    compiled = compile_candidate(point, "sm_90")
    assert compiled.ok and compiled.arch == "sm_90a", compiled.log
    assert baseline(task).options == []  # the baseline keeps its own (none)


@pytest.mark.parametrize("where", ["baseline", "tunables"])
def test_an_option_the_engine_sets_itself_is_refused_in_the_task_file(tmp_path, where):
    def mutate(spec):
        if where == "tunables":
            spec["tunables"] = {"source": "baseline.cu", "params": {"THREADS": [128]},
                                "launch": {"grid": ["ceil_div(N, THREADS)"], "block": ["THREADS"]}}
        spec[where]["options"] = ["--use_fast_math", "-I/etc"]

    err = spec_error(tmp_path, mutate)
    assert f"{where}.options.1" in str(err) and "'-I/etc' is not accepted" in str(err)


@pytest.mark.parametrize("field, mutate", [
    ("baseline.launch.grid.0", lambda s: s["baseline"]["launch"].update(grid=["ceil_div(M, 256)"])),
    ("baseline.launch.shared_mem", lambda s: s["baseline"]["launch"].update(shared_mem="TILE * 4")),
    ("tunables.launch.block.0", lambda s: s.update(tunables={"source": "baseline.cu", "params": {"B": [64, 128]},
                                                             "launch": {"grid": ["ceil_div(N, B)"], "block": ["BLOCK"]}})),
])
def test_an_unknown_name_in_a_launch_is_found_when_the_task_loads(tmp_path, field, mutate):
    err = spec_error(tmp_path, mutate)
    assert err.field == field and "neither a size of the task nor a define of this program" in str(err)


def test_launch_names_may_be_sizes_defines_tunables_and_size_defines(tmp_path):
    spec = copy.deepcopy(GOOD)
    spec["baseline"]["defines"] = {"THREADS": 256}
    spec["baseline"]["launch"] = {"grid": ["ceil_div(N, THREADS)"], "block": ["THREADS"], "shared_mem": "4 * WIDTH"}
    spec["size_defines"] = {"WIDTH": "N"}
    spec["tunables"] = {"source": "baseline.cu", "params": {"B": [64, 128]},
                        "launch": {"grid": ["ceil_div(N, B)"], "block": ["B"], "shared_mem": "WIDTH"}}
    assert load_task(make_task(tmp_path / "t", spec)).spec.tunables is not None
