"""Every case's compile of a task with per-case size defines, submitted at once (real NVRTC, no GPU needed)."""

from __future__ import annotations

from pathlib import Path

from harness_tools.compile import compile_candidate
from harness_tools.compile.case_variants import case_variants, compile_variants
from harness_tools.task import candidate as candidates
from harness_tools.task.loading import resolve_task
from harness_tools.task.tunable_space import TunableSpace

CONVOLUTION = Path(__file__).resolve().parents[3] / "examples" / "convolution"


def _candidate():
    task = resolve_task(CONVOLUTION)
    tun = task.spec.tunables
    space = TunableSpace(tun.params, tun.constraints)
    return task, candidates.tuned(task, space.as_dict(space.valid()[7]))


def test_one_compile_per_distinct_case_and_each_case_then_finds_its_cubin():
    task, cand = _candidate()
    cases = task.spec.cases_for(["validation", "performance"], "cuda")
    variants = case_variants(cand, task, cases)
    assert len(variants) == len({tuple(sorted(candidates.for_case(cand, task, c.sizes).defines.items())) for c in cases})
    results = compile_variants(cand, task, cases, "sm_90")
    assert len(results) == len(variants) > 1 and all(r.ok for r in results), [r.log for r in results]
    for case in cases:  # what the evaluation compiles per case: already there
        again = compile_candidate(candidates.for_case(cand, task, case.sizes), "sm_90")
        assert again.ok and again.cached


def test_a_candidate_that_sets_a_size_define_itself_has_no_variants():
    task, cand = _candidate()
    clash = cand.model_copy(update={"defines": {**cand.defines, "image_width": "4"}})
    assert case_variants(clash, task, task.spec.cases) == []
    assert compile_variants(clash, task, task.spec.cases, "sm_90") == []


def test_a_task_without_size_defines_has_one_compile():
    task = resolve_task("sgemm")
    base = candidates.baseline(task)
    assert case_variants(base, task, task.spec.cases) == [base]
