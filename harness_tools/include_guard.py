"""Keep host files out of NVRTC: candidate source is hostile.

NVRTC reads any file the process can read, so a candidate may ``#include`` only names on an allow-list.
The scan reproduces the C++ translation phases that decide what a directive is, and errs on the side
of refusing:

1. line splices (backslash-newline) are joined first, so ``#inc\\<newline>lude`` is seen as ``#include``;
2. the source is tokenised the way the compiler does it — string and character literals, pp-numbers
   with digit separators (``1'000``), identifiers — and every comment becomes *one* space, so a block
   comment spanning lines joins them (``#/*<newline>*/include`` is one directive, as for the compiler);
3. on the resulting lines, ``#`` or the digraph ``%:`` first on a line starts a directive.

Then: ``#include`` takes only a literal ``<name>`` or ``"name"`` on the allow-list, never a macro;
``#include_next``, ``#import``, ``#embed`` and unknown directives are refused; ``__has_include`` and
``__has_embed`` anywhere are refused, as are ``#pragma``/``_Pragma`` mentioning include, embed or import,
and token pasting (``##``) in a source that also has ``#if``/``#elif`` (pasting could build
``__has_include`` there). Trigraphs and raw string literals are refused outright: no kernel needs them
and they change how the rest of the text is read.

Allowed headers are never rewritten: NVRTC resolves them from memory (see
:mod:`harness_tools.builtin_headers`) or from the CUDA headers directory, and from nowhere else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Served (empty) from memory: NVRTC already knows everything they would declare.
NOOP_HEADERS = frozenset({
    "cuda_runtime.h", "cuda_runtime_api.h", "cuda.h", "device_launch_parameters.h",
    "device_functions.h", "math_functions.h", "cuda_device_runtime_api.h",
})
# Served from memory with real content (see builtin_headers.py).
BUILTIN_HEADERS = frozenset({
    "stdint.h", "cstdint", "float.h", "cfloat", "limits.h", "climits", "math.h", "cmath", "stddef.h", "cstddef",
})
# Resolved in the CUDA headers directory, and only there.
CUDA_HEADERS = frozenset({"cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h", "mma.h", "cooperative_groups.h"})
ALLOWED_HEADERS = NOOP_HEADERS | BUILTIN_HEADERS | CUDA_HEADERS

_DIRECTIVES = frozenset({
    "define", "undef", "if", "ifdef", "ifndef", "elif", "elifdef", "elifndef", "else", "endif",
    "pragma", "error", "warning", "line", "include", "",
})
_FORBIDDEN_IDENTIFIERS = re.compile(r"has_include|has_embed|include_next")
_PRAGMA_WORDS = re.compile(r"include|embed|import|dependency")
_INCLUDE_OPERAND = re.compile(r'^\s*(?:<([^<>"]+)>|"([^"<>]+)")\s*$')
_RAW_STRING = re.compile(r'(?<![A-Za-z0-9_])(?:u8|u|U|L)?R"')
_TRIGRAPH = re.compile(r"\?\?[=/'()!<>\-]")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_IDENT_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


@dataclass
class GuardVerdict:
    """``refusals`` empty means the source may be compiled as ``source``."""

    source: str
    refusals: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.refusals


def check_source(source: str, file_name: str = "kernel.cu") -> GuardVerdict:
    source = source.replace("\r\n", "\n")
    refusals: list[str] = []
    for m in _TRIGRAPH.finditer(source):
        refusals.append(f"{file_name}({_line_of(source, m.start())}): trigraphs are not accepted")
    if "\x00" in source:
        refusals.append(f"{file_name}({_line_of(source, source.index(chr(0)))}): NUL bytes are not accepted")
    text, starts = _join_splices(source)
    for m in _RAW_STRING.finditer(text):
        refusals.append(f"{file_name}({starts[text.count(chr(10), 0, m.start())]}): raw string literals are not accepted")
    first_conditional = first_pasting = None
    for physical, line in _tokenised_lines(text, starts):
        where = f"{file_name}({physical})"
        m = _FORBIDDEN_IDENTIFIERS.search(line)
        if m:
            refusals.append(f"{where}: {m.group(0)!r} is not allowed (it probes host files)")
        if "_Pragma" in line and _PRAGMA_WORDS.search(line):
            refusals.append(f"{where}: this _Pragma is not allowed")
        if first_pasting is None and ("##" in line or "%:%:" in line):
            first_pasting = physical
        directive = _directive(line)
        if directive is None:
            continue
        name, operand = directive
        if name not in _DIRECTIVES:
            refusals.append(f"{where}: directive #{name or operand.strip()[:20]} is not allowed")
        elif name in ("if", "elif") and first_conditional is None:
            first_conditional = physical
        elif name == "pragma" and _PRAGMA_WORDS.search(operand):
            refusals.append(f"{where}: this #pragma is not allowed")
        elif name == "include":
            problem = _check_include(operand)
            if problem:
                refusals.append(f"{where}: {problem}")
    if first_pasting is not None and first_conditional is not None:
        refusals.append(f"{file_name}({first_pasting}): token pasting (##) in a source with #if/#elif "
                        f"(line {first_conditional}) is not allowed")
    return GuardVerdict(source=source, refusals=refusals)


def code_lines(source: str, blank_literals: bool = False) -> list[tuple[int, str]]:
    """(first physical line, text) of each line as the compiler sees it: splices joined, comments gone.

    With ``blank_literals`` the contents of string and character literals are replaced by spaces, so a
    scan for identifiers does not trip over words inside strings.
    """
    text, starts = _join_splices(source.replace("\r\n", "\n"))
    lines = _tokenised_lines(text, starts)
    if blank_literals:
        lines = [(n, _LITERAL.sub(lambda m: m.group(0)[0] + " " * (len(m.group(0)) - 2) + m.group(0)[-1], t))
                 for n, t in lines]
    return lines


_LITERAL = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'')


def check_define_value(name: str, value: str) -> str | None:
    """Why a ``#define`` coming from a candidate's settings is refused, or None."""
    if not _IDENT.fullmatch(name):
        return f"define name {name!r} is not an identifier"
    if not re.fullmatch(r"[A-Za-z0-9_+\-*/%().,<>=!&|^~?: ]{0,200}", value):
        return f"define {name}={value!r}: only simple expressions are accepted"
    if _FORBIDDEN_IDENTIFIERS.search(value):
        return f"define {name}={value!r} is not allowed"
    return None


