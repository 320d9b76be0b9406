"""Input files, drawn and saved once per (task, case, seed) and reused while they stay cached.

A tuning run evaluates many candidates on one seed, and big cases take longer to draw and write
(hundreds of MB) than the kernel takes to run. The worker only reads these files; they live in a
per-process folder on /dev/shm (when it has room), bounded in bytes, removed at exit, and folders
left behind by processes that died are swept when the next one starts.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

CACHE_BYTES = 2 << 30
PREFIX = "cudaopt-inputs-"


def fast_tmp_dir() -> str | None:
    """Where scratch inputs and outputs go: /dev/shm when it has room (they can be hundreds of MB)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and shutil.disk_usage(shm).free > (8 << 30) else None


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """A temporary folder on the fast scratch filesystem, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=fast_tmp_dir()))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class InputFiles:
    def __init__(self, max_bytes: int = CACHE_BYTES):
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple, tuple[dict[str, Path], int]] = OrderedDict()
        self._lock = threading.Lock()
        self._root: Path | None = None

    def get(self, key: tuple, draw: Callable[[], dict[str, np.ndarray]]) -> tuple[dict[str, np.ndarray], dict[str, Path]]:
        """(arrays, files) for ``key``; arrays of a cached entry are memory-mapped from its files."""
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and all(p.is_file() for p in hit[0].values()):
                self._entries.move_to_end(key)
                return {n: np.load(p, mmap_mode="r") for n, p in hit[0].items()}, dict(hit[0])
        arrays = draw()
        folder = Path(tempfile.mkdtemp(dir=self._folder()))
        files = {}
        for name, arr in arrays.items():
            files[name] = folder / f"in_{name}.npy"
            np.save(files[name], arr)
        size = sum(a.nbytes for a in arrays.values())
        with self._lock:
            self._entries[key] = (files, size)
            self._evict()
        return arrays, files

    def _evict(self) -> None:
        # the newest entry always stays: its files are about to be read
        while len(self._entries) > 1 and sum(size for _, size in self._entries.values()) > self.max_bytes:
            _, (files, _) = self._entries.popitem(last=False)
            for folder in {path.parent for path in files.values()}:
                shutil.rmtree(folder, ignore_errors=True)

    def _folder(self) -> Path:
        with self._lock:
            if self._root is None or not self._root.is_dir():
                base = fast_tmp_dir() or tempfile.gettempdir()
                sweep_dead_folders(Path(base))
                self._root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=base))
                atexit.register(shutil.rmtree, self._root, True)
            return self._root


def sweep_dead_folders(base: Path, min_age_s: float = 3600.0) -> None:
    """Remove input folders of processes that no longer exist (killed without running atexit). Only
    folders untouched for an hour: /dev/shm may be shared with other PID namespaces (containers), where a
    live process's pid is not visible here."""
    now = time.time()
    for folder in base.glob(f"{PREFIX}*"):
        match = re.match(rf"{PREFIX}(\d+)-", folder.name)
        try:
            stale = now - folder.stat().st_mtime > min_age_s
        except OSError:
            continue
        if match and stale and not Path(f"/proc/{match.group(1)}").exists():
            shutil.rmtree(folder, ignore_errors=True)


CACHE = InputFiles()
