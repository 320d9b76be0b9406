"""The built-in proposer: searches the task's own tunable kernel's parameters; no network, no model.

It only chooses points of the space; the loop evaluates them (``evaluate`` with ``tunables=``) and
reports back through :meth:`TunerProposer.observe`. The first point is the kernel's own defaults (its ``#ifndef``
values) when they are a valid, untried configuration: the author's choice is the best prior there is, and the run
then knows how the defaults score. When the valid configurations can be listed, a short random start (the
defaults count as one of it) and then a Gaussian process over them chooses (:mod:`.model_search`), warm-started
with the run's earlier attempts; when the untried ones fit in the remaining iterations they are all tried, the
model choosing the order.
A space too large to list is searched by Optuna's TPE sampler through its ask/tell interface; when it keeps asking
for tried or invalid points, a model of the scores so far ranks a sample of untried ones (:mod:`.surrogate`), so
every choice after the random start is informed by the scores. A configuration that breaks a constraint is never
proposed, and none twice.
:meth:`TunerProposer.propose_ahead` names the next point while the last is still evaluated (the loop's pipeline).
"""

from __future__ import annotations

import importlib.metadata
import math
import random
from typing import TYPE_CHECKING

from cudaopt_mcp.api import TaskSummary
from cudaopt_mcp.client.proposal import Attempt, NoProposal, Proposal, ProposalContext, ProposerSettings
from cudaopt_mcp.client.proposers.model_search import next_config
from cudaopt_mcp.client.proposers.surrogate import best_untried
from harness_tools.task.tunable_space import Config, TunableSpace

if TYPE_CHECKING:  # Optuna loads only for a space too large to list (.tpe_study)
    from optuna.trial import Trial

    from cudaopt_mcp.client.proposers.tpe_study import TpeStudy

# TPE samples at random until this many configurations have a score: a fifth of the budget, 3 to 10.
# Replayed on the H200's sgemm table, 3 instead of 10 random starts brought a 7-evaluation run from
# 1.19x to 1.14x the optimum on average (15 evaluations: 1.09x to 1.05x) and changed a 60-evaluation
# run little (median evaluations to within 3 %: 20 against 18.5).
MIN_STARTUP_TRIALS, MAX_STARTUP_TRIALS = 3, 10
MAX_ASKS = 32  # TPE asks per proposal before the fallback model (surrogate.py) ranks the untried ones instead
SAMPLE_ATTEMPTS = 20_000  # random draws per proposal in a space too large to list
RANKED_SAMPLE = 128  # untried valid configurations the fallback model ranks in a space too large to list
FALLBACK = "model: nearest scores, TPE kept asking for tried or invalid ones"
DEFAULTS = "the kernel's own defaults"


