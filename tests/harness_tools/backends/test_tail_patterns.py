"""The backend contract's patterns: an unwritten output reads as NaN, reads past an input see NaN (or, for
integers, a far-away index), and nothing copied or computed from either can restore a writable tail."""

from __future__ import annotations

import numpy as np
import pytest

from harness_tools.backends.contract import (
    POISON_BYTE,
    WRITABLE_TAIL_WORD,
    CaseRequest,
    KernelLaunch,
    tail_pattern,
    tail_word,
)
from harness_tools.task.dtypes import numpy_dtype
from harness_tools.task.spec import CTYPES

QUIET_BIT = {"bfloat16": 6, "float16": 9, "float32": 22, "float64": 51}
FLOATS = sorted(QUIET_BIT)


def _bytes(word: int) -> set[int]:
    return set(word.to_bytes(4, "little"))


@pytest.mark.parametrize("dtype", sorted(CTYPES))
def test_input_and_writable_patterns_share_no_byte(dtype):
    # so bytes copied at any width or offset from an input's surroundings never leave a writable tail intact
    assert not _bytes(tail_word(dtype, "in")) & _bytes(tail_word(dtype, "out"))
    assert POISON_BYTE not in _bytes(WRITABLE_TAIL_WORD)  # nor does a copied prefilled (unwritten) element
    assert tail_word(dtype, "inout") == tail_word(dtype, "out") == WRITABLE_TAIL_WORD


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_inputs_are_surrounded_by_signalling_nans_and_outputs_by_finite_values(dtype):
    itemsize = numpy_dtype(dtype).itemsize
    around_input = tail_pattern(tail_word(dtype, "in"), 4 * itemsize).view(numpy_dtype(dtype))
    assert np.isnan(around_input).all()
    bits = around_input.view(f"u{itemsize}")[0]
    assert not (int(bits) >> QUIET_BIT[dtype]) & 1  # arithmetic must change it, even on the cpu (x86 keeps payloads)
    assert np.isfinite(tail_pattern(WRITABLE_TAIL_WORD, 4 * itemsize).view(numpy_dtype(dtype))).all()
    assert np.isnan(np.full(4 * itemsize, POISON_BYTE, dtype=np.uint8).view(numpy_dtype(dtype))).all()  # output prefill


def test_integer_inputs_are_surrounded_by_large_magnitudes():
    for dtype in ("int32", "int64", "uint32"):
        value = tail_pattern(tail_word(dtype, "in"), 8).view(dtype)[0]
        assert abs(int(value)) > 1 << 30  # used as an index it lands far outside any buffer


def test_patterns_tile_from_the_start_of_a_region():
    assert tail_pattern(0x7FBD7D7D, 6).tolist() == [0x7D, 0x7D, 0xBD, 0x7F, 0x7D, 0x7D]
    assert tail_pattern(0x7FBD7D7D, 0).size == 0


def test_requests_default_to_the_tail_placement():
    launch = KernelLaunch(kernel_name="k", symbol="k", grid=(1, 1, 1), block=(1, 1, 1), args=[])
    request = CaseRequest(launches=[launch], args=[], output_dir="/tmp")
    assert request.placement == "tail"
