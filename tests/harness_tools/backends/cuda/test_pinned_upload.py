"""Large .npy files reach the device byte for byte through the two pinned staging buffers (on the GPU)."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def executor():
    from harness_tools.backends.cuda.executor import CudaExecutor

    return CudaExecutor(0)


def _round_trip(executor, path, nbytes: int, chunk: int, wipe: bool = False) -> bytes:
    from cuda.bindings import driver as cu

    from harness_tools.backends.cuda.executor import _ok
    from harness_tools.backends.cuda.pinned_upload import upload_npy

    ptr = _ok(cu.cuMemAlloc(max(nbytes, 1)), "alloc")
    try:
        upload_npy(int(ptr), str(path), executor.stream, _ok, wipe=wipe, chunk_bytes=chunk)
        back = np.empty(nbytes, np.uint8)
        if nbytes:
            _ok(cu.cuMemcpyDtoH(back.ctypes.data, ptr, nbytes), "download")
        return back.tobytes()
    finally:
        cu.cuMemFree(ptr)


@pytest.mark.parametrize("elements", [0, 1, 1024, 1025, 2560 + 7])  # none, one chunk, exactly two, more, odd tail
@pytest.mark.parametrize("wipe", [False, True])  # straight from the map when small, or always staged (a secret)
def test_every_chunking_of_a_file_arrives_byte_for_byte(executor, tmp_path, elements, wipe):
    array = np.random.default_rng(elements).standard_normal(elements).astype(np.float32)
    np.save(tmp_path / "a.npy", array)
    assert _round_trip(executor, tmp_path / "a.npy", array.nbytes, chunk=4096, wipe=wipe) == array.tobytes()


def test_a_fortran_order_file_arrives_in_c_order_and_a_secret_ones_staging_is_wiped_without_harm(executor, tmp_path):
    array = np.asfortranarray(np.arange(3000 * 7, dtype=np.float64).reshape(3000, 7))
    np.save(tmp_path / "f.npy", array)
    assert _round_trip(executor, tmp_path / "f.npy", array.nbytes, chunk=8192, wipe=True) == np.ascontiguousarray(array).tobytes()


def test_a_file_shorter_than_its_header_says_is_an_error_not_a_partial_upload(executor, tmp_path):
    array = np.ones(4096, np.float32)
    np.save(tmp_path / "cut.npy", array)
    data = (tmp_path / "cut.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(data[:-100])
    with pytest.raises(ValueError):  # numpy's memory map refuses it first, or our read finds the file short
        _round_trip(executor, tmp_path / "cut.npy", array.nbytes, chunk=4096)


def test_a_large_file_goes_through_the_default_chunks_intact(executor, tmp_path):
    array = np.random.default_rng(9).integers(0, 255, (80 << 20) + 13, dtype=np.uint8)  # 2.5 default chunks
    np.save(tmp_path / "big.npy", array)
    from harness_tools.backends.cuda.pinned_upload import CHUNK_BYTES

    assert _round_trip(executor, tmp_path / "big.npy", array.nbytes, chunk=CHUNK_BYTES) == array.tobytes()
