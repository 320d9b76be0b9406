"""Where the cuda executor puts a case's buffers, and the patterns around them (worker side).

Two placements (:data:`harness_tools.backends.contract.Placement`):

- ``tail``: ``cuMemAlloc(n + TAIL_BYTES)``, so the data keeps cudaMalloc's 256-byte alignment (what timed
  kernels see in production) and is followed by ``TAIL_BYTES`` of tail pattern. A read past the end stays
  inside the allocation: it sees the pattern and never faults.
- ``guard``: the driver's virtual memory management. A range of ``g + M + g`` bytes is reserved (``g`` the
  allocation granularity, 2 MiB on an H200) and only the middle ``M = round_up(n, g)`` is mapped; the data
  ends at most 15 bytes before the end of the mapping (its start stays 16-byte aligned for vector loads),
  so the first access past the end (or, where the data fills the mapping, before the start) touches an
  unmapped page: CUDA_ERROR_ILLEGAL_ADDRESS, a sticky error the worker restarts after. The front pad
  (up to ``g`` bytes) and the < 16 byte slack hold the tail pattern and are checked like a tail. Each
  buffer costs at least one granule of device memory and a few driver calls (about 0.5 ms per case on an
  H200): validation cases only.

After a launch :meth:`BufferPlacer.intact` checks every buffer's surroundings: tails and slack (at most
``TAIL_BYTES``) are downloaded and compared; a front pad (up to 2 MiB) is hashed on the device with the
executor's digest kernel and compared with the digest of the same pattern, taken once per (pattern, size)
right after the first such pad was filled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from cuda.bindings import driver as cu  # imported by worker processes only

from harness_tools.backends.contract import GUARD_ALIGN, TAIL_BYTES, Placement, tail_pattern
from harness_tools.backends.cuda.device_kernels import DeviceKernels


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def _ptr(address: int):
    return cu.CUdeviceptr(address)


@dataclass
class DeviceBuffer:
    """One buffer: ``data`` is what the kernel gets; ``pad`` and ``tails`` (address, bytes) hold the tail pattern."""

    data: int
    nbytes: int
    tails: list[tuple[int, int]]
    pad: tuple[int, int] = (0, 0)
    undo: list[Callable[[], object]] = field(default_factory=list)  # run last to first by free()

    def free(self) -> None:
        while self.undo:
            self.undo.pop()()


class BufferPlacer:
    """Allocates buffers in either placement on one device; fills and checks their surroundings on the
    stream of ``kernels`` (whose digest kernel hashes front pads)."""

    MAX_PAD_DIGESTS = 4096

    def __init__(self, ordinal: int, kernels: DeviceKernels, ok):
        self.kernels, self.stream, self._ok = kernels, kernels.stream, ok
        self.pad_digests: dict[tuple[int, int], int] = {}
        attr = cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
        device = ok(cu.cuDeviceGet(ordinal), "cuDeviceGet")
        self.vmm = bool(ok(cu.cuDeviceGetAttribute(attr, device), "cuDeviceGetAttribute(VMM)"))
        self.prop = cu.CUmemAllocationProp()
        self.prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        self.prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        self.prop.location.id = ordinal
        self.access = cu.CUmemAccessDesc()
        self.access.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        self.access.location.id = ordinal
        self.access.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        self.granularity = int(ok(cu.cuMemGetAllocationGranularity(
            self.prop, cu.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            "cuMemGetAllocationGranularity")) if self.vmm else 0

    def allocate(self, nbytes: int, placement: Placement, name: str) -> DeviceBuffer:
        """A buffer of ``nbytes``; a device without virtual memory management gets the tail placement."""
        if placement == "guard" and self.vmm:
            return self._guarded(nbytes, name)
        base = int(self._ok(cu.cuMemAlloc(nbytes + TAIL_BYTES), f"cuMemAlloc({name})"))
        return DeviceBuffer(base, nbytes, [(base + nbytes, TAIL_BYTES)], undo=[lambda: cu.cuMemFree(_ptr(base))])

    def _guarded(self, nbytes: int, name: str) -> DeviceBuffer:
        ok, g = self._ok, self.granularity
        span = _round_up(nbytes, GUARD_ALIGN)
        mapped = max(_round_up(span, g), g)
        reserved = mapped + 2 * g
        base = int(ok(cu.cuMemAddressReserve(reserved, g, _ptr(0), 0), f"cuMemAddressReserve({name})"))
        buf = DeviceBuffer(0, nbytes, [], undo=[lambda: cu.cuMemAddressFree(_ptr(base), reserved)])
        try:
            handle = ok(cu.cuMemCreate(mapped, self.prop, 0), f"cuMemCreate({name})")
            try:
                ok(cu.cuMemMap(_ptr(base + g), mapped, 0, handle, 0), f"cuMemMap({name})")
            finally:
                cu.cuMemRelease(handle)  # the mapping keeps the memory; unmapping then frees it
            buf.undo.append(lambda: cu.cuMemUnmap(_ptr(base + g), mapped))
            ok(cu.cuMemSetAccess(_ptr(base + g), mapped, [self.access], 1), f"cuMemSetAccess({name})")
        except BaseException:
            buf.free()
            raise
        buf.data = base + g + mapped - span
        buf.pad, buf.tails = (base + g, mapped - span), [(buf.data + nbytes, span - nbytes)]
        return buf

    def fill(self, buf: DeviceBuffer, word: int) -> None:
        """Enqueue the pattern into the surroundings of ``buf``; digest the first pad of each (pattern, size)."""
        for address, size in [buf.pad, *buf.tails]:
            if not size:
                continue
            if address % 4 == 0 and size % 4 == 0:
                self._ok(cu.cuMemsetD32Async(_ptr(address), word, size // 4, self.stream), "fill tail")
            else:  # a float16 or byte buffer's slack or tail: from pageable memory, staged before this returns
                host = tail_pattern(word, size)
                self._ok(cu.cuMemcpyHtoDAsync(_ptr(address), host.ctypes.data, size, self.stream), "fill tail")
        key = (word, buf.pad[1])
        if buf.pad[1] and key not in self.pad_digests:
            if len(self.pad_digests) >= self.MAX_PAD_DIGESTS:
                self.pad_digests.clear()
            self.pad_digests[key] = self.kernels.digest(_ptr(buf.pad[0]), buf.pad[1])  # after the fill: same stream

    def intact(self, buf: DeviceBuffer, word: int) -> bool:
        """The surroundings of ``buf`` still hold ``word`` tiled from the start of each."""
        address, size = buf.pad
        if size and self.kernels.digest(_ptr(address), size) != self.pad_digests.get((word, size)):
            return False
        for address, size in buf.tails:
            if not size:
                continue
            got = np.empty(size, dtype=np.uint8)
            self._ok(cu.cuMemcpyDtoH(got.ctypes.data, _ptr(address), size), "download tail")
            if not np.array_equal(got, tail_pattern(word, size)):
                return False
        return True
