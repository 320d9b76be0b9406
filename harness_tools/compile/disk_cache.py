"""Compile results on disk, shared by every process of this user: server restarts, ``--run`` continuations, the CLI.

One file per key (the digest of NVRTC's version, the target, the launched kernels, the checked source, the options
and the engine's own headers), written whole to a temporary name and renamed into place, so a reader sees either
nothing or a complete entry, whichever process wrote it. A file that does not parse, or whose key does not match
its name, is a miss and is removed. The folder is bounded (``CUDAOPT_CACHE_MB``, default 1024): past the bound
the least recently used entries go (a hit refreshes an entry's time), under a lock file so two processes do not
evict at once. The cubins here are run by the cuda worker, so only the engine's parent process writes them (the
jailed compiler and workers never see the folder), and the folder is created private to the user.

It lives in ``cubin/`` of the engine's cache folder (``$CUDAOPT_CACHE_DIR``, default ``~/.cache/cudaopt``, beside the
cpu backend's ``cpu/``); ``CUDAOPT_CUBIN_CACHE`` places it elsewhere, ``CUDAOPT_CUBIN_CACHE=off`` turns it off.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import logging
import os
import tempfile
from pathlib import Path

from pydantic import ValidationError

from harness_tools.compile.nvrtc import CompileResult

log = logging.getLogger(__name__)

FORMAT = 1  # of an entry file; a change makes older entries misses
DEFAULT_MAX_MB = 1024
EVICT_EVERY = 32  # stores between two scans of the folder (the first store of a process scans too)
_stores = 0
_trusted: dict[Path, bool] = {}


def cache_dir() -> Path | None:
    """The folder in use, or None when the cache is off."""
    given = os.environ.get("CUDAOPT_CUBIN_CACHE", "").strip()
    if given.lower() in ("off", "0", "none", "false"):
        return None
    if given:
        return Path(given)
    return Path(os.environ.get("CUDAOPT_CACHE_DIR") or Path.home() / ".cache" / "cudaopt") / "cubin"


def max_bytes() -> int:
    try:
        return max(0, int(float(os.environ.get("CUDAOPT_CACHE_MB", DEFAULT_MAX_MB)) * (1 << 20)))
    except ValueError:
        return DEFAULT_MAX_MB << 20


def load(key: str) -> CompileResult | None:
    """The stored result for ``key``, or None (absent, off, unreadable or damaged: a damaged one is removed)."""
    path = _entry(key)
    if path is None:
        return None
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    try:
        record = json.loads(raw)
        if record.get("format") != FORMAT or record.get("key") != key:
            raise ValueError("another format or key")
        result = CompileResult.model_validate(record["result"])
        result.full_log = record["full_log"]
        result.cubin = base64.b64decode(record["cubin"], validate=True) if record["cubin"] is not None else None
    except (ValueError, KeyError, TypeError, AttributeError, ValidationError):
        log.warning("compile cache: %s is damaged; removed", path.name)
        path.unlink(missing_ok=True)
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # recently used: the last to be evicted
    return result


def store(key: str, result: CompileResult) -> None:
    """Keep ``result`` under ``key`` (best effort: a full disk or a read-only folder only costs the cache)."""
    path = _entry(key)
    if path is None:
        return
    record = {"format": FORMAT, "key": key, "result": result.model_dump(exclude={"cached"}),
              "full_log": result.full_log,
              "cubin": base64.b64encode(result.cubin).decode() if result.cubin is not None else None}
    data = json.dumps(record).encode()
    if len(data) > max_bytes():
        return
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as exc:
        log.warning("compile cache: could not store an entry (%s)", exc)
        return
    global _stores
    if _stores % EVICT_EVERY == 0:
        _evict(path.parent.parent)
    _stores += 1


def _entry(key: str) -> Path | None:
    root = cache_dir()
    if root is None or not key.isalnum() or not _private(root):
        return None
    return root / key[:2] / f"{key}.json"


def _private(root: Path) -> bool:
    """Whether ``root`` is ours alone (created so if missing): entries from a folder others may write are never
    loaded, since the cuda worker would run their cubins."""
    if root not in _trusted:
        try:
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
            stat = root.stat()
            _trusted[root] = stat.st_uid == os.getuid() and not stat.st_mode & 0o022
        except OSError:
            _trusted[root] = False
        if not _trusted[root]:
            log.warning("compile cache: %s is not a folder private to this user; the cache is off", root)
    return _trusted[root]


def _evict(root: Path) -> None:
    """Remove the least recently used entries until the folder is within its bound."""
    limit = max_bytes()
    try:
        with open(root / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            entries = []
            for path in root.glob("??/*.json"):
                with contextlib.suppress(OSError):  # another process may have just removed it
                    stat = path.stat()
                    entries.append((stat.st_mtime, stat.st_size, path))
            total = sum(size for _, size, _ in entries)
            for _, size, path in sorted(entries, key=lambda e: e[0]):
                if total <= limit:
                    break
                path.unlink(missing_ok=True)
                total -= size
    except OSError as exc:
        log.warning("compile cache: could not bound the folder (%s)", exc)
