"""What a task folder holds, as one digest: the key under which its drawn inputs and its oracle are kept.

A run works on its own copy of the task folder (``results/run-XXX/task``), so a path names the copy, not what
is in it; the digest names the content. Inputs drawn, or an oracle computed, for the task before its run was
created (``cudaopt optimize`` draws them while it starts) are then found by the run's evaluations, and a folder
edited in place gets a new key instead of its old outputs. Every file counts, links by their target text;
``__pycache__`` and ``*.pyc`` do not (a run's copy leaves them out). The content is hashed once per state of the
folder's listing (names, sizes, modification times in ns), so asking again costs a walk of the folder; an edit
that kept a file's size and set its modification time back to the nanosecond would go unseen (within a process:
keys are never stored).
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

CHUNK = 1 << 20
_known: dict[tuple, str] = {}  # (folder, listing) -> digest
_guard = threading.Lock()


def folder_digest(folder: Path) -> str:
    root = Path(folder).resolve()
    listing = tuple(_listing(root))
    with _guard:
        known = _known.get((str(root), listing))
    if known is not None:
        return known
    digest = hashlib.sha256()
    for relative, _size, _mtime, is_link in listing:
        path = root / relative
        digest.update(f"{relative}\0{'link' if is_link else 'file'}\0".encode())
        if is_link:
            digest.update(os.readlink(path).encode())
            continue
        with open(path, "rb") as f:
            for block in iter(lambda f=f: f.read(CHUNK), b""):
                digest.update(block)
    value = digest.hexdigest()
    with _guard:
        _known[(str(root), listing)] = value
    return value


def _listing(root: Path) -> list[tuple[str, int, int, bool]]:
    """(relative path, size, mtime in ns, is a link) of every file under ``root``, sorted; links not followed.

    Asked for every case of every evaluation: one scandir per folder, whose entries carry what lstat says."""
    entries: list[tuple[str, int, int, bool]] = []
    pending = [("", str(root))]
    while pending:
        prefix, directory = pending.pop()
        with os.scandir(directory) as listing:
            for entry in listing:
                if entry.name == "__pycache__" or entry.name.endswith(".pyc"):
                    continue
                relative = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    pending.append((relative + "/", entry.path))
                    continue
                info = entry.stat(follow_symlinks=False)
                entries.append((relative, info.st_size, info.st_mtime_ns, entry.is_symlink()))
    return sorted(entries)
