"""Candidates are bounded when built, and their launches are checked against CUDA's limits before anything runs."""

from __future__ import annotations

import time

import pytest
from pydantic import ValidationError

from harness_tools.errors import CandidateError
from harness_tools.task import candidate as candidates
from harness_tools.task.candidate import MAX_OPTIONS, Candidate
from harness_tools.task.loading import resolve_task
from harness_tools.task.spec import MAX_DEFINES, MAX_SOURCE_BYTES

TRANSPOSE = resolve_task("transpose")
SIZES = {"rows": 64, "cols": 96}


def with_(**update) -> Candidate:
    base = candidates.baseline(TRANSPOSE).model_dump()
    return Candidate.model_validate({**base, **update})


def launch(grid, block, shared=0) -> Candidate:
    return with_(launch={"grid": grid, "block": block, "shared_mem": shared})


def test_a_huge_source_is_refused_without_encoding_it():
    huge = "x" * (200 << 20)
    start = time.perf_counter()
    with pytest.raises(ValidationError) as refused:
        with_(source=huge)
    assert time.perf_counter() - start < 2  # the refusal itself (pydantic's message, built below, reprs the input)
    assert "at most 524288" in str(refused.value)
    with pytest.raises(ValidationError, match="bytes; at most"):  # few characters, many bytes
        with_(source="é" * (MAX_SOURCE_BYTES // 2 + 1))


def test_defines_and_options_are_counted():
    with pytest.raises(ValidationError, match=f"at most {MAX_DEFINES}"):
        with_(defines={f"D{i}": i for i in range(MAX_DEFINES + 1)})
    with pytest.raises(ValidationError, match=f"at most {MAX_OPTIONS}"):
        with_(options=["-lineinfo"] * (MAX_OPTIONS + 1))
    with pytest.raises(ValidationError, match="characters"):
        with_(defines={"D" * 100: 1})


def test_a_huge_launch_expression_is_refused_when_the_candidate_is_built():
    start = time.perf_counter()
    with pytest.raises(ValidationError, match="at most 1000"):
        launch(["rows" + " + 1" * 2_500_000], [32])
    assert time.perf_counter() - start < 2


@pytest.mark.parametrize(("grid", "block", "shared", "words"), [
    ([1], [2048], 0, "2048 exceeds CUDA's limit of 1024"),
    ([1], [32, 32, 2], 0, "2048 threads; CUDA allows at most 1024"),
    ([1], [1, 1, 65], 0, "z = 65 exceeds CUDA's limit of 64"),
    ([1 << 31], [32], 0, "x = 2147483648 exceeds CUDA's limit of 2147483647"),
    ([1, 65536], [32], 0, "y = 65536 exceeds"),
    ([1, 1, "rows * 1024 + 1"], [32], 0, "z = 65537 exceeds"),
    ([1], [32], 227 * 1024 + 1, "dynamic shared memory exceed the 232448 bytes"),
    ([1], [32], "2 ** 40", "dynamic shared memory exceed"),
    (["10 ** 10 ** 10"], [32], 0, "too large"),
])
def test_launches_outside_cuda_limits_are_refused(grid, block, shared, words):
    with pytest.raises(CandidateError, match="launch configuration") as info:
        launch(grid, block, shared).launch_dims(SIZES)
    assert words in str(info.value)


def test_the_device_limit_on_shared_memory_is_used_when_known():
    cand = launch([1], [32], 100 * 1024)
    assert cand.launch_dims(SIZES) == ((1, 1, 1), (32, 1, 1), 100 * 1024)
    with pytest.raises(CandidateError, match="49152 bytes"):
        cand.launch_dims(SIZES, max_shared_bytes=48 * 1024)


def test_the_largest_launch_cuda_allows_is_accepted():
    dims = launch([(1 << 31) - 1, 65535, 65535], [1024]).launch_dims(SIZES)
    assert dims == (((1 << 31) - 1, 65535, 65535), (1024, 1, 1), 0)
