"""Hidden shapes: cases the model never sees, checked (correctness only) before a candidate may become best.

A kernel tuned to the validation sizes (one that assumes n is a multiple of 256, say) passes every
validation case; hidden shapes are the sizes it was not tuned to. They are the task's own hidden cases
(``hidden.cases`` in task.json, class ``task-hidden``) plus sizes derived from the validation cases.

Method of the derivation (deterministic: the same task and backend always give the same sizes):

1. Units: each group of ``size_rules.equal`` is one unit (its sizes move together), every other size is a
   unit of its own. A unit whose sizes must be multiples (``size_rules.multiple_of``, the least common
   multiple for a group) moves on that lattice: each class below is applied to ``value / m`` and the
   result multiplied by ``m`` again (``odd`` then means m·odd, ``tile+1`` a tile plus one step m).
2. Templates: the validation cases that run on the backend, largest buffers first.
3. One case per class; class k starts at template k (so the sizes spread over the validation range) and
   is applied to every unit of it at once: ``tile+1`` / ``tile-1`` (around the multiple of a tile size
   nearest the value; the largest tile not above it, the next smaller for the next unit), ``odd`` (the
   next odd value above), ``pow2-1`` / ``pow2+1`` (around the power of two nearest the value, at least 4),
   ``prime`` (the next prime above). Tile sizes are 32, 64, 128 and 256 plus every value between 8 and
   4096 of the task's tunable parameters, baseline defines and literal block dimensions.
4. A derived case is kept only if it obeys the size rules, makes a valid case (positive shapes, scalars
   that fit their dtype), needs at most twice the buffer bytes of the largest validation case, and differs
   from every public case and every case kept before it; otherwise the class tries the next template. A class
   that finds no case that way tries its templates once more with a limit of 64 MiB, where that is more.
   At most ``MAX_DERIVED`` cases; none when ``hidden.derive`` is false or the reference is stored arrays
   (there is nothing to compare new sizes with).

Derived case names (``hidden_odd_0`` ...) and their class name carry no size: callers may show the class.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from harness_tools.task.loading import sizes_problem
from harness_tools.task.spec import Case, HiddenSpec, StoredReference, Task, TaskSpec, buffer_bytes

MAX_DERIVED = 8
GROWTH = 2  # a derived case needs at most this times the buffers of the largest validation case ...
FLOOR_BYTES = 64 << 20  # ... or, for a class that found no case so, this much (a coarse lattice: matmul's N, a
# multiple of 512, had no size between its validation cases and twice their bytes, so no hidden case at all)
DEFAULT_TILES = (32, 64, 128, 256)
TILE_RANGE = (8, 4096)  # tunable and define values in this range look like tile sizes
TASK_HIDDEN = "task-hidden"


class HiddenShape(BaseModel):
    """One hidden case, as a validation-role case the engine can evaluate, and the class it belongs to."""

    model_config = ConfigDict(frozen=True)

    case: Case
    shape_class: str


# ---- the classes: a function of (value, tile) on the unit's lattice ------------------------------------------
def _odd(q: int, tile: int) -> int:
    return q + 1 if q % 2 == 0 else q + 2


def _prime(q: int, tile: int) -> int:
    n = q + 1
    while not _is_prime(n):
        n += 1
    return n


def _nearest_pow2(q: int) -> int:
    low = 1 << (q.bit_length() - 1)
    return max(low if q - low <= 2 * low - q else 2 * low, 4)


def _near_tile(q: int, tile: int) -> int:
    return tile * max(1, round(q / tile))


# in the order they take templates: the partial tile, the commonest tuning shortcut, meets the largest case
CLASSES: dict[str, Callable[[int, int], int]] = {
    "tile+1": lambda q, t: _near_tile(q, t) + 1,
    "odd": _odd,
    "pow2-1": lambda q, t: _nearest_pow2(q) - 1,
    "prime": _prime,
    "tile-1": lambda q, t: _near_tile(q, t) - 1,
    "pow2+1": lambda q, t: _nearest_pow2(q) + 1,
}


_WITNESSES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)  # decide Miller-Rabin exactly below 3.3e24


def _is_prime(n: int) -> bool:
    """Deterministic Miller-Rabin: sizes may be int64, too big for trial division."""
    if n < 2:
        return False
    for p in _WITNESSES:
        if n % p == 0:
            return n == p
    d, r = n - 1, 0
    while d % 2 == 0:
        d, r = d // 2, r + 1
    for a in _WITNESSES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


# ---- the task's side: units, tiles, templates ---------------------------------------------------------------
def _units(spec: TaskSpec) -> list[tuple[list[str], int]]:
    """(sizes that move together, their lattice step), in the order of ``spec.sizes``."""
    rules = spec.size_rules
    groups = [list(g) for g in rules.equal] if rules else []
    grouped = {n for g in groups for n in g}
    groups += [[n] for n in spec.sizes if n not in grouped]
    groups.sort(key=lambda g: min(spec.sizes.index(n) for n in g))
    multiples = rules.multiple_of if rules else {}
    return [(g, math.lcm(*(multiples.get(n, 1) for n in g))) for g in groups]


def tile_sizes(spec: TaskSpec) -> list[int]:
    """Values that look like tile sizes, ascending (see the module docstring)."""
    values = set(DEFAULT_TILES)
    programs = [spec.baseline] + ([spec.tunables] if spec.tunables else [])
    if spec.tunables:
        values.update(v for vals in spec.tunables.params.values() for v in vals)
    values.update(v for v in spec.baseline.defines.values() if isinstance(v, int))
    for program in programs:
        for launch in [program.launch] if program.launch else program.launches or []:
            values.update(v for v in launch.block if isinstance(v, int))
    low, high = TILE_RANGE
    return sorted(v for v in values if isinstance(v, int) and not isinstance(v, bool) and low <= v <= high)


def _buffer_bytes(spec: TaskSpec, sizes: dict[str, int]) -> int:
    return sum(buffer_bytes(b, spec.shape_of(b, sizes)) for b in spec.buffers)


def _templates(spec: TaskSpec, backend: str) -> list[dict[str, int]]:
    """Sizes of the validation cases on ``backend``, largest buffers first (ties in task order)."""
    cases = spec.cases_for(["validation"], backend)
    order = sorted(range(len(cases)), key=lambda i: (-_buffer_bytes(spec, cases[i].sizes), i))
    return [dict(cases[i].sizes) for i in order]


# ---- derivation --------------------------------------------------------------------------------------------
def _apply(shape_class: str, template: dict[str, int], units: list[tuple[list[str], int]],
           tiles: list[int]) -> dict[str, int]:
    sizes = dict(template)
    for index, (names, step) in enumerate(units):
        lattice = sorted({max(2, t // step) for t in tiles})
        q = max(1, template[names[0]] // step)
        near = [t for t in lattice if t <= q] or lattice[:1]
        tile = near[::-1][index % len(near)]
        value = step * max(1, CLASSES[shape_class](q, tile))
        sizes.update({n: value for n in names})
    return sizes


def _acceptable(spec: TaskSpec, sizes: dict[str, int], limit: int, taken: list[dict[str, int]]) -> bool:
    if sizes in taken or any(v < 1 for v in sizes.values()):
        return False
    if spec.size_rules and spec.size_rules.problem(sizes):
        return False
    return sizes_problem(spec, sizes) is None and _buffer_bytes(spec, sizes) <= limit


def derived_sizes(spec: TaskSpec, backend: str) -> list[tuple[str, dict[str, int]]]:
    """(class name, sizes) of the derived hidden cases of ``spec`` on ``backend``; at most ``MAX_DERIVED``."""
    if not spec.hidden.derive or isinstance(spec.reference, StoredReference):
        return []
    templates = _templates(spec, backend)
    if not templates:
        return []
    growth = GROWTH * _buffer_bytes(spec, templates[0])
    limits = [growth] + ([FLOOR_BYTES] if FLOOR_BYTES > growth else [])
    units, tiles = _units(spec), tile_sizes(spec)
    taken = [dict(c.sizes) for c in spec.cases] + [dict(c.sizes) for c in spec.hidden.cases]
    out: list[tuple[str, dict[str, int]]] = []
    for k, shape_class in enumerate(CLASSES):
        tries = [(limit, templates[(k + t) % len(templates)]) for limit in limits for t in range(len(templates))]
        for limit, template in tries:
            sizes = _apply(shape_class, template, units, tiles)
            if _acceptable(spec, sizes, limit, taken):
                out.append((shape_class, sizes))
                taken.append(sizes)
                break
        if len(out) == MAX_DERIVED:
            break
    return out


def _slug(shape_class: str) -> str:
    return shape_class.replace("-", "m").replace("+", "p")


def hidden_shapes(spec: TaskSpec, backend: str) -> list[HiddenShape]:
    """Every hidden case on ``backend``: the task's named ones, then the derived ones."""
    named = [HiddenShape(case=Case(name=c.name, role="validation", sizes=c.sizes), shape_class=TASK_HIDDEN)
             for c in spec.hidden.cases if c.runs_on(backend)]
    used = {c.name for c in spec.cases} | {s.case.name for s in named}
    derived = []
    for i, (shape_class, sizes) in enumerate(derived_sizes(spec, backend)):
        name = f"hidden_{_slug(shape_class)}_{i}"
        while name in used:
            name += "_"
        used.add(name)
        derived.append(HiddenShape(case=Case(name=name, role="validation", sizes=sizes), shape_class=shape_class))
    return named + derived


def hidden_task(task: Task, shapes: list[HiddenShape]) -> Task:
    """The task with ``shapes`` as its only (validation) cases, for the engine's ``evaluate``; same folder and
    reference, so named hidden cases of a stored reference find their arrays."""
    spec = task.spec.model_copy(update={"cases": [s.case for s in shapes], "hidden": HiddenSpec(derive=False)})
    return Task(spec=spec, folder=task.folder)
