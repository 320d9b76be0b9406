"""The tuner proposer, driven the way the loop drives it: propose, evaluate (here a synthetic score), observe.

Contexts come from the real bundled tasks; a score function of the parameters stands in for the GPU.
"""

from __future__ import annotations

import pytest

from cudaopt_mcp.client.proposal import Attempt, NoProposal, Proposal
from tests.cudaopt_mcp.client.tuner_loop import (
    DEFAULTS,
    NARROW,
    OPTIMUM,
    Loop,
    all_valid,
    baseline,
    bowl,
    failed,
    key,
    satisfies,
    sgemm,
    tuner,
)


def test_sixty_tpe_iterations_are_valid_and_never_repeat():
    task, proposer = sgemm(), tuner()
    loop = Loop(task, max_iterations=60, score=bowl)
    assert loop.run(proposer, 60) is None
    assert len(loop.proposals) == 60
    assert all(satisfies(p.tunables, task) for p in loop.proposals)
    assert len({key(p.tunables) for p in loop.proposals}) == 60
    # 203 valid configurations do not fit in 60 iterations, so this is the model-based search: after the kernel's
    # defaults and four scored random ones the Gaussian process chooses every point, to the end of the budget.
    assert all(p.note.startswith("tuner: BM=") for p in loop.proposals)
    assert loop.proposals[0].tunables == DEFAULTS and "(the kernel's own defaults," in loop.proposals[0].note
    assert all("(random start" in p.note for p in loop.proposals[1:5])
    assert all("(GP expected improvement" in p.note for p in loop.proposals[5:])
    assert "of 203 valid configurations" in loop.proposals[-1].note
    assert "exhaustive" not in " ".join(p.note for p in loop.proposals)
    assert "203 valid of 1296 configurations" in proposer.describe()


def test_the_first_proposal_is_the_kernels_own_defaults():
    task = sgemm()
    assert task.tunable_defaults == DEFAULTS  # read from tuned.cu by the task summary
    for seed in (0, 1, None):
        first = Loop(task, max_iterations=60, score=bowl).step(tuner(seed))
        assert first.tunables == DEFAULTS and "(the kernel's own defaults, 1 of 203 valid" in first.note


@pytest.mark.parametrize("update", [
    {"tunable_constraints": ["MINB != 2"]},  # the defaults break a constraint
    {"tunables": NARROW},  # BM=128 is not one of the values
    {"tunable_defaults": {k: v for k, v in DEFAULTS.items() if k != "MINB"}},  # the kernel gives MINB no default
    {"tunable_defaults": None},
])
def test_defaults_that_are_not_a_valid_configuration_are_not_proposed(update):
    task = sgemm().model_copy(update=update)
    loop = Loop(task, max_iterations=60, score=bowl)
    loop.run(tuner(), 10)
    assert all(satisfies(p.tunables, task) for p in loop.proposals)
    assert DEFAULTS not in [p.tunables for p in loop.proposals]
    assert "defaults" not in " ".join(p.note for p in loop.proposals)


def test_a_continued_run_that_tried_the_defaults_does_not_propose_them_again():
    task = sgemm()
    earlier = Loop(task, max_iterations=3, score=bowl)
    earlier.run(tuner(seed=2), 3)
    assert earlier.proposals[0].tunables == DEFAULTS
    loop = Loop(task, max_iterations=30, score=bowl, prior=earlier.attempts[1:])  # a new proposer continues it
    loop.run(tuner(seed=2), 27)
    assert DEFAULTS not in [p.tunables for p in loop.proposals]
    assert "defaults" not in " ".join(p.note for p in loop.proposals)


