"""The loop chooses the next candidates while the current one is evaluated, not before it starts: the proposer's
time (a Gaussian process fit grows with the points scored) is then off a configuration's critical path; and of
those chosen ahead, the first compiled is evaluated first, so a slow compile holds back none of the others."""

from __future__ import annotations

import io
import json
import secrets
import time
from pathlib import Path

import anyio
import pytest

from cudaopt_mcp.cli.local_server import LocalServer
from cudaopt_mcp.client.loop import optimise
from cudaopt_mcp.client.loop_models import LoopConfig, LoopSummary
from cudaopt_mcp.client.proposal import NoProposal, Proposal, ProposalContext, ProposerSettings
from cudaopt_mcp.client.proposers.tuner import TunerProposer
from cudaopt_mcp.client.terminal import Terminal
from harness_tools.backends.cuda.backend import gpu_present

pytestmark = pytest.mark.skipif(gpu_present(), reason="sized for the cpu backend")
WAIT_S = 60.0  # how long a proposal waits to see the evaluation before it under way


class WatchingTuner(TunerProposer):
    """The real tuner, which before choosing ahead looks whether the evaluation of the iteration before has begun:
    the server registers its candidate first (a ``candidate`` event in the run's history)."""

    def __init__(self, history: Path):
        super().__init__(ProposerSettings(seed=1))
        self.history = history
        self.seen: dict[int, bool] = {}

    def propose_ahead(self, context: ProposalContext):
        if context.iteration == 2:  # iteration 1 was proposed plainly, so its evaluation registers its candidate
            self.seen[2] = _waited_for(lambda: _registered(self.history) >= 2)  # the baseline's and iteration 1's
        return super().propose_ahead(context)


def _registered(history: Path) -> int:
    if not history.is_file():
        return 0
    return sum(json.loads(line).get("event") == "candidate" for line in history.read_text().splitlines() if line)


def _waited_for(condition) -> bool:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def _optimise_on_cpu(results: Path, proposer, task: str, ahead: int) -> LoopSummary:
    """Three iterations of the loop on the cpu backend, compiles made ahead, through the in-process server."""
    local = LocalServer(results, backend="cpu", workers=None, ray=None)
    config = LoopConfig(task=task, results=results, max_iterations=3, confirm=False, compile_ahead=True, ahead=ahead)

    async def run():
        async with local.session() as session:
            return await optimise(session, proposer, config, Terminal(io.StringIO(), quiet=True))

    try:
        return anyio.run(run)
    finally:
        local.close()


def test_the_next_candidate_is_chosen_while_the_current_one_is_evaluated(tmp_path):
    results = tmp_path / "results"
    proposer = WatchingTuner(results / "run-001" / "history.jsonl")
    summary = _optimise_on_cpu(results, proposer, "sgemm", ahead=1)
    assert summary.run_id == "run-001" and [a.iteration for a in summary.attempts] == [0, 1, 2, 3]
    assert all(a.correct for a in summary.attempts)
    assert proposer.seen == {2: True}


def _slow_to_compile(task_source: str) -> str:
    """The task's baseline with a block NVRTC takes seconds over (16384 dependent statements that never run, a nonce
    so that no compile cache has them); the cpu backend's g++, which builds it when it is evaluated, never sees it."""
    lines = ["#define JS0 a = a * b + 1.0f; b = b * a - a;"] + [f"#define JS{k} JS{k - 1} JS{k - 1}" for k in range(1, 15)]
    slow = f"    if (rows == -{secrets.randbelow(10**6) + 1}) {{ float a = in[c], b = in[r]; JS14 out[0] = a + b; }}"
    head, tail = task_source.split("    if (r < rows", 1)
    return "\n".join([*lines, head + "#ifndef CUDAOPT_CPU_H", slow, "#endif", "    if (r < rows" + tail])


def _transpose_baseline() -> str:
    return (Path(__file__).parents[3] / "harness_tools" / "tasks" / "transpose" / "baseline.cu").read_text()


class SlowFirstTuner(TunerProposer):
    """The real tuner, whose first candidate chosen ahead is a copy of the baseline that compiles slowly."""

    def __init__(self, baseline_source: str):
        super().__init__(ProposerSettings(seed=1))
        self.slow = Proposal(source=_slow_to_compile(baseline_source), note="slow to compile")

    def propose_ahead(self, context: ProposalContext):
        return self.slow if context.iteration == 2 else super().propose_ahead(context)


def test_a_candidate_compiled_ahead_is_evaluated_before_an_earlier_one_still_compiling(tmp_path):
    summary = _optimise_on_cpu(tmp_path / "results", SlowFirstTuner(_transpose_baseline()), "transpose", ahead=2)
    assert [a.iteration for a in summary.attempts] == [0, 1, 2, 3]
    assert all(a.correct for a in summary.attempts), [(a.status, a.failure) for a in summary.attempts]
    notes = [a.proposal.note if a.proposal else None for a in summary.attempts]
    assert notes[2].startswith("tuner") and notes[3] == "slow to compile", notes  # chosen for 2, evaluated as 3


class SlowThenNothingTuner(SlowFirstTuner):
    """The slow candidate, then nothing new: the loop must still evaluate the slow one before it stops."""

    def propose_ahead(self, context: ProposalContext):
        if context.iteration == 3:
            return NoProposal(kind="exhausted", reason="every configuration tried")
        return super().propose_ahead(context)


def test_a_proposer_with_nothing_new_ahead_does_not_stop_the_loop_before_a_candidate_still_compiling(tmp_path):
    summary = _optimise_on_cpu(tmp_path / "results", SlowThenNothingTuner(_transpose_baseline()), "transpose", ahead=2)
    assert [a.proposal.note if a.proposal else None for a in summary.attempts][2:] == ["slow to compile"]
    assert summary.stopped.startswith("the proposer has nothing new"), summary.stopped


def test_the_first_candidates_are_chosen_and_sent_to_compile_while_the_baseline_is_evaluated(tmp_path):
    results = tmp_path / "results"
    summary = _optimise_on_cpu(results, TunerProposer(ProposerSettings(seed=1)), "transpose", ahead=2)
    events = [json.loads(line) for line in (results / summary.run_id / "history.jsonl").read_text().splitlines()]
    order = [(e["event"], e.get("candidate_id")) for e in events if e["event"] in ("candidate", "evaluate")]
    baseline_done = order.index(("evaluate", "c0001"))
    assert ("candidate", "c0002") in order[:baseline_done] and ("candidate", "c0003") in order[:baseline_done], order
    assert [a.iteration for a in summary.attempts] == [0, 1, 2, 3] and all(a.correct for a in summary.attempts)
