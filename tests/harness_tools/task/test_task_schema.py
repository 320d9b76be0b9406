"""The task format's JSON Schema: generated from the models, shipped up to date, named by every task, and as strict
as the loader on the fields it can describe."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from harness_tools.task.loading import load_task
from harness_tools.task.schema import SCHEMA_FILE, schema_text, task_schema

REPO = Path(__file__).resolve().parents[3]
TASK_FILES = sorted([*REPO.glob("harness_tools/tasks/*/task.json"), *REPO.glob("examples/*/task.json")])


def _validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_shipped_schema_is_the_generated_one():
    assert SCHEMA_FILE.read_text() == schema_text(), (
        "harness_tools/task/task.schema.json is out of date: cudaopt schema task --out harness_tools/task/task.schema.json")


@pytest.mark.parametrize("path", TASK_FILES, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_every_bundled_and_example_task_validates_and_names_the_schema(path):
    raw = json.loads(path.read_text())
    errors = list(_validator().iter_errors(raw))
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors]
    assert (path.parent / raw["$schema"]).resolve() == SCHEMA_FILE.resolve()  # the editor finds it, no network


def test_broken_tasks_are_rejected_with_the_field_named():
    raw = json.loads((REPO / "harness_tools/tasks/sgemm/task.json").read_text())
    cases = {
        "an unknown field": ({**raw, "tunabels": {}}, []),
        "a missing name": ({k: v for k, v in raw.items() if k != "name"}, []),
        "a wrong type": ({**raw, "cases": "all"}, ["cases"]),
        "an unknown dtype": (copy.deepcopy(raw), ["params", 0, "dtype"]),
        "an unknown distribution": (copy.deepcopy(raw), ["params", 0]),
    }
    cases["an unknown dtype"][0]["params"][0]["dtype"] = "float128"
    cases["an unknown distribution"][0]["params"][0]["init"] = {"dist": "cauchy"}
    validator = _validator()
    for what, (broken, where) in cases.items():
        errors = list(validator.iter_errors(broken))
        assert errors, what
        paths = [list(e.absolute_path) for e in errors] + [list(c.absolute_path) for e in errors for c in e.context]
        assert any(p[: len(where)] == where for p in paths), (what, paths)


def test_the_schema_key_is_ignored_by_the_engine(tmp_path):
    source = REPO / "harness_tools/tasks/reduce_sum"
    with_key = load_task(source)
    raw = json.loads((source / "task.json").read_text())
    raw.pop("$schema")
    for f in source.iterdir():
        if f.is_file():
            (tmp_path / f.name).write_bytes(f.read_bytes())
    (tmp_path / "task.json").write_text(json.dumps(raw))
    without = load_task(tmp_path)
    assert with_key.spec.model_dump_json() == without.spec.model_dump_json()  # digests and caches are unchanged
    assert with_key.spec.schema_file and without.spec.schema_file is None


def test_cudaopt_schema_task_prints_and_writes_it(tmp_path):
    out = subprocess.run([sys.executable, "-m", "cudaopt_mcp.cli", "schema", "task"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and json.loads(out.stdout) == task_schema()
    written = subprocess.run([sys.executable, "-m", "cudaopt_mcp.cli", "schema", "task", "--out",
                              str(tmp_path / "s.json")], capture_output=True, text=True, timeout=120)
    assert written.returncode == 0 and (tmp_path / "s.json").read_text() == schema_text()
    bad = subprocess.run([sys.executable, "-m", "cudaopt_mcp.cli", "schema", "task", "--out",
                          str(tmp_path / "no" / "such" / "s.json")], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "cudaopt: error:" in bad.stderr
