"""Optuna's TPE over a tunable space too large to list, through its ask/tell interface (the tuner's
:mod:`.tuner` uses it there). A module of its own so that Optuna, a fifth of a second of imports, loads only when
a space needs it.

Multivariate TPE models the parameters jointly: tile sizes interact (replayed on the H200's exhaustive sgemm
table it needed a median of 18.5 evaluations to come within 3 % of the best, against 33.5 for independent TPE;
benchmarks/tuner_replay.py). With ``constant_liar`` a point proposed ahead and still being evaluated counts as a
poor one, so the next ask does not land on it or next to it.
"""

from __future__ import annotations

import warnings

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.samplers import TPESampler
from optuna.trial import Trial, TrialState, create_trial

from harness_tools.task.tunable_space import Config, TunableSpace


class TpeStudy:
    """One minimising study over ``space``; TPE samples at random until ``startup`` trials have a score."""

    def __init__(self, space: TunableSpace, seed: int | None, startup: int):
        optuna.logging.set_verbosity(optuna.logging.WARNING)  # it logs every trial at INFO; stdout is the CLI's
        self.startup = startup
        self._space = space
        self._distributions = {n: CategoricalDistribution(vs) for n, vs in zip(space.names, space.values)}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # multivariate is experimental
            sampler = TPESampler(seed=seed, n_startup_trials=startup, multivariate=True, constant_liar=True)
        self._study = optuna.create_study(direction="minimize", sampler=sampler)

    def scored(self) -> int:
        return len(self._study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))

    def ask(self) -> tuple[Config | None, Trial]:
        """TPE's next point (None where it is not a point of the space) and its trial."""
        trial = self._study.ask(self._distributions)
        return self._space.key(trial.params), trial

    def ask_for(self, config: Config) -> Trial:
        """A trial with fixed parameters, so an exhaustive or random pick is told to the study like any other."""
        self._study.enqueue_trial(self._space.as_dict(config))
        return self._study.ask(self._distributions)

    def tell(self, trial: Trial, value: float | None) -> None:
        """The trial's score in ms, or None: failed (or never evaluated). TPE learns only from scored ones."""
        if value is None:
            self._study.tell(trial, state=TrialState.FAIL)
        else:
            self._study.tell(trial, value)

    def add(self, config: Config, value: float | None) -> None:
        """A point evaluated before this study (an earlier invocation of the run), with its score or None."""
        self._study.add_trial(create_trial(
            params=self._space.as_dict(config), distributions=self._distributions,
            value=value, state=TrialState.COMPLETE if value is not None else TrialState.FAIL))
