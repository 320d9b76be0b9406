"""The secrets a hostile candidate must never reach, and how a test looks for them in everything it got back."""

from __future__ import annotations

import json
import os
import secrets as _random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


class Hole(AssertionError):
    """The assertion that shows a known hole (the xfail tests expect exactly this, nothing else)."""


def hole(condition: bool, message: str) -> None:
    if not condition:
        raise Hole(message)


@dataclass
class Secrets:
    folder: Path  # a host folder holding the secret file; nothing may appear here
    file: Path
    value: str
    mcp_token: str
    api_key: str

    def env(self) -> dict[str, str]:
        return {"CUDAOPT_MCP_TOKEN": self.mcp_token, "OPENAI_API_KEY": self.api_key}

    def values(self) -> dict[str, str]:
        return {"secret file": self.value, "CUDAOPT_MCP_TOKEN": self.mcp_token, "OPENAI_API_KEY": self.api_key}


def make_secrets(folder: Path) -> Secrets:
    folder.mkdir(parents=True, exist_ok=True)
    value = "jx-secret-" + _random.token_hex(16)
    file = folder / "secret.txt"
    file.write_text(value + "\n")
    return Secrets(folder=folder, file=file, value=value, mcp_token="jx-token-" + _random.token_hex(16),
                   api_key="sk-jx-" + _random.token_hex(20))


def _blobs(item) -> Iterable[bytes]:
    if item is None:
        return
    if isinstance(item, bytes):
        yield item
    elif isinstance(item, str):
        yield item.encode(errors="replace")
    elif isinstance(item, (list, tuple)):
        for x in item:
            yield from _blobs(x)
    else:
        yield json.dumps(item, default=str).encode()


def secret_hits(secrets: Secrets, *items, folders: Iterable[Path] = (), files: Iterable[Path] = ()) -> list[str]:
    """Where any secret value shows up: in ``items`` (responses, decoded outputs), in any file under
    ``folders`` (links followed) or in ``files``; also every symbolic link under ``folders``."""
    needles = {name: value.encode() for name, value in secrets.values().items()}
    hits = []
    for index, blob in enumerate(b for item in items for b in _blobs(item)):
        for name, needle in needles.items():
            if needle in blob:
                hits.append(f"{name} in response/output #{index}")
    paths = [Path(f) for f in files]
    for folder in folders:
        folder = Path(folder)
        if not folder.exists():
            continue
        for dirpath, dirnames, filenames in os.walk(folder):
            for name in dirnames + filenames:
                path = Path(dirpath) / name
                if path.is_symlink():
                    hits.append(f"symbolic link {path} -> {os.readlink(path)}")
            paths += [Path(dirpath) / n for n in filenames]
    for path in paths:
        if path == secrets.file:
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        for name, needle in needles.items():
            if needle in data:
                hits.append(f"{name} in file {path}")
    return hits
