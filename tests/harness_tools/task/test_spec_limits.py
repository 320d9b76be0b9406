"""Task folders and specs are hostile input too: names that index the filesystem, sizes, caps, links out of the folder."""

from __future__ import annotations

import copy
import json
import os
import time

import numpy as np
import pytest

from harness_tools.errors import TaskSpecError
from harness_tools.task.loading import load_task, resolve_task, spec_from_dict
from harness_tools.task.spec import MAX_CASES, MAX_TASK_FILE_BYTES
from tests.harness_tools.task.test_spec import GOOD, make_task


def refused(tmp_path, mutate) -> TaskSpecError:
    spec = copy.deepcopy(GOOD)
    mutate(spec)
    folder = make_task(tmp_path / "task", spec)
    with pytest.raises(TaskSpecError) as info:
        load_task(folder)
    return info.value


@pytest.mark.parametrize("name", ["../x", "a/b", "x.y", "1x", "", "ünï", "x\n", "x" * 65, "a b"])
def test_parameter_names_must_be_identifiers(tmp_path, name):
    def mutate(s):
        s["params"][0]["name"] = name
    err = refused(tmp_path, mutate)
    assert err.field.startswith("params.0") and err.field.endswith("name")
    assert "must be an identifier" in err.problem and "ASCII letters, digits and _" in err.problem


@pytest.mark.parametrize("name", ["../../escape", "a/b", "v.1", "-x", "..", "x\n"])
def test_case_names_must_be_identifiers(tmp_path, name):
    err = refused(tmp_path, lambda s: s["cases"][0].update(name=name))
    assert err.field == "cases.0.name" and "case name" in err.problem and "identifier" in err.problem


def test_size_symbols_must_be_identifiers(tmp_path):
    def mutate(s):
        s["sizes"] = ["../N"]
    err = refused(tmp_path, mutate)
    assert err.field == "sizes.0" and "identifier" in err.problem


def test_twenty_thousand_cases_are_refused_quickly(tmp_path):
    def mutate(s):
        s["cases"] = [{"name": f"c{i}", "role": "validation", "sizes": {"N": 16}} for i in range(20_000)]
    start = time.perf_counter()
    err = refused(tmp_path, mutate)
    assert time.perf_counter() - start < 5
    assert err.field == "cases" and "20000 entries" in err.problem and f"at most {MAX_CASES}" in err.problem


def test_the_largest_accepted_number_of_cases_loads(tmp_path):
    spec = copy.deepcopy(GOOD)
    spec["cases"] = [{"name": f"c{i}", "role": "validation", "sizes": {"N": 16 + i}} for i in range(MAX_CASES)]
    assert len(load_task(make_task(tmp_path / "task", spec)).spec.cases) == MAX_CASES


@pytest.mark.parametrize(("path", "value"), [
    (("params", 0, "shape"), ["N"] * 9),  # dimensions
    (("baseline", "defines"), {f"D{i}": i for i in range(65)}),
    (("description",), "x" * 20_001),
])
def test_lists_dicts_and_strings_have_caps(tmp_path, path, value):
    def mutate(s):
        target = s
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    err = refused(tmp_path, mutate)
    assert "at most" in err.problem


def test_a_huge_expression_in_a_spec_is_refused_before_it_is_parsed(tmp_path):
    start = time.perf_counter()
    err = refused(tmp_path, lambda s: s["params"][0].update(shape=["N" + " + N" * 200_000]))
    assert time.perf_counter() - start < 5
    assert "characters" in err.problem and "at most 1000" in err.problem


@pytest.mark.parametrize("value", [1 << 70, -(1 << 64) - 1])
def test_case_sizes_fit_64_bits(tmp_path, value):
    err = refused(tmp_path, lambda s: s["cases"][0]["sizes"].update(N=value))
    assert err.field.startswith("cases.0.sizes")


def test_a_case_whose_buffers_exceed_any_machine_is_refused_at_load(tmp_path):
    err = refused(tmp_path, lambda s: s["params"][0].update(shape=["N * 2 ** 40"]))
    assert err.field == "cases.0 (small)" and "4398046.5 GB of buffers" in err.problem


def test_scalar_values_must_fit_their_dtype(tmp_path):
    err = refused(tmp_path, lambda s: s["cases"][1]["sizes"].update(N=1 << 33))
    assert err.field.startswith("params.2 (n)") and "does not fit int32" in err.problem


def test_input_distribution_bounds(tmp_path):
    err = refused(tmp_path, lambda s: s["params"][0].update(init={"dist": "uniform", "low": 2, "high": 1}))
    assert "low 2 is above high 1" in err.problem


def test_an_integer_with_thousands_of_digits_in_task_json(tmp_path):
    text = json.dumps(GOOD).replace('"N": 1000', '"N": ' + "9" * 5000)
    with pytest.raises(TaskSpecError) as info:
        load_task(make_task(tmp_path / "task", text=text))
    assert "invalid JSON" in info.value.problem