def test_the_defaults_come_first_in_exhaustive_mode_and_in_a_space_too_large_to_list():
    loop = Loop(sgemm(), max_iterations=250, score=bowl)
    assert loop.step(tuner()).note.startswith("tuner: BM=128 BN=128 BK=8 TM=8 TN=8 MINB=2 WIDE_MIN=-1 (exhaustive, "
                                              "the kernel's own defaults first")
    params = {name: list(range(1, 11)) for name in "ABCDEFG"}  # 10**7 configurations: TPE
    defaults = dict.fromkeys("ABCDEFG", 2)
    task = sgemm().model_copy(update={"tunables": params, "tunable_constraints": ["A + B + C <= 12"],
                                      "tunable_defaults": defaults})
    loop = Loop(task, max_iterations=20, score=lambda t: float(sum(t.values())))
    assert loop.run(tuner(), 20) is None
    assert loop.proposals[0].tunables == defaults and "(the kernel's own defaults," in loop.proposals[0].note
    assert defaults not in [p.tunables for p in loop.proposals[1:]]
    assert all(satisfies(p.tunables, task) for p in loop.proposals)


def test_the_whole_sgemm_space_is_covered_exhaustively_when_it_fits_the_budget():
    task, proposer = sgemm(), tuner()
    loop = Loop(task, max_iterations=250, score=bowl)
    stop = loop.run(proposer, 250)
    assert isinstance(stop, NoProposal) and stop.kind == "exhausted" and "203" in stop.reason
    names = list(task.tunables)
    assert len(loop.proposals) == 203
    assert {tuple(p.tunables[n] for n in names) for p in loop.proposals} == all_valid(task)
    assert all("exhaustive" in p.note for p in loop.proposals)
    assert loop.proposals[-1].note.endswith("(exhaustive, 203 of 203 valid configurations)")


def test_a_narrowed_space_is_exhaustive_then_exhausted():
    task = sgemm().model_copy(update={"tunables": NARROW})
    valid = all_valid(task)
    assert len(valid) == 35
    loop = Loop(task, max_iterations=50, score=bowl)
    stop = loop.run(tuner(), 50)
    assert isinstance(stop, NoProposal) and stop.kind == "exhausted"
    assert {tuple(p.tunables[n] for n in NARROW) for p in loop.proposals} == valid
    assert len(loop.proposals) == len(valid)


def test_exhaustive_mode_covers_the_space_once_with_the_model_choosing_the_order():
    task = sgemm().model_copy(update={"tunables": NARROW})
    runs = []
    for seed in (1, 2):
        loop = Loop(task, max_iterations=50, score=bowl)
        loop.run(tuner(seed), 50)
        runs.append([tuple(sorted(p.tunables.items())) for p in loop.proposals])
    assert sorted(runs[0]) == sorted(runs[1]) and len(set(runs[0])) == len(runs[0])  # the same space, each once
    assert all("exhaustive" in p.note for p in loop.proposals)


def test_warm_start_never_reproposes_earlier_attempts():
    task = sgemm()
    earlier = Loop(task, max_iterations=25, score=lambda t: failed(t) if t["TM"] == 2 else bowl(t))
    earlier.run(tuner(seed=7), 25)
    prior = earlier.attempts[1:]
    tried_before = {key(a.proposal.tunables) for a in prior}
    assert len(tried_before) == 25

    loop = Loop(task, max_iterations=85, score=bowl, prior=prior)  # the run continues with a new proposer
    assert loop.run(tuner(seed=7), 60) is None
    proposed = [key(p.tunables) for p in loop.proposals]
    assert len(proposed) == 60 == len(set(proposed))
    assert not tried_before & set(proposed)
    assert "26 of 203 valid configurations" in loop.proposals[0].note  # the 25 earlier ones count as tried


def test_failed_configurations_are_recorded_and_not_retried():
    # Register tiles of 8x8 "fail to launch", and the bowl's optimum is one of them: TPE is drawn there.
    task = sgemm()
    loop = Loop(task, max_iterations=100, score=lambda t: failed(t) if t["TM"] * t["TN"] == 64 else bowl(t))
    assert loop.run(tuner(), 100) is None
    proposed = [key(p.tunables) for p in loop.proposals]
    assert len(proposed) == len(set(proposed)) == 100
    failures = [p for p in loop.proposals if p.tunables["TM"] * p.tunables["TN"] == 64]
    assert failures and len({key(p.tunables) for p in failures}) == len(failures)


