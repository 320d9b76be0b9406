"""A task's tunable space: the value lists, the constraints, and which configurations satisfy them.

A configuration is a tuple of values in the order of the task's parameter names (hashable, so the
tuner can remember what it tried). Constraints are evaluated with :mod:`harness_tools.task.expressions`; a
constraint that cannot be evaluated for a configuration (unknown name, division by zero) rejects it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping

from harness_tools.errors import ExpressionError
from harness_tools.task.expressions import evaluate_expression, names_in

Config = tuple[int, ...]

ENUMERATE_LIMIT = 1_000_000  # larger products are sampled, never listed
MEMO_LIMIT = 2_000_000  # constraint results kept; sampling a huge space must not grow memory without bound


class TunableSpace:
    def __init__(self, params: Mapping[str, list[int]], constraints: list[str]):
        self.names = list(params)
        self.values = [list(dict.fromkeys(params[n])) for n in self.names]  # a repeated value is one choice
        self.constraints = list(constraints)
        self.size = math.prod(len(v) for v in self.values)
        self.problems: dict[str, str] = {}  # constraint -> first reason it could not be evaluated
        self._refs: list[tuple[str, ...] | None] = [self._names_of(c) for c in self.constraints]
        self._memo: dict[tuple[int, tuple[int, ...]], bool] = {}
        self._valid: list[Config] | None = None

    def _names_of(self, constraint: str) -> tuple[str, ...] | None:
        try:
            refs = names_in(constraint)
        except ExpressionError as exc:
            self.problems[constraint] = str(exc)
            return None
        unknown = refs - set(self.names)
        if unknown:
            self.problems[constraint] = f"names {sorted(unknown)}, which are not tunables ({', '.join(self.names)})"
            return None
        return tuple(sorted(refs))

    # ---- configurations ---------------------------------------------------------------------------
    def key(self, tunables: Mapping[str, int]) -> Config | None:
        """The configuration for a tunables dict, or None when its names are not exactly this space's."""
        if set(tunables) != set(self.names):
            return None
        return tuple(tunables[n] for n in self.names)

    def as_dict(self, config: Config) -> dict[str, int]:
        return dict(zip(self.names, config))

    def label(self, config: Config) -> str:
        return " ".join(f"{n}={v}" for n, v in zip(self.names, config))

    def contains(self, config: Config) -> bool:
        """Every value is one of its parameter's listed values."""
        return len(config) == len(self.names) and all(v in vs for v, vs in zip(config, self.values))

    def is_valid(self, config: Config) -> bool:
        if not self.contains(config):
            return False
        variables = self.as_dict(config)
        return all(self._holds(i, variables) for i in range(len(self.constraints)))

    def _holds(self, index: int, variables: Mapping[str, int]) -> bool:
        # Memoised on the values of the names the constraint uses: most constraints use few of them, and
        # evaluate_expression() parses its expression on every call.
        refs = self._refs[index]
        if refs is None:
            return False
        values = tuple(variables[n] for n in refs)
        memo_key = (index, values)
        if memo_key in self._memo:
            return self._memo[memo_key]
        constraint = self.constraints[index]
        try:
            holds = bool(evaluate_expression(constraint, dict(zip(refs, values))))
        except ExpressionError as exc:
            self.problems.setdefault(constraint, str(exc))
            holds = False
        if len(self._memo) < MEMO_LIMIT:
            self._memo[memo_key] = holds
        return holds

    # ---- the valid set ------------------------------------------------------------------------------
    def valid(self) -> list[Config] | None:
        """Every valid configuration in a fixed order, or None when the space is too large to list."""
        if self.size > ENUMERATE_LIMIT:
            return None
        if self._valid is None:
            self._valid = self._enumerate()
        return self._valid

    def _enumerate(self) -> list[Config]:
        # Depth-first over the parameters, checking each constraint as soon as its names are bound, so a
        # constraint on the first two parameters prunes whole subtrees.
        last = len(self.names) - 1
        at_depth: list[list[int]] = [[] for _ in self.names]
        for i, refs in enumerate(self._refs):
            depth = max((self.names.index(n) for n in refs), default=0) if refs is not None else last
            at_depth[max(depth, 0)].append(i)
        found: list[Config] = []
        bound: dict[str, int] = {}

        def walk(depth: int) -> None:
            name = self.names[depth]
            for value in self.values[depth]:
                bound[name] = value
                if all(self._holds(i, bound) for i in at_depth[depth]):
                    if depth == last:
                        found.append(tuple(bound[n] for n in self.names))
                    else:
                        walk(depth + 1)
            bound.pop(name, None)

        if self.names and self.size:
            walk(0)
        return found

    def sample(self, rng: random.Random, exclude: set[Config], attempts: int) -> Config | None:
        """A random valid configuration not in ``exclude``, or None after ``attempts`` rejections."""
        for _ in range(attempts):
            config = tuple(rng.choice(vs) for vs in self.values)
            if config not in exclude and self.is_valid(config):
                return config
        return None

    def describe_problems(self) -> str:
        return "; ".join(f"{c!r}: {why}" for c, why in self.problems.items())