class TunerProposer:
    name = "tuner"
    reads_prompt = False  # scores are all it needs

    def __init__(self, settings: ProposerSettings):
        self._seed = settings.seed
        self._rng = random.Random(settings.seed)
        self._space: TunableSpace | None = None
        self._defaults: Config | None = None  # the kernel's own configuration, when it gives every tunable a value
        self._study: TpeStudy | None = None  # only for a space too large to list
        self._tried: set[Config] = set()
        self._scores: dict[Config, float | None] = {}  # ms of each evaluated configuration, None: failed
        self._seen: set[tuple[int, str | None, Config | None]] = set()  # attempts already taken into account
        self._early: list[Attempt] = []  # observed before the first propose, when the space is not known yet
        self._pending: dict[Config, Trial | None] = {}  # proposed, outcome not yet observed (TPE's trial, if any)
        self._other_attempts = 0

    # ---- the Proposer protocol ----------------------------------------------------------------------
    def describe(self) -> str:
        seed = f"seed {self._seed}" if self._seed is not None else "unseeded"
        line = (f"tuner: Gaussian process, expected improvement ({seed}; optuna {_optuna_version()} TPE where the "
                "space is too large to list), the kernel's own defaults first, exhaustive when the untried space "
                "fits the budget")
        if self._space is not None:
            valid = self._space.valid()
            line += (f"; {len(valid)} valid of {self._space.size} configurations" if valid is not None
                     else f"; {self._space.size:.3g} configurations, sampled")
        return line

    def task_problem(self, task: TaskSummary) -> str | None:
        if not task.tunables:
            return (f"task {task.name!r} declares no tunable parameters, so the tuner has nothing to search. Declare "
                    "them in its task.json under \"tunables\": a kernel source whose #defines they set and their "
                    "values, e.g. {\"source\": \"tuned.cu\", \"params\": {\"BLOCK\": [128, 256, 512]}, "
                    "\"launch\": {\"grid\": [\"ceil_div(n, BLOCK)\"], \"block\": [\"BLOCK\"]}} "
                    "(examples/vector_add/task.json is a small complete one; cudaopt schema task lists every field), "
                    "or let a model rewrite the kernel: --proposer llm (needs OPENAI_API_KEY)")
        space = TunableSpace(task.tunables, task.tunable_constraints)
        if space.size == 0:
            empty = [name for name, values in zip(space.names, space.values) if not values]
            return f"task {task.name!r}: tunable parameter(s) {', '.join(empty)} have no values to choose from"
        if space.valid() == []:
            return (f"task {task.name!r}: its tunables' constraints exclude every one of the {space.size} "
                    "configurations, so the tuner has nothing to try; loosen tunables.constraints")
        return None

    def propose(self, context: ProposalContext) -> Proposal | NoProposal:
        return self._propose(context, keep_pending=False)

    def propose_ahead(self, context: ProposalContext) -> Proposal | NoProposal:
        """The next point while the last one is still evaluated (TPE's constant liar counts it as a poor one)."""
        return self._propose(context, keep_pending=True)

    def _propose(self, context: ProposalContext, keep_pending: bool) -> Proposal | NoProposal:
        task = context.task
        if not task.tunables:
            return NoProposal(kind="exhausted", reason=f"task {task.name!r} has no tunable parameters, "
                                                       "so the tuner has nothing to search")
        if self._space is None:
            self._setup(task, context.max_iterations - context.iteration + 1)
        for attempt in [*context.attempts, *self._early]:
            self._record(attempt)
        self._early.clear()
        if not keep_pending:
            self._abandon_pending()
        space = self._space
        if space.size == 0:
            return NoProposal(kind="exhausted", reason="a tunable parameter has no values to choose from")
        remaining = context.max_iterations - context.iteration + 1
        valid = space.valid()
        if valid is None:
            return self._propose_sampled()
        untried = [c for c in valid if c not in self._tried]
        if not untried:
            return NoProposal(kind="exhausted", reason=self._exhausted_reason(len(valid)))
        if self._defaults_untried():
            return self._offer(self._defaults, None, f"exhaustive, {DEFAULTS} first" if len(untried) <= remaining
                               else DEFAULTS)
        if len(untried) == 1:
            return self._offer(untried[0], None, "exhaustive")
        config, strategy = next_config(space, self._scores, self._pending, untried, self._rng)
        if len(untried) <= remaining:
            # Every configuration will be tried; the model still picks the order, so a run cut short (time
            # budget) or read early has seen the promising ones first.
            strategy = f"exhaustive, in {strategy.split(',')[0]} order"
        return self._offer(config, None, strategy)

    def observe(self, attempt: Attempt) -> None:
        if self._space is None:
            self._early.append(attempt)
            return
        self._record(attempt)

    def close(self) -> None:
        """Nothing to release: the study lives in memory."""

    # ---- choosing -----------------------------------------------------------------------------------
    def _setup(self, task: TaskSummary, budget: int) -> None:
        self._space = TunableSpace(task.tunables or {}, task.tunable_constraints)
        if self._space.size == 0:
            return
        self._defaults = self._space.key(task.tunable_defaults) if task.tunable_defaults else None
        if self._space.valid() is None:
            from cudaopt_mcp.client.proposers.tpe_study import TpeStudy

            self._study = TpeStudy(self._space, self._seed,
                                   startup=max(MIN_STARTUP_TRIALS, min(MAX_STARTUP_TRIALS, budget // 5)))

    def _propose_sampled(self) -> Proposal | NoProposal:
        """A space too large to list: TPE, else the fallback model over a random sample of untried valid ones."""
        if self._defaults_untried():  # a fixed trial, so TPE learns from its score like any other
            return self._offer(self._defaults, self._study.ask_for(self._defaults), DEFAULTS)
        asked = self._ask()
        if asked is not None:
            return self._offer(*asked)
        drawn: list[Config] = []
        for _ in range(RANKED_SAMPLE):
            config = self._space.sample(self._rng, self._tried | set(drawn), SAMPLE_ATTEMPTS if not drawn else 200)
            if config is None:
                break
            drawn.append(config)
        if drawn:
            config = best_untried(self._space, self._scores, drawn)
            return self._offer(config, self._study.ask_for(config), FALLBACK)
        if not any(self._space.is_valid(c) for c in self._tried):
            return NoProposal(kind="exhausted", reason=(
                f"none of {SAMPLE_ATTEMPTS} random configurations of {self._space.size:.3g} satisfies the "
                f"constraints{self._problems()}"))
        return NoProposal(kind="unusable", reason=f"no untried valid configuration in {SAMPLE_ATTEMPTS} random draws "
                                                  f"({len(self._tried)} tried)")

    def _defaults_untried(self) -> bool:
        defaults = self._defaults
        return defaults is not None and defaults not in self._tried and self._space.is_valid(defaults)

    def _ask(self) -> tuple[Config, Trial, str] | None:
        assert self._study is not None and self._space is not None
        scored, startup = self._study.scored(), self._study.startup
        strategy = "TPE" if scored >= startup else f"TPE random start, {scored} of {startup} scored"
        for _ in range(MAX_ASKS):
            config, trial = self._study.ask()
            if config is not None and config not in self._tried and self._space.is_valid(config):
                return config, trial, strategy
            self._study.tell(trial, None)  # not evaluated: failed, which keeps the study consistent
        return None

    def _offer(self, config: Config, trial: Trial | None, strategy: str) -> Proposal:
        space = self._space
        self._tried.add(config)
        self._pending[config] = trial
        valid = space.valid()
        if valid is not None:
            valid_set = set(valid)
            count = f"{sum(c in valid_set for c in self._tried)} of {len(valid)} valid configurations"
        else:
            count = (f"{sum(space.is_valid(c) for c in self._tried)} tried of {space.size:.3g} configurations, "
                     "valid count unknown")
        note = f"tuner: {space.label(config)} ({strategy}, {count})"
        return Proposal(tunables=space.as_dict(config), note=note[:500])

    # ---- learning -----------------------------------------------------------------------------------
    def _record(self, attempt: Attempt) -> None:
        """Take an attempt into account once: its configuration is tried, and its score (if any) informs TPE."""
        tunables = attempt.proposal.tunables if attempt.proposal else None
        config = self._space.key(tunables) if tunables else None
        mark = (attempt.iteration, attempt.candidate_id, config)  # observe()d and listed in a later context
        if mark in self._seen:
            return
        self._seen.add(mark)
        if config is None:
            self._other_attempts += 1
            return
        self._tried.add(config)
        score = attempt.score_ms
        value = score if attempt.correct and score is not None and math.isfinite(score) else None
        self._scores[config] = value
        if config in self._pending:
            trial = self._pending.pop(config)
            if trial is not None:
                self._study.tell(trial, value)
        elif self._study is not None and self._space.contains(config):  # from before this proposer
            self._study.add(config, value)

    def _abandon_pending(self) -> None:
        """A proposal whose outcome never arrived counts as failed (and, being tried, is not offered again)."""
        for trial in self._pending.values():
            if trial is not None:
                self._study.tell(trial, None)
        self._pending.clear()

    def _exhausted_reason(self, n_valid: int) -> str:
        if n_valid == 0:
            return (f"none of the {self._space.size} configurations satisfies the tunable constraints"
                    f"{self._problems()}")
        return f"all {n_valid} valid configurations of the tunable space have been tried"

    def _problems(self) -> str:
        problems = self._space.describe_problems()
        return f" (constraints that could not be evaluated: {problems})" if problems else ""


def _optuna_version() -> str:
    try:
        return importlib.metadata.version("optuna")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"
