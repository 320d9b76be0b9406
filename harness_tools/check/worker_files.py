"""Files a worker wrote, read without trusting it: the worker runs candidate code and may swap them for links."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

import numpy as np


def open_worker_file(path: str | Path | None, root: Path) -> BinaryIO | None:
    """A file a worker wrote, opened for reading, or None when it is not a regular file inside ``root``.

    The worker runs candidate code, which may swap its files for links at any moment: the last component
    is opened without following a link, and the file actually opened (its /proc/self/fd link) must lie
    inside ``root``; everything after that reads the opened file, never the path again."""
    if not path:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO: no wait
    except OSError:
        return None
    handle = os.fdopen(fd, "rb")
    try:
        proc = Path(f"/proc/self/fd/{fd}")
        real = Path(os.readlink(proc)) if proc.is_symlink() else Path(os.path.realpath(path))
        if stat.S_ISREG(os.fstat(fd).st_mode) and real.is_relative_to(root.resolve()):
            return handle
    except OSError:
        pass
    handle.close()
    return None


def load_output(handle: BinaryIO) -> np.ndarray:
    """A big output is mapped, not copied: it is read once, straight from the (usually in-memory) file."""
    with handle:
        if os.fstat(handle.fileno()).st_size > (1 << 20) and Path(f"/proc/self/fd/{handle.fileno()}").exists():
            return np.load(f"/proc/self/fd/{handle.fileno()}", mmap_mode="r")  # the opened file, not the path
        return np.load(handle)
