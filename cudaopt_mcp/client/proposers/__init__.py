"""The proposer seam: a small Protocol and a registry of implementations loaded lazily by name.

A proposer never executes anything: it reads a :class:`ProposalContext` and returns a candidate
(:class:`Proposal`) or says why it has none (:class:`NoProposal`). ``propose`` must not raise for
expected trouble (an unparsable model reply, a rate limit that outlasts the retries): that is a
``NoProposal(kind="unusable")`` with the reason, which costs the loop one iteration. Exceptions are bugs
or broken setups (a missing extra), and end the loop with the message.
"""

from __future__ import annotations

import importlib
import os
from typing import Protocol, runtime_checkable

from pydantic import BaseModel

from cudaopt_mcp.api import TaskSummary
from cudaopt_mcp.client.proposal import Attempt, NoProposal, Proposal, ProposalContext, ProposerSettings
from cudaopt_mcp.errors import ProposerUnavailable


@runtime_checkable
class Proposer(Protocol):
    name: str
    reads_prompt: bool  # whether propose() uses context.prompt (the loop renders it only then)

    def describe(self) -> str:
        """One line for the terminal: what this proposer is (model and endpoint, search strategy)."""
        ...

    def propose(self, context: ProposalContext) -> Proposal | NoProposal:
        """The next candidate to evaluate, or why there is none."""
        ...

    def observe(self, attempt: Attempt) -> None:
        """The outcome of the loop's latest evaluation (of this proposer's proposal, or the baseline)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class ReportsUsage(Protocol):
    """A proposer that spends something countable (an LLM: requests, tokens, cost): the loop's summary says how much."""

    def usage(self) -> BaseModel:
        """What was spent so far (a copy)."""
        ...


@runtime_checkable
class ProposesAhead(Protocol):
    """A proposer that can name its next candidate before the current one's outcome is known (the tuner: its model
    treats the pending point as a poor one meanwhile). The loop then compiles that candidate while the current one
    is evaluated, so the GPU waits for no compile."""

    def propose_ahead(self, context: ProposalContext) -> Proposal | NoProposal:
        """Like propose(), with the previous proposal still pending (its outcome comes through observe later)."""
        ...


@runtime_checkable
class NeedsTaskParts(Protocol):
    """A proposer that cannot work on every task (the tuner needs tunables): the loop asks before any work is done."""

    def task_problem(self, task: TaskSummary) -> str | None:
        """Why this proposer has nothing to do on ``task``, with what to do instead; None when it can work."""
        ...


_REGISTRY: dict[str, str] = {
    "tuner": "cudaopt_mcp.client.proposers.tuner:TunerProposer",
    "llm": "cudaopt_mcp.client.proposers.llm:LLMProposer",
}


def register(name: str, target: str) -> None:
    """Add a proposer: ``target`` is 'module:Class', a class taking (settings: ProposerSettings)."""
    _REGISTRY[name] = target


def proposer_names() -> list[str]:
    return sorted(_REGISTRY)


def choose(name: str) -> tuple[str, str]:
    """(proposer name, why): 'auto' picks llm when an API key is configured, else the tuner."""
    if name != "auto":
        return name, "asked for"
    if os.environ.get("OPENAI_API_KEY"):
        return "llm", "OPENAI_API_KEY is set"
    return "tuner", "no OPENAI_API_KEY in the environment"


def create_proposer(name: str, settings: ProposerSettings) -> Proposer:
    if name not in _REGISTRY:
        raise ProposerUnavailable(f"unknown proposer {name!r}; known: {', '.join(proposer_names())}")
    module_name, class_name = _REGISTRY[name].split(":")
    module = importlib.import_module(module_name)
    return getattr(module, class_name)(settings)


__all__ = ["Attempt", "NoProposal", "Proposal", "ProposalContext", "Proposer", "ProposerSettings",
           "ProposerUnavailable", "choose", "create_proposer", "proposer_names", "register"]
