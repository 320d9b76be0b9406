"""A fault's kernel.cu line: the worker reports where in the kernel's library the code was ("[code at X.so+0x58:
transpose+0x58]"); addr2line reads the library's debug lines (kernels are built with -g and a ``#line`` for
kernel.cu) and the message gains "kernel.cu line N". Without addr2line the message stays as it was."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

_CODE = re.compile(r"\[code at ([0-9a-f]+\.so)\+0x([0-9a-f]+)")


def with_source_line(message: str | None, library: Path) -> str | None:
    """``message`` with the kernel.cu line of its code location added, when it has one in ``library``."""
    match = _CODE.search(message or "")
    tool = shutil.which("addr2line")
    if not match or match.group(1) != library.name or tool is None:
        return message
    try:
        out = subprocess.run([tool, "-e", str(library), "-i", f"0x{match.group(2)}"], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return message
    lines = [m.group(1) for m in re.finditer(r"(?:^|/)kernel\.cu:(\d+)", out.stdout, re.M)]
    if not lines:
        return message
    return message.replace(match.group(0), f"[kernel.cu line {lines[0]}; code at {match.group(1)}+0x{match.group(2)}", 1)