def test_an_incorrect_result_is_not_retried_in_exhaustive_mode():
    task = sgemm().model_copy(update={"tunables": {"BM": [64], "BN": [64], "BK": [8, 16], "TM": [4], "TN": [4, 8]}})
    incorrect = Attempt(iteration=0, status="incorrect", correct=False, score_ms=None, failure="max |err| 3.1")
    loop = Loop(task, max_iterations=20, score=lambda t: incorrect)
    stop = loop.run(tuner(), 20)
    assert isinstance(stop, NoProposal) and stop.kind == "exhausted"
    assert len(loop.proposals) == len({key(p.tunables) for p in loop.proposals}) == len(all_valid(task))


def test_a_task_without_tunables_is_exhausted_at_once():
    task = sgemm().model_copy(update={"tunables": None, "tunable_constraints": []})
    answer = tuner().propose(Loop(task, max_iterations=10, score=bowl).context())
    assert isinstance(answer, NoProposal) and answer.kind == "exhausted"
    assert "no tunable parameters" in answer.reason


def test_a_constraint_that_fails_to_evaluate_rejects_the_configuration():
    task = sgemm().model_copy(update={"tunables": {"A": [0, 1, 2, 3]}, "tunable_constraints": ["6 // A > 2"]})
    loop = Loop(task, max_iterations=10, score=lambda t: float(t["A"]))
    stop = loop.run(tuner(), 10)
    assert sorted(p.tunables["A"] for p in loop.proposals) == [1, 2]  # A=0 divides by zero; 6 // 3 is 2
    assert isinstance(stop, NoProposal) and stop.kind == "exhausted"


def test_unsatisfiable_constraints_are_exhausted_with_the_reason():
    task = sgemm().model_copy(update={"tunable_constraints": ["BM <= WARP"]})
    answer = tuner().propose(Loop(task, max_iterations=10, score=bowl).context())
    assert isinstance(answer, NoProposal) and answer.kind == "exhausted"
    assert "none of the 1296 configurations" in answer.reason and "WARP" in answer.reason


def test_a_space_too_large_to_list_is_sampled_within_the_constraints():
    params = {name: list(range(1, 11)) for name in "ABCDEFG"}  # 10**7 configurations
    task = sgemm().model_copy(update={"tunables": params, "tunable_constraints": ["A + B + C <= 12", "D % 2 == 0"]})
    loop = Loop(task, max_iterations=40, score=lambda t: float(sum(t.values())))
    assert loop.run(tuner(), 40) is None
    assert all(satisfies(p.tunables, task) for p in loop.proposals)
    assert len({key(p.tunables) for p in loop.proposals}) == 40
    assert "valid count unknown" in loop.proposals[-1].note


def test_an_unsatisfiable_space_too_large_to_list_is_exhausted():
    params = {name: list(range(1, 11)) for name in "ABCDEFG"}
    task = sgemm().model_copy(update={"tunables": params, "tunable_constraints": ["A > 10"]})
    answer = tuner().propose(Loop(task, max_iterations=10, score=bowl).context())
    assert isinstance(answer, NoProposal) and answer.kind == "exhausted"


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_the_seeded_model_finds_the_synthetic_optimum_well_before_random_search_would(seed):
    # Random search finds one configuration of 203 within 20 draws with probability 20/203 (10%); the Gaussian
    # process found it within 9-17 iterations for each of seeds 0-7 when this test was written (TPE: 12-34).
    loop = Loop(sgemm(), max_iterations=40, score=bowl)
    proposer = tuner(seed)
    for _ in range(20):
        if loop.step(proposer).tunables == OPTIMUM:
            break
    assert loop.proposals[-1].tunables == OPTIMUM, f"not found in 20 iterations with seed {seed}"


