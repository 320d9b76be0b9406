"""The cpu runtime's guarded buffers, through its C ABI: where each placement puts the data, and what
surrounds it."""

from __future__ import annotations

import ctypes
import errno

import numpy as np
import pytest

from harness_tools.backends.contract import GUARD_ALIGN, TAIL_ALIGN, tail_pattern
from harness_tools.backends.cpu.build import runtime_library
from harness_tools.backends.cpu.executor import Buffer

WORD = 0x7FBD7D7D


@pytest.fixture(scope="module")
def runtime():
    lib = ctypes.CDLL(str(runtime_library()))
    lib.cudaopt_buffer_alloc.argtypes = [ctypes.POINTER(Buffer), ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t,
                                         ctypes.c_uint32]
    lib.cudaopt_buffer_free.argtypes = [ctypes.POINTER(Buffer)]
    return lib


def _bytes(address: int, n: int) -> np.ndarray:
    return np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(address)) if n else np.empty(0, np.uint8)


@pytest.mark.parametrize("alignment", [GUARD_ALIGN, TAIL_ALIGN])
@pytest.mark.parametrize("size", [0, 4, 4004, 4096, 5000])
def test_data_is_aligned_and_ends_within_one_alignment_of_the_guard_page(runtime, alignment, size):
    buf = Buffer()
    assert runtime.cudaopt_buffer_alloc(ctypes.byref(buf), b"x", size, alignment, WORD) == 0
    try:
        page = 4096
        end = buf.data + size + buf.slack
        assert buf.data % alignment == 0 and buf.slack < alignment and end % page == 0
        assert end == buf.mapping + buf.mapping_size - page  # the back guard page starts right there
        assert (_bytes(buf.data - buf.front_pad, buf.front_pad) == tail_pattern(WORD, buf.front_pad)).all()
        assert (_bytes(buf.data + size, buf.slack) == tail_pattern(WORD, buf.slack)).all()
    finally:
        runtime.cudaopt_buffer_free(ctypes.byref(buf))


@pytest.mark.parametrize("alignment", [0, 8, 24, 1 << 20])
def test_alignments_below_16_above_a_page_or_not_a_power_of_two_are_refused(runtime, alignment):
    buf = Buffer()
    assert runtime.cudaopt_buffer_alloc(ctypes.byref(buf), b"x", 16, alignment, WORD) == errno.EINVAL