def _directive(line: str) -> tuple[str, str] | None:
    stripped = line.lstrip(" \t\f\v")
    if stripped.startswith("#"):
        rest = stripped[1:]
    elif stripped.startswith("%:"):
        rest = stripped[2:]
    else:
        return None
    rest = rest.lstrip(" \t\f\v")
    m = _IDENT.match(rest)
    name = m.group(0) if m else ""
    return name, rest[len(name):]


def _check_include(operand: str) -> str | None:
    m = _INCLUDE_OPERAND.match(operand)
    if not m:
        return f"#include must name a header literally, got {operand.strip()[:60]!r}"
    header = m.group(1) or m.group(2)
    if header not in ALLOWED_HEADERS:
        return f"#include of {header!r} is refused; allowed headers: {', '.join(sorted(ALLOWED_HEADERS))}"
    return None


def _join_splices(source: str) -> tuple[str, list[int]]:
    """Phase 2: backslash-newline joins lines. Returns the text and, per line, its first physical line."""
    out: list[str] = []
    starts: list[int] = []
    pending, start = "", 0
    for number, line in enumerate(source.split("\n"), start=1):
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        out.append(pending + line)
        starts.append(start)
        pending = ""
    if pending:
        out.append(pending)
        starts.append(start)
    return "\n".join(out), starts


def _tokenised_lines(text: str, starts: list[int]) -> list[tuple[int, str]]:
    """Phase 3: literals kept, each comment replaced by one space (joining the lines it spans)."""
    lines: list[tuple[int, str]] = []
    current: list[str] = []
    line_index, line_start = 0, starts[0] if starts else 1
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            lines.append((line_start, "".join(current)))
            current = []
            line_index += 1
            line_start = starts[line_index] if line_index < len(starts) else line_start
            i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            end = j + 1 if j < n and text[j] == c else min(j, n)
            current.append(text[i:end])
            i = end
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            current.append(" ")
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            end = n if j < 0 else j + 2
            line_index += text.count("\n", i, end)  # the comment's lines merge into this one
            current.append(" ")
            i = end
        elif c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            j = _pp_number_end(text, i)
            current.append(text[i:j])
            i = j
        elif c in _IDENT_CHARS:
            j = i
            while j < n and text[j] in _IDENT_CHARS:
                j += 1
            current.append(text[i:j])
            i = j
        else:
            current.append(c)
            i += 1
    lines.append((line_start, "".join(current)))
    return lines


def _pp_number_end(text: str, i: int) -> int:
    """End of a preprocessing number: digits, identifier chars, '.', exponent signs, digit separators."""
    n = len(text)
    j = i + 1
    while j < n:
        ch = text[j]
        if ch in _IDENT_CHARS or ch == ".":
            j += 1
        elif ch in "+-" and text[j - 1] in "eEpP":
            j += 1
        elif ch == "'" and j + 1 < n and text[j + 1] in _IDENT_CHARS:
            j += 2
        else:
            break
    return j


def _line_of(source: str, offset: int) -> int:
    return source.count("\n", 0, offset) + 1
