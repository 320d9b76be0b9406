"""Large ``.npy`` files uploaded through two pinned buffers in turn (cuda worker side).

An input or a reference of gigabytes went up as one copy from its memory map: pageable memory, so the driver staged
it through buffers of its own while this process took a page fault for every 4 KiB of the map (reduction's 3.2 GB
input: 0.8 s of its first evaluation on the H100, about 4 GB/s). Here the file is read with ``pread`` into one
pinned buffer while the other's copy to the device runs, so the file's reading and the copy overlap.

The staging buffers are pinned host memory, which a kernel can address: a caller uploading a secret (the reference)
asks for them to be zeroed before they are freed, and uploads only while no candidate code runs.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np
from cuda.bindings import driver as cu  # imported by worker processes only

CHUNK_BYTES = 32 << 20  # per staging buffer
DIRECT_BELOW = 4 << 20  # a smaller file that is not secret goes straight from its map (pinning costs more)


def upload_npy(dst: int, path: str, stream, ok, wipe: bool = False, chunk_bytes: int = CHUNK_BYTES) -> np.ndarray:
    """Copy the array in the ``.npy`` file ``path`` to device address ``dst`` in C order and wait for the copy;
    return the file's memory map (its dtype and shape). ``ok`` unpacks a cuda.bindings result (raising on an
    error)."""
    mapped = np.load(path, mmap_mode="r")
    nbytes = mapped.nbytes
    if nbytes == 0:
        return mapped
    if nbytes < min(DIRECT_BELOW, chunk_bytes) and not wipe:  # a secret never goes through the driver's own staging
        host = np.ascontiguousarray(mapped)
        ok(cu.cuMemcpyHtoDAsync(cu.CUdeviceptr(dst), host.ctypes.data, nbytes, stream), "upload")
        ok(cu.cuStreamSynchronize(stream), "upload")  # before `host` goes
        return mapped
    chunk = min(chunk_bytes, nbytes)
    hosts: list[int] = []
    events: list[object] = []
    try:
        for _ in range(1 if nbytes <= chunk else 2):
            hosts.append(int(ok(cu.cuMemHostAlloc(chunk, 0), "cuMemHostAlloc(upload staging)")))
            events.append(ok(cu.cuEventCreate(int(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)), "cuEventCreate(upload)"))
        if isinstance(mapped, np.memmap) and mapped.flags.c_contiguous:  # the file's bytes are the device's order
            _from_file(dst, path, int(mapped.offset), nbytes, hosts, events, chunk, stream, ok)
        else:  # Fortran order on disk: the device wants C order, so the bytes are rearranged on the way
            _from_array(dst, np.ascontiguousarray(mapped).reshape(-1).view(np.uint8), hosts, events, chunk, stream, ok)
        ok(cu.cuStreamSynchronize(stream), "upload")
    finally:
        cu.cuStreamSynchronize(stream)  # no copy may still read a buffer freed below (after an error too)
        for host in hosts:
            if wipe:
                ctypes.memset(host, 0, chunk)
            cu.cuMemFreeHost(host)
        for event in events:
            cu.cuEventDestroy(event)
    return mapped


def _from_file(dst: int, path: str, offset: int, nbytes: int, hosts: list[int], events: list, chunk: int,
               stream, ok) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        for index, start in enumerate(range(0, nbytes, chunk)):
            size = min(chunk, nbytes - start)
            host = _staged(index, hosts, events, ok)
            _read_exactly(fd, (ctypes.c_uint8 * size).from_address(host), offset + start, path)
            _send(dst + start, host, size, events[index % len(hosts)], stream, ok)
    finally:
        os.close(fd)


def _from_array(dst: int, flat: np.ndarray, hosts: list[int], events: list, chunk: int, stream, ok) -> None:
    for index, start in enumerate(range(0, flat.size, chunk)):
        size = min(chunk, flat.size - start)
        host = _staged(index, hosts, events, ok)
        np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(host))[:] = flat[start : start + size]
        _send(dst + start, host, size, events[index % len(hosts)], stream, ok)


def _staged(index: int, hosts: list[int], events: list, ok) -> int:
    """The staging buffer for chunk ``index``, once its previous copy is done (an event never recorded is done)."""
    which = index % len(hosts)
    ok(cu.cuEventSynchronize(events[which]), "upload staging free")
    return hosts[which]


def _send(dst: int, host: int, size: int, event, stream, ok) -> None:
    ok(cu.cuMemcpyHtoDAsync(cu.CUdeviceptr(dst), host, size, stream), "upload")
    ok(cu.cuEventRecord(event, stream), "cuEventRecord(upload)")


def _read_exactly(fd: int, buffer, offset: int, path: str) -> None:
    view = memoryview(buffer).cast("B")
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done:]], offset + done)
        if got <= 0:
            raise ValueError(f"{path} ended {len(view) - done} bytes early")
        done += got
