"""Identifiers of the CUDA headers a source includes: a define with one of those names rewrites the header.

A tunable named ``T`` becomes ``-DT=8``, and ``template <typename T>`` in cuda_fp16.hpp turns into
``template <typename 8>``: NVRTC then reports a hundred errors in the header and none in the kernel (they are
omitted from its log as "in other files"). When a compile fails, :func:`define_clashes` names the defines that
are identifiers of an included header, and the compile log says so.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from harness_tools.compile.nvrtc import cuda_include_dir
from harness_tools.task.include_guard import CUDA_HEADERS

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_INCLUDE = re.compile(r'#\s*include\s*[<"]([^>"]+)[>"]')
_STRING = re.compile(r'"(?:\\.|[^"\\])*"')
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")


@functools.lru_cache(maxsize=16)
def header_identifiers(header: str) -> frozenset[str]:
    """Every identifier in ``header`` and the headers it includes from the CUDA include folder (comments and
    string literals left out); empty where the folder is not found."""
    folder = cuda_include_dir()
    if not folder:
        return frozenset()
    names: set[str] = set()
    _scan(Path(folder), header, names, set())
    return frozenset(names)


def _scan(folder: Path, header: str, names: set[str], seen: set[str]) -> None:
    path = folder / header
    if header in seen or not path.is_file():
        return
    seen.add(header)
    text = _COMMENT.sub(" ", path.read_text(errors="replace"))
    included = _INCLUDE.findall(text)
    names.update(_IDENTIFIER.findall(_STRING.sub(" ", _INCLUDE.sub(" ", text))))
    for inner in included:
        _scan(folder, inner, names, seen)


def define_clashes(source: str, defines: dict[str, str]) -> list[tuple[str, str]]:
    """(define, header) for each define that is an identifier of a CUDA header ``source`` includes."""
    headers = [h for h in dict.fromkeys(_INCLUDE.findall(_COMMENT.sub(" ", source))) if h in CUDA_HEADERS]
    return [(name, header) for name in defines for header in headers if name in header_identifiers(header)][:8]


def clash_note(source: str, defines: dict[str, str]) -> str:
    """A note for a failed compile's log, or "" when no define clashes with an included header."""
    return "".join(f"\nnote: the define {name} is also an identifier in {header} (or a header it includes): as "
                   f"-D{name}={defines[name]} it rewrites that header, which is where NVRTC's errors are; rename it "
                   "(a tunable parameter or a candidate's define)" for name, header in define_clashes(source, defines))
