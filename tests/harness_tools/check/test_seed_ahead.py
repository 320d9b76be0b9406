"""Inputs and oracle made ahead for a seed are what the evaluation of a run's copy of the task then reads."""

from __future__ import annotations

import shutil

import numpy as np

from harness_tools.check.case_request import case_inputs
from harness_tools.check.reference import host_expected_outputs
from harness_tools.check.seed_ahead import draw_ahead
from harness_tools.evaluation import EvaluationConfig, evaluate
from harness_tools.task import candidate as candidates
from harness_tools.task.loading import load_task, resolve_task


def _run_copy(tmp_path, task):
    """The task as a run holds it: a copy of its folder, loaded from there."""
    shutil.copytree(task.folder, tmp_path / "task", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return load_task(tmp_path / "task")


def test_a_run_copy_reads_the_inputs_and_oracle_made_ahead_for_its_seed(tmp_path):
    task = resolve_task("softmax_rows")
    cases = task.spec.cases_for(task.spec.default_roles("cpu"), "cpu")
    made = draw_ahead(task, cases, 4242, "cpu")
    assert made == [c.name for c in cases]

    copy = _run_copy(tmp_path, task)
    for case in copy.spec.cases_for(copy.spec.default_roles("cpu"), "cpu"):
        original, original_files = case_inputs(task, case, 4242)
        inputs, files = case_inputs(copy, case, 4242)
        assert files == original_files and all(isinstance(a, np.memmap) for a in inputs.values())  # kept, not redrawn
        assert host_expected_outputs(copy, case, 4242, inputs) is host_expected_outputs(task, case, 4242, original)
    _, other_files = case_inputs(copy, cases[0], 4243)
    assert other_files != case_inputs(copy, cases[0], 4242)[1]  # another seed is another draw


def test_an_edited_copy_does_not_read_what_the_original_made(tmp_path):
    task = resolve_task("softmax_rows")
    cases = task.spec.cases_for(["validation"], "cpu")[:1]
    draw_ahead(task, cases, 99, "cpu")
    copy = _run_copy(tmp_path, task)
    reference = copy.folder / copy.spec.reference.file
    reference.write_text(reference.read_text() + "\n# edited\n")
    _, files = case_inputs(copy, cases[0], 99)
    assert files != case_inputs(task, cases[0], 99)[1]


def test_after_the_draw_ahead_the_baseline_passes_and_a_wrong_kernel_still_fails(tmp_path, cpu_backend):
    task = resolve_task("reduce_sum")
    draw_ahead(task, task.spec.cases_for(["validation"], "cpu"), 31, "cpu")
    copy = _run_copy(tmp_path, task)
    config = EvaluationConfig(seed=31, roles=["validation"], timeout_s=120)
    assert evaluate(copy, candidates.baseline(copy), cpu_backend, config).correct
    source = copy.read(copy.spec.baseline.source).replace("atomicAdd(out, s[0])", "atomicAdd(out, s[0] + 1.0f)")
    wrong = evaluate(copy, candidates.from_kernel_source(copy, copy.spec.baseline, source), cpu_backend, config)
    assert not wrong.correct and wrong.cases[0].status == "mismatch"
