"""Seeded inputs, poisoned outputs and canary tails (DESIGN.md §4).

* Every evaluation draws fresh inputs from a recorded seed, so any result can be replayed exactly.
  Each buffer's stream is keyed by (seed, case name, buffer name): one case never shifts another. A buffer
  of more than :data:`PIECE` elements is drawn in pieces of that many, piece i from the key plus i, on the
  host's cores at once (an 800M-element input took seconds in one stream); the values depend on the seed
  only, never on the number of threads. How values follow from the seed is versioned (:data:`SCHEME`, recorded
  in every evaluation), so a replay knows whether it sees the same inputs. A task
  whose inputs have structure (sorted keys, a polygon, a sparse matrix) builds them itself instead:
  :mod:`harness_tools.check.generated_inputs`.
* Outputs are prefilled with the byte 0xFF (a NaN for every float width, -1/max for integers) before every
  launch unless the task declares an initial value (e.g. 0 for an atomic accumulator).
* The backends surround every buffer with a tail pattern (:mod:`harness_tools.backends.contract`: NaN for
  inputs, a different finite pattern for outputs) and, for validation cases, end it at an inaccessible
  page. Out-of-bounds reads of inputs see NaN or fault; writes outside any buffer show up as a changed
  pattern or fault. docs/oracle.md has the details.

Before any of it, :func:`case_footprint` says from the spec alone (dtype x shape of every buffer) how
much memory a case needs, so a case too big for the machine is refused with a message, not a
MemoryError halfway through drawing its inputs.
"""

from __future__ import annotations

import functools
import math
import os
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import numpy as np

from harness_tools.backends.contract import TAIL_BYTES
from harness_tools.run.scratch import Allocate
from harness_tools.task.dtypes import FP8_MAX, HALF_TYPES, NARROW_FLOATS, as_dtype, is_float, numpy_dtype, storage_dtype
from harness_tools.task.expressions import evaluate_expression
from harness_tools.task.spec import (
    BufferParam,
    Case,
    InputDistribution,
    NumpyReference,
    ScalarParam,
    StoredReference,
    Task,
    TaskSpec,
    TorchReference,
    buffer_bytes,
)

PIECE = 1 << 22  # elements: a larger buffer is drawn in independently seeded pieces of this many
# How input values follow from (seed, case, buffer); raised whenever the same seed would draw other values.
# 1: every buffer in one stream. 2: buffers over PIECE elements in pieces (smaller ones as in 1).
SCHEME = 2
MAX_DRAW_THREADS = 32


class CaseFootprint(NamedTuple):
    """Memory one case needs, in bytes, computed from the spec before anything is drawn or allocated."""

    # the kernel's buffers with their tails: what the device (or the cpu worker) holds; a guard-placed (validation)
    # buffer takes up to one allocation granule (2 MiB on an H200) more, too little to matter for the refusal
    buffers: int
    host: int  # an estimate of the peak host memory of the evaluation for this case (see case_footprint)


def case_footprint(spec: TaskSpec, case: Case, buffers_in_host_memory: bool) -> CaseFootprint:
    """Bytes of one case's buffers, and an estimate of the host memory its evaluation needs.

    Host memory, per buffer of n bytes and e elements: an input is drawn (n; bfloat16 and float16 are drawn in
    float64 first, +8e), saved to a file that usually lives in memory on /dev/shm (n) and, for a NumPy reference,
    upcast to float64 (8e); an output is downloaded to such a file (n) and compared with a float64
    expected array (8e; a NumPy reference's own result, +8e). A torch reference counts as a NumPy one; inputs
    from the task's generator count a float64 array each as it returns them (+8e). Where the backend keeps
    buffers in host memory (the cpu backend's worker), every buffer counts there too."""
    numpy_ref = isinstance(spec.reference, (NumpyReference, TorchReference))
    generated = spec.inputs is not None
    buffers = host = 0
    for buf in spec.buffers:
        n = buffer_bytes(buf, spec.shape_of(buf, case.sizes))
        e = n // numpy_dtype(buf.dtype).itemsize
        buffers += n + TAIL_BYTES
        if buf.role != "out":
            host += (2 * n + (8 * e if buf.dtype in NARROW_FLOATS or generated else 0)
                     + (8 * e if numpy_ref else 0))
        if buf.role != "in":
            host += n + 8 * e + (8 * e if numpy_ref else 0)
    if buffers_in_host_memory:
        host += buffers
    return CaseFootprint(buffers=buffers, host=host)


def available_host_bytes() -> int | None:
    """Memory this process may still use: MemAvailable from /proc/meminfo, lowered by a cgroup v2 limit
    where one is set (a container); None where neither can be read."""
    available = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            left = int(limit) - int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
            available = left if available is None else min(available, left)
    except (OSError, ValueError):
        pass
    return available


def fresh_seed() -> int:
    return int.from_bytes(os.urandom(4), "little")


def draw_inputs(spec: TaskSpec, case: Case, seed: int, allocate: Allocate | None = None) -> dict[str, np.ndarray]:
    """Arrays for every in/inout buffer, in the buffer's dtype and shape. A buffer drawn in pieces is drawn into
    ``allocate``'s array (its file in the input cache, written once by the drawing threads) when one is given.
    The pieces of every buffer are drawn side by side: matmul's two 4096² inputs are 8 pieces, which one buffer
    after the other left on 4 threads at a time."""
    arrays: dict[str, np.ndarray] = {}
    pieces: list[Callable[[], None]] = []
    for buf in spec.buffers:
        if buf.role == "out":
            continue
        key = [seed, zlib.crc32(case.name.encode()), zlib.crc32(buf.name.encode())]
        arrays[buf.name] = _draw(key, buf, spec.shape_of(buf, case.sizes), allocate, pieces)
    if pieces:
        _on_threads(lambda i: pieces[i](), len(pieces))
    return arrays


