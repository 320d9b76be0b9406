"""Input files, drawn and saved once per (task, case, seed) and reused while they stay cached.

A tuning run evaluates many candidates on one seed, and big cases take longer to draw and write
(hundreds of MB) than the kernel takes to run. The worker only reads these files; they live in a
per-process folder on /dev/shm (when it has room), bounded in bytes, removed at exit, and folders
left behind by processes that died are swept when the next one starts.

That per-process folder (:func:`session_root`) has two parts, which is how the jail sees them: ``inputs/``
(read-only inside every jail: a kernel must not change the data the oracle is computed from) and
``scratch/`` (the only folder a worker may write: case outputs, launch requests, reports); ``oracle/``, which no jail
sees, passes the reference process's outputs (:func:`oracle_root`).
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
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

import numpy as np

from harness_tools.run.keyed_locks import KeyedLocks

MIN_CACHE_BYTES = 2 << 30
PREFIX = "cudaopt-inputs-"


def fast_tmp_dir() -> str | None:
    """Where scratch inputs and outputs go: /dev/shm when it has room (they can be hundreds of MB)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and shutil.disk_usage(shm).free > (8 << 30) else None


_SESSION: list[Path] = []
_SESSION_LOCK = threading.Lock()


def session_root() -> Path:
    """This process's folder on the fast scratch filesystem (``inputs/`` and ``scratch/``), removed at exit."""
    with _SESSION_LOCK:
        if not _SESSION or not _SESSION[0].is_dir():
            base = fast_tmp_dir() or tempfile.gettempdir()
            sweep_dead_folders(Path(base))
            root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=base))
            for part in ("inputs", "scratch"):
                (root / part).mkdir()
            atexit.register(shutil.rmtree, root, True)
            _SESSION[:] = [root]
        return _SESSION[0]


def inputs_root() -> Path:
    return session_root() / "inputs"


def scratch_root() -> Path:
    return session_root() / "scratch"


def oracle_root() -> Path:
    """A third part, which no jail is given: the reference process's outputs pass through it (a candidate's worker
    writes ``scratch/``, and must not reach the oracle on its way)."""
    path = session_root() / "oracle"
    path.mkdir(exist_ok=True)
    return path


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """A temporary folder under :func:`scratch_root`, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=scratch_root()))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def default_cache_bytes() -> int:
    """The bound of the kept input (and reference) files: ``CUDAOPT_INPUT_CACHE_MB``, else a quarter of the memory
    available when first asked, and at least 2 GiB. A bound below one case's inputs evicted them on every
    evaluation (the validation cases' new files pushed out the 6.4 GB performance input, redrawn each time)."""
    text = os.environ.get("CUDAOPT_INPUT_CACHE_MB")
    if text:
        try:
            return max(0, int(text)) << 20
        except ValueError:
            raise ValueError(f"CUDAOPT_INPUT_CACHE_MB={text!r} is not a whole number of MiB") from None
    available = 0
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) << 10
    return max(MIN_CACHE_BYTES, available // 4)


class ReadOnFirstUse(Mapping[str, np.ndarray]):
    """Named arrays, each made by ``read(name)`` when first asked for: an evaluation whose oracle is cached and whose
    worker reads the kept files itself needs none of them (reading each back cost a third of a millisecond)."""

    def __init__(self, names: Iterable[str], read: Callable[[str], np.ndarray]):
        self._names, self._read, self._arrays = list(names), read, {}

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._arrays:
            if name not in self._names:
                raise KeyError(name)
            self._arrays[name] = self._read(name)
        return self._arrays[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


Allocate = Callable[[str, tuple[int, ...], np.dtype], np.ndarray]
"""(buffer name, shape, storage dtype) -> an array to fill, mapped from that buffer's file in the cache."""


class InputFiles:
    def __init__(self, max_bytes: int | None = None):
        self.max_bytes = default_cache_bytes() if max_bytes is None else max_bytes
        self._entries: OrderedDict[tuple, tuple[dict[str, Path], int]] = OrderedDict()
        self._lock = threading.Lock()
        self._drawing = KeyedLocks()  # a key being drawn is drawn once; a second caller waits for it

    def get(self, key: tuple, draw: Callable[[Allocate], dict[str, np.ndarray]]
            ) -> tuple[Mapping[str, np.ndarray], dict[str, Path]]:
        """(arrays, files) for ``key``; arrays of a cached entry are memory-mapped from its files when first read.
        ``draw`` may fill a large array straight in its file (``allocate``): no second copy of it is written."""
        with self._drawing.held(key):
            hit = self.cached(key)
            if hit is not None:
                return ReadOnFirstUse(hit, lambda name: np.load(hit[name], mmap_mode="r")), hit
            arrays: dict[str, np.ndarray] = {}

            def save(folder: Path) -> dict[str, Path]:
                mapped: set[str] = set()

                def allocate(name: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
                    mapped.add(name)
                    return np.lib.format.open_memmap(folder / f"in_{name}.npy", mode="w+", dtype=dtype, shape=shape)
                arrays.update(draw(allocate))
                files = {name: folder / f"in_{name}.npy" for name in arrays}
                for name, arr in arrays.items():
                    if name not in mapped:  # the caller gives what np.load reads back (raw records for fp8/bf16)
                        np.save(files[name], arr)
                return files
            return arrays, self.store(key, save)

    def cached_or_stored(self, key: tuple, write: Callable[[Path], dict[str, Path]]) -> dict[str, Path]:
        """The kept files of ``key``, else those ``write`` makes (:meth:`store`); made once while another waits."""
        with self._drawing.held(key):
            hit = self.cached(key)
            return hit if hit is not None else self.store(key, write)

    def being_made(self, key: tuple) -> bool:
        """Whether the files of ``key`` are not kept yet but being made now (by another thread)."""
        return self._drawing.busy(key) and self.cached(key) is None

    def cached(self, key: tuple) -> dict[str, Path] | None:
        """The files of ``key`` while they are kept, or None."""
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and all(p.is_file() for p in hit[0].values()):
                self._entries.move_to_end(key)
                return dict(hit[0])
        return None

    def store(self, key: tuple, write: Callable[[Path], dict[str, Path]]) -> dict[str, Path]:
        """Keep the files ``write`` puts into a fresh folder (it returns them by name) under ``key``."""
        folder = Path(tempfile.mkdtemp(dir=self._folder()))
        try:
            files = write(folder)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        size = sum(p.stat().st_size for p in files.values())
        with self._lock:
            self._entries[key] = (files, size)
            self._evict()
        return files

    def _evict(self) -> None:
        # the newest entry always stays: its files are about to be read
        while len(self._entries) > 1 and sum(size for _, size in self._entries.values()) > self.max_bytes:
            _, (files, _) = self._entries.popitem(last=False)
            for folder in {path.parent for path in files.values()}:
                shutil.rmtree(folder, ignore_errors=True)

    def _folder(self) -> Path:
        return inputs_root()


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
