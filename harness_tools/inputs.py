"""Seeded inputs, poisoned outputs and canary tails (DESIGN.md §4).

* Every evaluation draws fresh inputs from a recorded seed, so any result can be replayed exactly.
  Each buffer's stream is keyed by (seed, case name, buffer name): one case never shifts another.
* Poison is the byte 0xFF: a NaN for every float width and -1/max for integers. Outputs are poisoned
  before every launch unless the task declares an initial value (e.g. 0 for an atomic accumulator).
* Every device buffer is followed by ``TAIL_BYTES`` of poison. Out-of-bounds reads of inputs then see
  NaN, and writes past any buffer's end show up as a changed tail.
"""

from __future__ import annotations

import os
import zlib

import numpy as np

from .expressions import evaluate
from .spec import BufferParam, Case, InputDistribution, ScalarParam, TaskSpec, is_float, numpy_dtype

POISON_BYTE = 0xFF
TAIL_BYTES = 4096


def fresh_seed() -> int:
    return int.from_bytes(os.urandom(4), "little")


def draw_inputs(spec: TaskSpec, case: Case, seed: int) -> dict[str, np.ndarray]:
    """Arrays for every in/inout buffer, in the buffer's dtype and shape."""
    arrays: dict[str, np.ndarray] = {}
    for buf in spec.buffers:
        if buf.role == "out":
            continue
        rng = np.random.default_rng([seed, zlib.crc32(case.name.encode()), zlib.crc32(buf.name.encode())])
        arrays[buf.name] = _draw(rng, buf, spec.shape_of(buf, case.sizes))
    return arrays


def _draw(rng: np.random.Generator, buf: BufferParam, shape: tuple[int, ...]) -> np.ndarray:
    dist = buf.init or InputDistribution()
    dtype = numpy_dtype(buf.dtype)
    if not is_float(buf.dtype):
        low, high = (int(dist.low), int(dist.high)) if dist.dist == "randint" or buf.init else (-100, 100)
        info = np.iinfo(dtype)
        return rng.integers(max(low, info.min), min(high, info.max), size=shape, endpoint=True, dtype=dtype)
    work = np.float32 if dtype.itemsize <= 4 else np.float64
    if dist.dist == "normal":
        values = rng.standard_normal(size=shape, dtype=work)
        values *= work(dist.std)
        values += work(dist.mean)
    elif dist.dist == "uniform":
        values = rng.random(size=shape, dtype=work)
        values *= work(dist.high - dist.low)
        values += work(dist.low)
    else:
        values = rng.integers(int(dist.low), int(dist.high), size=shape, endpoint=True).astype(work)
    return values.astype(dtype, copy=False)


def scalar_arguments(spec: TaskSpec, sizes: dict[str, int]) -> dict[str, int | float]:
    """Values of the kernel's scalar parameters for one case, checked against their dtype's range."""
    values: dict[str, int | float] = {}
    for p in spec.params:
        if isinstance(p, ScalarParam):
            v = evaluate(p.value, sizes)
            if not is_float(p.dtype):
                info = np.iinfo(numpy_dtype(p.dtype))
                if not info.min <= int(v) <= info.max:
                    raise OverflowError(f"scalar {p.name}={v} does not fit {p.dtype}")
                v = int(v)
            values[p.name] = v
    return values


def reference_inputs(spec: TaskSpec, case: Case, arrays: dict[str, np.ndarray]) -> dict[str, object]:
    """What a NumPy reference receives: float buffers upcast to float64, ints to int64, plus scalars."""
    ref: dict[str, object] = {}
    for name, arr in arrays.items():
        ref[name] = arr.astype(np.float64 if arr.dtype.kind == "f" else np.int64)
    ref.update(scalar_arguments(spec, case.sizes))
    return ref