def _draw(key: list[int], buf: BufferParam, shape: tuple[int, ...], allocate: Allocate | None,
          pieces: list[Callable[[], None]]) -> np.ndarray:
    """The buffer's array; a large one is returned empty, with the filling of each of its pieces added to ``pieces``."""
    count = math.prod(shape)
    if count <= PIECE:  # one stream, as every buffer was drawn before pieces
        return _draw_piece(np.random.default_rng(key), buf, count).reshape(shape)
    dtype = numpy_dtype(buf.dtype)
    array = np.empty(count, dtype) if allocate is None else allocate(buf.name, shape, storage_dtype(buf.dtype))
    out = array.reshape(-1).view(dtype)  # raw records in the file for fp8/bf16, filled as the type itself

    def fill(i: int) -> None:
        piece = slice(i * PIECE, min(count, (i + 1) * PIECE))
        out[piece] = _draw_piece(np.random.default_rng([*key, i]), buf, piece.stop - piece.start)

    pieces.extend(functools.partial(fill, i) for i in range(-(-count // PIECE)))
    return out.reshape(shape)


def _draw_piece(rng: np.random.Generator, buf: BufferParam, count: int) -> np.ndarray:
    dist = buf.init or InputDistribution()
    dtype = numpy_dtype(buf.dtype)
    if not is_float(buf.dtype):
        low, high = (int(dist.low), int(dist.high)) if dist.dist == "randint" or buf.init else (-100, 100)
        info = np.iinfo(dtype)
        return rng.integers(max(low, info.min), min(high, info.max), size=count, endpoint=True, dtype=dtype)
    # float32 draws are drawn in float32 (fast, and already in the buffer's type); the half types in float64 and
    # rounded once to nearest (ml_dtypes rounds to nearest even), so every value is the rounding of a draw
    work = np.float32 if buf.dtype == "float32" else np.float64
    if dist.dist == "normal":
        values = rng.standard_normal(size=count, dtype=work)
        values *= work(dist.std)
        values += work(dist.mean)
    elif dist.dist == "uniform":
        values = rng.random(size=count, dtype=work)
        values *= work(dist.high - dist.low)
        values += work(dist.low)
    else:
        values = rng.integers(int(dist.low), int(dist.high), size=count, endpoint=True).astype(work)
    if buf.dtype in FP8_MAX:  # saturated to the finite range, as __NV_SATFINITE would (docs/dtypes.md)
        np.clip(values, -FP8_MAX[buf.dtype], FP8_MAX[buf.dtype], out=values)
    return values.astype(dtype, copy=False)


def scalar_arguments(spec: TaskSpec, sizes: dict[str, int]) -> dict[str, int | float]:
    """Values of the kernel's scalar parameters for one case, checked against their dtype's range."""
    values: dict[str, int | float] = {}
    for p in spec.params:
        if isinstance(p, ScalarParam):
            v = evaluate_expression(p.value, sizes)
            if not is_float(p.dtype):
                info = np.iinfo(numpy_dtype(p.dtype))
                if not info.min <= int(v) <= info.max:
                    raise OverflowError(f"scalar {p.name}={v} does not fit {p.dtype}")
                v = int(v)
            elif p.dtype in HALF_TYPES:  # the value the kernel receives, so the reference computes with it too
                v = float(numpy_dtype(p.dtype).type(v))
            values[p.name] = v
    return values


def reference_inputs(spec: TaskSpec, case: Case, arrays: dict[str, np.ndarray]) -> dict[str, object]:
    """What a NumPy reference receives: float buffers upcast to float64 (bfloat16 and float16 exactly: the
    reference sees the rounded values the kernel sees), ints to int64, plus scalars."""
    floats = {b.name for b in spec.buffers if is_float(b.dtype)}
    ref: dict[str, object] = {}
    for name, arr in arrays.items():
        ref[name] = _widened(arr, np.float64 if name in floats else np.int64)
    ref.update(scalar_arguments(spec, case.sizes))
    return ref


def _widened(arr: np.ndarray, dtype: type) -> np.ndarray:
    """``arr`` as ``dtype``; a large one converted piece by piece on the host's cores (numpy's cast is one thread)."""
    if arr.size <= PIECE:
        return arr.astype(dtype)
    flat, out = arr.reshape(-1), np.empty(arr.size, dtype)

    def convert(i: int) -> None:
        out[i * PIECE:(i + 1) * PIECE] = flat[i * PIECE:(i + 1) * PIECE]

    _on_threads(convert, -(-arr.size // PIECE))
    return out.reshape(arr.shape)


def _on_threads(work: Callable[[int], None], pieces: int) -> None:
    """``work(i)`` for every piece i, on up to the host's cores (numpy releases the GIL in bulk fills and casts)."""
    with ThreadPoolExecutor(max_workers=min(pieces, os.cpu_count() or 1, MAX_DRAW_THREADS)) as pool:
        list(pool.map(work, range(pieces)))


def stored_inputs(task: Task, case: Case) -> dict[str, np.ndarray] | None:
    """The fixed inputs of a stored reference (None for other kinds: inputs are drawn from the seed)."""
    ref = task.spec.reference
    if not isinstance(ref, StoredReference):
        return None
    folder = task.folder / ref.dir / case.name
    return {b.name: as_dtype(np.load(folder / f"{b.name}.npy"), b.dtype) for b in task.spec.buffers if b.role != "out"}
