"""The loop's side of the tuner's protocol, for tests: contexts from the real bundled tasks, a score function of the
parameters standing in for the GPU, one observe per evaluation; and the sgemm spaces and landscapes they use."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from pathlib import Path

from cudaopt_mcp.api import TaskSummary
from cudaopt_mcp.client.proposal import Attempt, NoProposal, Proposal, ProposalContext, ProposerSettings
from cudaopt_mcp.client.proposers import Proposer, create_proposer
from cudaopt_mcp.service.views import task_summary
from harness_tools.errors import ExpressionError
from harness_tools.task.expressions import evaluate_expression
from harness_tools.task.loading import resolve_task

NARROW = {"BM": [64, 256], "BN": [64, 128], "BK": [8, 32], "TM": [4, 8], "TN": [4, 8], "MINB": [1, 3],
          "WIDE_MIN": [-1]}  # 35 of 64 valid
ROOT = Path(__file__).resolve().parents[3]
OPTIMUM = {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8, "MINB": 1, "WIDE_MIN": 128}  # a valid sgemm configuration
DEFAULTS = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8, "MINB": 2, "WIDE_MIN": -1}  # sgemm's tuned.cu #ifndef values


def sgemm() -> TaskSummary:
    return task_summary(resolve_task("sgemm"), "run-test")


def bowl(tunables: dict[str, int]) -> float:
    """Milliseconds, lowest at OPTIMUM (1.0), growing with the log2 distance from it (and 1 for another WIDE_MIN)."""
    return (1.0 + sum(math.log2(tunables[k] / OPTIMUM[k]) ** 2 for k in OPTIMUM if k != "WIDE_MIN")
            + (tunables["WIDE_MIN"] != OPTIMUM["WIDE_MIN"]))


def satisfies(tunables: dict[str, int], task: TaskSummary) -> bool:
    """Checked independently of the tuner: in the value lists, and every constraint evaluates to true."""
    if set(tunables) != set(task.tunables) or any(v not in task.tunables[k] for k, v in tunables.items()):
        return False
    try:
        return all(bool(evaluate_expression(c, tunables)) for c in task.tunable_constraints)
    except ExpressionError:
        return False


def all_valid(task: TaskSummary) -> set[tuple[int, ...]]:
    names = list(task.tunables)
    return {combo for combo in itertools.product(*(task.tunables[n] for n in names))
            if satisfies(dict(zip(names, combo)), task)}


def key(tunables: dict[str, int]) -> tuple[int, ...]:
    return tuple(sorted(tunables.items()))


def baseline() -> Attempt:
    return Attempt(iteration=0, candidate_id="c0000", status="correct", correct=True, score_ms=50.0)


class Loop:
    """The loop's side of the protocol: contexts with every attempt so far, one observe per evaluation."""

    def __init__(self, task: TaskSummary, max_iterations: int, score: Callable[[dict[str, int]], Attempt | float],
                 prior: list[Attempt] | None = None):
        self.task, self.max_iterations, self.score = task, max_iterations, score
        self.attempts = [baseline(), *(prior or [])]
        self.proposals: list[Proposal] = []

    def context(self) -> ProposalContext:
        iteration = self.attempts[-1].iteration + 1
        return ProposalContext(run_id="run-test", backend="cpu", task=self.task, iteration=iteration,
                               max_iterations=self.max_iterations, attempts=list(self.attempts),
                               baseline=self.attempts[0])

    def step(self, proposer: Proposer) -> Proposal | NoProposal:
        context = self.context()
        answer = proposer.propose(context)
        if isinstance(answer, NoProposal):
            return answer
        outcome = self.score(answer.tunables)
        attempt = outcome if isinstance(outcome, Attempt) else Attempt(
            iteration=context.iteration, status="correct", correct=True, score_ms=outcome)
        attempt = attempt.model_copy(update={"iteration": context.iteration, "proposal": answer,
                                             "candidate_id": f"c{context.iteration:04d}"})
        proposer.observe(attempt)
        self.attempts.append(attempt)
        self.proposals.append(answer)
        return answer

    def run(self, proposer: Proposer, iterations: int) -> NoProposal | None:
        for _ in range(iterations):
            answer = self.step(proposer)
            if isinstance(answer, NoProposal):
                return answer
        return None


def tuner(seed: int | None = 0) -> Proposer:
    proposer = create_proposer("tuner", ProposerSettings(seed=seed))
    assert isinstance(proposer, Proposer) and proposer.name == "tuner"
    return proposer


def failed(tunables: dict[str, int]) -> Attempt:
    return Attempt(iteration=0, status="error", correct=False, failure="too many resources requested for launch")
