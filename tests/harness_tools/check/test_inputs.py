"""Seeded inputs: replayable, independent per case and buffer, never zeros, in range."""

from __future__ import annotations

import zlib

import numpy as np

from harness_tools.check import inputs
from harness_tools.check.inputs import PIECE, draw_inputs, reference_inputs, scalar_arguments
from harness_tools.task.dtypes import numpy_dtype
from harness_tools.task.loading import spec_from_dict

SPEC = spec_from_dict({
    "name": "t", "description": "d", "kernel_name": "k", "sizes": ["n"],
    "params": [
        {"kind": "buffer", "name": "x", "dtype": "float32", "shape": ["n"], "role": "in"},
        {"kind": "buffer", "name": "w", "dtype": "float32", "shape": ["n", 2], "role": "in",
         "init": {"dist": "normal", "mean": 5, "std": 0.5}},
        {"kind": "buffer", "name": "i", "dtype": "int32", "shape": ["n"], "role": "inout",
         "init": {"dist": "randint", "low": 3, "high": 7}},
        {"kind": "buffer", "name": "y", "dtype": "float32", "shape": ["n"], "role": "out"},
        {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"},
        {"kind": "scalar", "name": "half", "dtype": "float32", "value": "n / 2"},
    ],
    "cases": [{"name": "a", "role": "validation", "sizes": {"n": 1001}},
              {"name": "b", "role": "validation", "sizes": {"n": 1001}}],
    "reference": {"kind": "stored"},
    "tolerance": {"float32": {"atol": 0, "rtol": 0}, "int32": {}},
    "baseline": {"source": "k.cu", "launch": {"grid": [1], "block": [1]}},
}, "inline")


def test_same_seed_same_inputs_other_seed_other_inputs():
    a1 = draw_inputs(SPEC, SPEC.cases[0], 7)
    a2 = draw_inputs(SPEC, SPEC.cases[0], 7)
    a3 = draw_inputs(SPEC, SPEC.cases[0], 8)
    assert set(a1) == {"x", "w", "i"}  # outputs are not drawn
    assert all(np.array_equal(a1[k], a2[k]) for k in a1)
    assert not np.array_equal(a1["x"], a3["x"])


def test_cases_with_equal_sizes_still_get_different_inputs():
    a = draw_inputs(SPEC, SPEC.cases[0], 7)
    b = draw_inputs(SPEC, SPEC.cases[1], 7)
    assert not np.array_equal(a["x"], b["x"])


def test_a_large_buffer_is_drawn_in_seeded_pieces_whatever_the_threads(monkeypatch):
    """Past PIECE elements a buffer is drawn piece by piece, piece k from (seed, case, buffer, k), on several
    threads: the same bytes on one thread, every piece its own stream, each dtype and distribution kept."""
    big = SPEC.model_copy(update={"cases": [SPEC.cases[0].model_copy(update={"sizes": {"n": 2 * PIECE + 5}})]})
    case = big.cases[0]
    many = draw_inputs(big, case, 7)
    monkeypatch.setattr(inputs, "MAX_DRAW_THREADS", 1)
    one = draw_inputs(big, case, 7)
    assert all(many[k].tobytes() == one[k].tobytes() for k in many)
    x, w, i = many["x"], many["w"], many["i"]
    assert x.shape == (2 * PIECE + 5,) and w.shape == (2 * PIECE + 5, 2) and i.dtype == np.int32
    key = [7, zlib.crc32(b"a"), zlib.crc32(b"x")]
    for k in range(3):  # uniform in [-1, 1): the piece's own float32 stream, scaled
        got = x[k * PIECE:(k + 1) * PIECE]
        assert np.array_equal(got, np.random.default_rng([*key, k]).random(got.size, dtype=np.float32) * 2 - 1)
    assert not np.array_equal(x[:1000], x[PIECE:PIECE + 1000])  # no piece repeats another
    assert abs(w.mean() - 5) < 0.01 and i.min() == 3 and i.max() == 7
    assert not np.array_equal(x, draw_inputs(big, case, 8)["x"])
    ref = reference_inputs(big, case, many)  # widened piece by piece too: the same values as one cast
    assert ref["w"].dtype == np.float64 and ref["w"].shape == w.shape and np.array_equal(ref["w"], w.astype(np.float64))
    assert ref["i"].dtype == np.int64 and np.array_equal(ref["i"], i)


def test_dtypes_shapes_and_distributions():
    arrays = draw_inputs(SPEC, SPEC.cases[0], 1)
    x, w, i = arrays["x"], arrays["w"], arrays["i"]
    assert x.dtype == np.float32 and x.shape == (1001,) and np.all((x >= -1) & (x < 1))
    assert np.count_nonzero(x) == x.size and np.unique(x).size > 900
    assert w.shape == (1001, 2) and abs(w.mean() - 5) < 0.1 and abs(w.std() - 0.5) < 0.05
    assert i.dtype == np.int32 and i.min() >= 3 and i.max() <= 7 and np.unique(i).size == 5


def test_reference_sees_float64_and_scalars():
    arrays = draw_inputs(SPEC, SPEC.cases[0], 1)
    ref = reference_inputs(SPEC, SPEC.cases[0], arrays)
    assert ref["x"].dtype == np.float64 and ref["i"].dtype == np.int64
    assert ref["n"] == 1001 and ref["half"] == 500.5
    assert scalar_arguments(SPEC, {"n": 8}) == {"n": 8, "half": 4.0}


HALF_SPEC = spec_from_dict({
    "name": "h", "description": "d", "kernel_name": "k", "sizes": ["n"],
    "params": [
        {"kind": "buffer", "name": "b", "dtype": "bfloat16", "shape": ["n"], "role": "in"},
        {"kind": "buffer", "name": "h", "dtype": "float16", "shape": ["n"], "role": "in",
         "init": {"dist": "normal", "mean": 3, "std": 2}},
        {"kind": "buffer", "name": "k", "dtype": "bfloat16", "shape": ["n"], "role": "in",
         "init": {"dist": "randint", "low": -300, "high": 300}},
        {"kind": "buffer", "name": "y", "dtype": "bfloat16", "shape": ["n"], "role": "out"},
        {"kind": "scalar", "name": "s", "dtype": "bfloat16", "value": 0.1},
    ],
    "cases": [{"name": "a", "role": "validation", "sizes": {"n": 20000}}],
    "reference": {"kind": "stored"},
    "baseline": {"source": "k.cu", "launch": {"grid": [1], "block": [1]}},
}, "inline")


def test_half_draws_are_the_nearest_representable_values_of_a_seeded_float64_draw():
    arrays = draw_inputs(HALF_SPEC, HALF_SPEC.cases[0], 5)
    again = draw_inputs(HALF_SPEC, HALF_SPEC.cases[0], 5)
    assert all(arrays[n].tobytes() == again[n].tobytes() for n in arrays)
    assert arrays["b"].tobytes() != draw_inputs(HALF_SPEC, HALF_SPEC.cases[0], 6)["b"].tobytes()
    b, h, k = arrays["b"], arrays["h"], arrays["k"]
    assert b.dtype == numpy_dtype("bfloat16") and h.dtype == np.float16 and b.shape == (20000,)
    # the float64 draw the engine made, rounded once to nearest: recompute it and round it ourselves
    rng = np.random.default_rng([5, zlib.crc32(b"a"), zlib.crc32(b"b")])
    assert np.array_equal(b.view(np.uint16), (rng.random(20000) * 2 - 1).astype(numpy_dtype("bfloat16")).view(np.uint16))
    wide = b.astype(np.float64)
    assert np.all((wide >= -1) & (wide <= 1)) and np.unique(b.view(np.uint16)).size > 1000  # 128 per binade
    assert abs(h.astype(np.float64).mean() - 3) < 0.1 and abs(h.astype(np.float64).std() - 2) < 0.1
    ints = k.astype(np.float64)  # integers above 256 are rounded to bf16's even neighbours, as the kernel sees them
    assert np.array_equal(ints, np.round(ints)) and ints.min() >= -300 and ints.max() <= 300


def test_the_reference_sees_the_rounded_half_values_and_scalars():
    arrays = draw_inputs(HALF_SPEC, HALF_SPEC.cases[0], 5)
    ref = reference_inputs(HALF_SPEC, HALF_SPEC.cases[0], arrays)
    assert ref["b"].dtype == np.float64 and np.array_equal(ref["b"], arrays["b"].astype(np.float64))
    assert ref["s"] == float(np.array(0.1).astype(numpy_dtype("bfloat16")).astype(np.float64)) != 0.1


def test_an_evaluation_records_how_its_inputs_follow_from_the_seed(cpu_backend):
    """A replay draws the same inputs only under the same scheme: the record says which; one written before the
    field existed (its large buffers drawn in one stream) reads as scheme 1."""
    from harness_tools.evaluation import EvaluationConfig, EvaluationResult, evaluate
    from harness_tools.task import candidate as candidates
    from harness_tools.task.loading import resolve_task

    task = resolve_task("transpose")
    result = evaluate(task, candidates.baseline(task), cpu_backend, EvaluationConfig(roles=["validation"], seed=5))
    assert result.correct and result.input_scheme == inputs.SCHEME >= 2
    older = result.model_dump(mode="json")
    del older["input_scheme"]
    assert EvaluationResult.model_validate(older).input_scheme == 1


def test_a_large_buffer_drawn_into_a_file_holds_the_same_bytes_as_in_memory(tmp_path):
    """The input cache's ``allocate`` path: raw records in the file for bfloat16, the values of the in-memory
    draw either way."""
    spec = spec_from_dict({**SPEC.model_dump(mode="json", exclude_none=True), "params": [
        {"kind": "buffer", "name": "x", "dtype": "float32", "shape": ["n"], "role": "in"},
        {"kind": "buffer", "name": "h", "dtype": "bfloat16", "shape": ["n"], "role": "in"},
        {"kind": "buffer", "name": "y", "dtype": "float32", "shape": ["n"], "role": "out"}],
        "tolerance": {"float32": {"atol": 0, "rtol": 0}, "bfloat16": {"atol": 0, "rtol": 0}}}, "inline")
    case = spec.cases[0].model_copy(update={"sizes": {"n": PIECE + 3}})

    def allocate(name, shape, dtype):
        return np.lib.format.open_memmap(tmp_path / f"{name}.npy", mode="w+", dtype=dtype, shape=shape)

    in_memory, in_files = draw_inputs(spec, case, 11), draw_inputs(spec, case, 11, allocate)
    for name, dtype in (("x", "float32"), ("h", "bfloat16")):
        assert in_files[name].dtype == numpy_dtype(dtype) and in_files[name].shape == (PIECE + 3,)
        assert in_files[name].tobytes() == in_memory[name].tobytes()
        assert np.load(tmp_path / f"{name}.npy").tobytes() == in_memory[name].tobytes()
    assert np.load(tmp_path / "h.npy").dtype == np.dtype("V2")  # raw records, as np.save of storable() writes