def test_a_failed_configuration_is_told_to_the_model_and_it_steers_away():
    """Failures count as the worst score: with every TM=8 point failing, the model proposes fewer of them."""
    task = sgemm()
    late = 0
    for seed in range(4):
        loop = Loop(task, max_iterations=60, score=lambda t: failed(t) if t["TM"] == 8 else bowl(t))
        assert loop.run(tuner(seed=seed), 60) is None
        late += [p.tunables["TM"] for p in loop.proposals[30:]].count(8)
    # Half of the 203 valid configurations have TM=8, so uniform picks would make about 60 of the last 4 x 30. When
    # this test was written the model made 46 (13, 10, 13, 10 per seed), and 56 with its failures left out of the
    # data; before the nearest configurations reaching tied values (model_search.nearest_reaching) it made 39.
    assert late <= 50


def test_the_same_seed_proposes_the_same_sequence():
    runs = []
    for _ in range(2):
        loop = Loop(sgemm(), max_iterations=30, score=bowl)
        loop.run(tuner(seed=11), 30)
        runs.append([p.tunables for p in loop.proposals])
    assert runs[0] == runs[1]


def test_observations_before_the_first_proposal_are_kept():
    task = sgemm()
    first = {"BM": 64, "BN": 64, "BK": 8, "TM": 4, "TN": 4, "MINB": 1, "WIDE_MIN": -1}
    proposer = tuner()
    proposer.observe(baseline())
    early = Attempt(iteration=1, candidate_id="c0001", proposal=Proposal(tunables=first), status="correct",
                    correct=True, score_ms=bowl(first))
    proposer.observe(early)
    loop = Loop(task, max_iterations=250, score=bowl, prior=[early])  # the context lists it as well: taken once
    stop = loop.run(proposer, 250)
    assert first not in [p.tunables for p in loop.proposals]
    assert len(loop.proposals) == 202 and isinstance(stop, NoProposal)


def test_optuna_prints_nothing_and_describe_is_one_line(capfd):
    proposer = tuner()
    assert proposer.describe().startswith("tuner: Gaussian process") and "\n" not in proposer.describe()
    Loop(sgemm(), max_iterations=30, score=lambda t: failed(t) if t["BK"] == 32 else bowl(t)).run(proposer, 30)
    proposer.close()
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert "\n" not in proposer.describe()


def test_proposing_ahead_keeps_the_pending_point_and_still_never_repeats():
    """The loop's pipeline: the next point is asked for before the current one's score is observed."""
    task, proposer = sgemm(), tuner(seed=3)
    loop = Loop(task, max_iterations=40, score=bowl)
    context = loop.context()
    current = proposer.propose(context)
    for _ in range(39):
        ahead_context = context.model_copy(update={"iteration": context.iteration + 1})
        ahead = proposer.propose_ahead(ahead_context)  # `current` is still pending
        assert isinstance(ahead, Proposal) and key(ahead.tunables) != key(current.tunables)
        attempt = Attempt(iteration=context.iteration, status="correct", correct=True, score_ms=bowl(current.tunables),
                          proposal=current, candidate_id=f"c{context.iteration:04d}")
        proposer.observe(attempt)
        loop.attempts.append(attempt)
        loop.proposals.append(current)
        context, current = loop.context(), ahead
    assert len({key(p.tunables) for p in loop.proposals}) == 39 and all(satisfies(p.tunables, task) for p in loop.proposals)
    strategies = [p.note.split("(")[1].split(",")[0] for p in loop.proposals]
    # 5 scored random starts, one more asked while the fifth was in flight; then the model chooses, the pending
    # point counted as the worst score so far
    assert strategies.count("random start") <= 6
    assert set(strategies[6:]) == {"GP expected improvement"}, strategies
    assert min(bowl(p.tunables) for p in loop.proposals) < 2.5  # and still closes in on the optimum (1.0)