def test_deeply_nested_json_is_a_spec_error(tmp_path):
    with pytest.raises(TaskSpecError) as info:
        load_task(make_task(tmp_path / "task", text="[" * 100_000 + "]" * 100_000))
    assert "invalid JSON" in info.value.problem


def test_an_oversized_task_json_is_refused_unread(tmp_path):
    folder = make_task(tmp_path / "task")
    with open(folder / "task.json", "w") as f:
        f.write(" " * (MAX_TASK_FILE_BYTES + 1))
    with pytest.raises(TaskSpecError) as info:
        load_task(folder)
    assert "at most" in info.value.problem


# ---- links, FIFOs and other files that would take the folder somewhere else ---------------------------
SECRET = "TOP SECRET\n"


@pytest.mark.parametrize("name", ["baseline.cu", "reference.py", "task.json", "notes.txt"])
def test_a_link_out_of_the_task_folder_is_refused_naming_the_file(tmp_path, name):
    folder = make_task(tmp_path / "task")
    outside = tmp_path / "secret.txt"
    outside.write_text(SECRET)
    (folder / name).unlink(missing_ok=True)
    (folder / name).symlink_to(outside)
    with pytest.raises(TaskSpecError) as info:
        load_task(folder)
    assert name in str(info.value) and "leads out of the task folder" in info.value.problem
    assert SECRET.strip() not in str(info.value)


def test_a_linked_folder_inside_the_task_folder_is_refused_when_it_leads_out(tmp_path):
    folder = make_task(tmp_path / "task")
    (tmp_path / "elsewhere").mkdir()
    (folder / "data").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(TaskSpecError) as info:
        load_task(folder)
    assert "data" in str(info.value) and "leads out" in info.value.problem


def test_a_link_that_stays_inside_the_folder_is_fine(tmp_path):
    folder = make_task(tmp_path / "task")
    (folder / "kernel.cu").write_text((folder / "baseline.cu").read_text())
    (folder / "baseline.cu").unlink()
    (folder / "baseline.cu").symlink_to("kernel.cu")
    assert load_task(folder).read("baseline.cu").startswith('extern "C"')


def test_a_fifo_in_the_task_folder_is_refused(tmp_path):
    folder = make_task(tmp_path / "task")
    os.mkfifo(folder / "pipe")
    with pytest.raises(TaskSpecError) as info:
        load_task(folder)
    assert "pipe" in str(info.value) and "not a regular file" in info.value.problem


def test_a_file_swapped_for_a_link_after_loading_is_not_read(tmp_path):
    task = load_task(make_task(tmp_path / "task"))
    (tmp_path / "secret.cu").write_text(SECRET)
    (task.folder / "baseline.cu").unlink()
    (task.folder / "baseline.cu").symlink_to(tmp_path / "secret.cu")
    with pytest.raises(TaskSpecError) as info:
        task.read("baseline.cu")
    assert "leads out of the task folder" in str(info.value)


def test_resolve_task_does_not_treat_a_path_as_a_bundled_name(tmp_path):
    with pytest.raises(TaskSpecError):
        resolve_task("..")


# ---- stored references: every array is what the spec says ---------------------------------------------
def _stored(tmp_path, arrays) -> TaskSpecError | None:
    spec = copy.deepcopy(GOOD)
    spec["reference"] = {"kind": "stored", "dir": "expected"}
    spec["cases"] = [{"name": "small", "role": "validation", "sizes": {"N": 8}}]
    folder = make_task(tmp_path / "task", spec)
    (folder / "expected" / "small").mkdir(parents=True)
    for name, arr in arrays.items():
        np.save(folder / "expected" / "small" / f"{name}.npy", arr)
    try:
        load_task(folder)
    except TaskSpecError as exc:
        return exc
    return None


def test_stored_arrays_of_the_right_shape_and_dtype_load(tmp_path):
    assert _stored(tmp_path, {"x": np.ones(8, np.float32), "y": np.ones(8, np.float64)}) is None


@pytest.mark.parametrize(("arrays", "words"), [
    ({"x": np.ones(9, np.float32), "y": np.ones(8)}, "stored shape (9,) differs from the spec's (8,)"),
    ({"x": np.ones(8, np.float64), "y": np.ones(8)}, "stored input has dtype float64; the buffer is float32"),
    ({"x": np.ones(8, np.float32), "y": np.array([object()] * 8)}, "not"),
])
def test_stored_arrays_that_do_not_match_the_spec_are_refused(tmp_path, arrays, words):
    err = _stored(tmp_path, arrays)
    assert err is not None and words in err.problem


def test_inline_spec_errors_name_the_source():
    spec = copy.deepcopy(GOOD)
    spec["params"][1]["name"] = "../../../tmp/owned"
    with pytest.raises(TaskSpecError) as info:
        spec_from_dict(spec, "inline")
    assert info.value.file == "inline" and "identifier" in info.value.problem
