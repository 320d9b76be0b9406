"""Read a cubin (CUDA ELF) directly: kernel entry points, registers, stack frame, static shared memory.

The ptxas ``-v`` report in NVRTC's log is not always there (NVRTC 13.0 leaves the log empty for a
source without any ``#include``), so the facts that matter are read from the binary itself:

* entry points: sections ``.nv.info.<kernel>`` (one per ``__global__`` function);
* registers and frame size: records in the ``.nv.info`` section — ``EIATTR_REGCOUNT`` (0x2f) and
  ``EIATTR_FRAME_SIZE`` (0x11), each holding a symbol index and a value;
* static shared memory: the size of section ``.nv.shared.<kernel>``, less the 1 KiB that sm_80 and
  newer reserve per block (present as section ``.nv.shared.reserved.0`` and counted in that size);
* parameter sizes: ``EIATTR_KPARAM_INFO`` (0x17) records in ``.nv.info.<kernel>``, 12 bytes each: a u32
  index, a u16 ordinal, a u16 offset and u32 flags whose bits 18-31 hold the size in bytes (checked on
  kernels with 2-, 4- and 8-byte scalars and pointers compiled by NVRTC 13).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

RESERVED_SHARED_BYTES = 1024
EIATTR_FRAME_SIZE = 0x11
EIATTR_REGCOUNT = 0x2F
EIATTR_KPARAM_INFO = 0x17
_EIFMT_SIZES = {0x01: 0, 0x02: 1, 0x03: 2}  # NVAL, BVAL, HVAL; 0x04 (SVAL) carries its own size


@dataclass
class KernelFacts:
    registers: int | None = None
    frame_bytes: int | None = None
    static_shared_bytes: int = 0
    param_sizes: list[int] | None = None  # bytes per parameter, in declaration order


@dataclass
class CubinFacts:
    kernels: dict[str, KernelFacts] = field(default_factory=dict)


def read_cubin(data: bytes) -> CubinFacts:
    """Facts per kernel; an unreadable image gives empty facts rather than an exception."""
    try:
        return _read(data)
    except (struct.error, IndexError, ValueError):
        return CubinFacts()


def _read(data: bytes) -> CubinFacts:
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return CubinFacts()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_off = sections[shstrndx][4]

    def name(offset: int) -> str:
        end = data.index(b"\0", names_off + offset)
        return data[names_off + offset : end].decode(errors="replace")

    named = [(name(s[0]), s) for s in sections]
    facts = CubinFacts()
    for sec_name, _ in named:
        if sec_name.startswith(".nv.info."):
            facts.kernels[sec_name[len(".nv.info."):]] = KernelFacts()
    reserved = RESERVED_SHARED_BYTES if any(n.startswith(".nv.shared.reserved") for n, _ in named) else 0
    for sec_name, s in named:
        if sec_name.startswith(".nv.info.") and sec_name[len(".nv.info."):] in facts.kernels:
            facts.kernels[sec_name[len(".nv.info."):]].param_sizes = _param_sizes(data[s[4] : s[4] + s[5]])
        if sec_name.startswith(".nv.shared.") and sec_name[len(".nv.shared."):] in facts.kernels:
            facts.kernels[sec_name[len(".nv.shared."):]].static_shared_bytes = max(0, s[5] - reserved)
    symbols = _symbol_names(data, named)
    info = next((s for n, s in named if n == ".nv.info"), None)
    if info is not None:
        _read_info(data[info[4] : info[4] + info[5]], symbols, facts)
    return facts


def _symbol_names(data: bytes, named) -> list[str]:
    symtab = next((s for n, s in named if n == ".symtab"), None)
    if symtab is None:
        return []
    strtab = named[symtab[6]][1]  # sh_link: the string table of the symbol table
    out = []
    for off in range(symtab[4], symtab[4] + symtab[5], 24):
        st_name = struct.unpack_from("<I", data, off)[0]
        start = strtab[4] + st_name
        out.append(data[start : data.index(b"\0", start)].decode(errors="replace"))
    return out


def _records(blob: bytes):
    """(attribute, value bytes) of each record of an ``.nv.info`` section."""
    pos = 0
    while pos + 2 <= len(blob):
        fmt, attr = blob[pos], blob[pos + 1]
        pos += 2
        if fmt == 0x04:
            size = struct.unpack_from("<H", blob, pos)[0]
            pos += 2
        else:
            size = _EIFMT_SIZES.get(fmt, 0)
        yield attr, blob[pos : pos + size]
        pos += size


def _param_sizes(blob: bytes) -> list[int] | None:
    params = {}
    for attr, value in _records(blob):
        if attr == EIATTR_KPARAM_INFO and len(value) == 12:
            _, ordinal, _, flags = struct.unpack("<IHHI", value)
            params[ordinal] = (flags >> 18) & 0x3FFF
    if sorted(params) != list(range(len(params))):
        return None  # not the layout we know: no claim rather than a wrong one
    return [params[i] for i in range(len(params))]


def _read_info(blob: bytes, symbols: list[str], facts: CubinFacts) -> None:
    for attr, value in _records(blob):
        if attr in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE) and len(value) == 8:
            index, amount = struct.unpack("<II", value)
            kernel = facts.kernels.get(symbols[index]) if index < len(symbols) else None
            if kernel is not None:
                if attr == EIATTR_REGCOUNT:
                    kernel.registers = amount
                else:
                    kernel.frame_bytes = amount
