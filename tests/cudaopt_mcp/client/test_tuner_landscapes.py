"""The tuner on measured landscapes (the H200's sgemm table in benchmarks/tables) and across its space's constraints:
the moves a one-parameter search cannot make."""

from __future__ import annotations

import gzip
import json

from cudaopt_mcp.client.proposers.model_search import nearest_reaching
from harness_tools.task.tunable_space import TunableSpace
from tests.cudaopt_mcp.client.tuner_loop import DEFAULTS, ROOT, Loop, key, satisfies, sgemm, tuner


def test_on_a_measured_landscape_the_tuner_makes_the_moves_one_parameter_at_a_time_cannot():
    """The H200's sgemm table (benchmarks/tables), one shape's median as the objective: from where one-parameter
    moves lead (MINB=2, WIDE_MIN=-1), the best tile needs MINB and WIDE_MIN changed together. Mixing the best
    configurations' values reached within 3 % of the best within 40 evaluations in 8 of seeds 0-11 when this test
    was written; the best's neighbours alone, in 3."""
    document = json.loads(gzip.decompress((ROOT / "benchmarks" / "tables" / "table_sgemm.json.gz").read_bytes()))
    medians = {key(p["tunables"]): p["case_medians_ms"]["perf_8192x2048x1024"] for p in document["points"]}
    target = 1.03 * min(medians.values())
    reached = 0
    for seed in range(12):
        loop = Loop(sgemm(), max_iterations=40, score=lambda t: medians[key(t)])
        loop.run(tuner(seed), 40)
        reached += min(medians[key(p.tunables)] for p in loop.proposals) <= target
    assert reached >= 7, f"within 3 % of the best in {reached} of 12 seeds"




def test_a_value_its_constraints_tie_to_others_is_reached_with_the_fewest_other_changes():
    """sgemm's WIDE_MIN other than -1 needs MINB 1 (and TN 8): from a best with MINB 2 no one-parameter change reaches
    it, so the nearest untried configurations that have it are offered instead, each one change more."""
    task = sgemm()
    space = TunableSpace(task.tunables, task.tunable_constraints)
    best = space.key(DEFAULTS)
    untried = [c for c in space.valid() if c != best]
    reached = [space.as_dict(c) for c in nearest_reaching(space, best, untried)]
    wide = [t for t in reached if t["WIDE_MIN"] != -1]
    assert {t["WIDE_MIN"] for t in wide} == {0, 128}
    for t in reached:
        assert satisfies(t, task)
        assert sum(t[k] != DEFAULTS[k] for k in DEFAULTS) >= 2  # none is a one-parameter change
    assert all(t["MINB"] == 1 and sum(t[k] != DEFAULTS[k] for k in DEFAULTS) == 2 for t in wide)
    assert nearest_reaching(space, best, []) == []




def test_on_single_sgemm_shapes_every_seed_gets_within_3_percent_in_60_evaluations():
    """The H200's sgemm table, two shapes whose best needs WIDE_MIN 0 (a value a constraint ties to MINB 1). With the
    nearest configurations that reach such values, all of seeds 0-17 got within 3 % of the best within 60
    evaluations on both shapes when this test was written; without them 31 of the 36 runs (seeds 3, 4, 13, 14 and 17
    did not)."""
    document = json.loads(gzip.decompress((ROOT / "benchmarks" / "tables" / "table_sgemm.json.gz").read_bytes()))
    missed = []
    for shape in ("perf_1024x8192x4096", "perf_8192x2048x1024"):
        medians = {key(p["tunables"]): p["case_medians_ms"][shape] for p in document["points"]}
        target = 1.03 * min(medians.values())
        for seed in range(18):
            loop = Loop(sgemm(), max_iterations=60, score=lambda t, medians=medians: medians[key(t)])
            loop.run(tuner(seed), 60)
            if min(medians[key(p.tunables)] for p in loop.proposals) > target:
                missed.append((shape, seed))
    assert not missed, f"not within 3 % in 60 evaluations: {missed}"
