"""The loop chooses the next candidates while the current one is evaluated, not before it starts: the proposer's
time (a Gaussian process fit grows with the points scored) is then off a configuration's critical path."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import anyio
import pytest

from cudaopt_mcp.cli.local_server import LocalServer
from cudaopt_mcp.client.loop import optimise
from cudaopt_mcp.client.loop_models import LoopConfig
from cudaopt_mcp.client.proposal import ProposalContext, ProposerSettings
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


def test_the_next_candidate_is_chosen_while_the_current_one_is_evaluated(tmp_path):
    results = tmp_path / "results"
    local = LocalServer(results, backend="cpu", workers=None, ray=None)
    proposer = WatchingTuner(results / "run-001" / "history.jsonl")
    config = LoopConfig(task="sgemm", results=results, max_iterations=3, confirm=False, compile_ahead=True, ahead=1)

    async def run():
        async with local.session() as session:
            return await optimise(session, proposer, config, Terminal(io.StringIO(), quiet=True))

    try:
        summary = anyio.run(run)
    finally:
        local.close()
    assert summary.run_id == "run-001" and [a.iteration for a in summary.attempts] == [0, 1, 2, 3]
    assert all(a.correct for a in summary.attempts)
    assert proposer.seen == {2: True}
