"""Keep host files out of NVRTC: candidate source is hostile.

NVRTC reads any file the process can read, so a candidate may ``#include`` only names on an allow-list.
The scan reproduces the C++ translation phases that decide what a directive is, and errs on the side
of refusing. It was desynchronised from the compilers before (a non-ASCII "digit" opening a fake
comment, ``#line N "file"``, a lone CR that g++ reads as a line end), so every rule below is written so
that NVRTC (EDG), g++ and this scan read the same text the same way, and anything where the three might
disagree is refused rather than guessed:

0. CR LF, lone CR and LF are all line ends (g++ reads a lone CR as one, NVRTC does not): the source is
   normalised to LF, and that normalised text (``GuardVerdict.source``) is what the compilers get, so
   line numbers agree everywhere;
1. line splices (backslash-newline) are joined first, so ``#inc\\<newline>lude`` is seen as ``#include``;
2. the source is tokenised the way the compiler does it — string and character literals, pp-numbers
   with digit separators (``1'000``), identifiers, all with ASCII character classes only — and every
   comment becomes *one* space, so a block comment spanning lines joins them (``#/*<newline>*/include`` is
   one directive, as for the compiler);
3. on the resulting lines, ``#`` or the digraph ``%:`` first on a line starts a directive.

Refused because compilers read them differently (or we could not be sure they do not): any non-ASCII
character outside literals and comments, ``$`` and ``\\`` outside literals, control characters, a
backslash followed by blanks at a line end (a splice for g++ only), unterminated literals and comments,
a splice on the last line, a ``'`` after a number that is not a digit separator between letters/digits,
form feed and vertical tab in directives, text that is not valid Unicode.

Then: ``#include`` takes only a literal ``<name>`` or ``"name"`` on the allow-list, never a macro;
``#line`` only a decimal line number (a file name makes g++ quote that file's lines in diagnostics);
``#include_next``, ``#import``, ``#embed``, GNU line markers (``# 12 "file"``) and unknown directives are
refused; ``__has_include`` and ``__has_embed`` anywhere are refused, as are ``#pragma`` mentioning
include, embed, import or dependency, those words anywhere in a source that uses ``_Pragma``, and token
pasting (``##``) in a source that also has ``#if``/``#elif`` or ``_Pragma`` (pasting could build
``__has_include`` or a pragma word there). Trigraphs and raw string literals are refused outright: no
kernel needs them and they change how the rest of the text is read.

Allowed headers are never rewritten: NVRTC resolves them from memory (see
:mod:`harness_tools.compile.headers`) or from the CUDA headers directory, and from nowhere else.
"""

from __future__ import annotations

import re
import unicodedata
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
# Every pattern is ASCII-only: Python's \d, \w, \s and str.isdigit() also accept non-ASCII characters
# (Arabic-Indic or fullwidth digits, NBSP) that no C++ compiler treats that way.
_FORBIDDEN_IDENTIFIERS = re.compile(r"has_include|has_embed|include_next", re.ASCII)
_PRAGMA_WORDS = re.compile(r"include|embed|import|dependency", re.ASCII)
_INCLUDE_OPERAND = re.compile(r'[ \t]*(?:<([^<>"]+)>|"([^"<>]+)")[ \t]*', re.ASCII)
_LINE_OPERAND = re.compile(r"[ \t]*[0-9]+[ \t]*", re.ASCII)
_RAW_STRING = re.compile(r'(?<![A-Za-z0-9_])(?:u8|u|U|L)?R"', re.ASCII)
_TRIGRAPH = re.compile(r"\?\?[=/'()!<>\-]")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_DIGITS = frozenset("0123456789")
# g++ splices a backslash followed by blanks and a line end (with a warning); NVRTC does not.
_SPACED_SPLICE = re.compile(r"\\[ \t\f\v]+(?=\n|\Z)")
# C0 controls other than tab, LF, FF and VT, and DEL: no compiler agrees on them (GCC even reads a
# trailing ^Z as end of file). U+0085, U+2028 and U+2029 are line ends to Python's splitlines(), so
# any tool here that splits lines that way would disagree with the compilers about where they are.
_CONTROL = re.compile(r"[\x01-\x08\x0e-\x1f\x7f\x85\u2028\u2029]")
_MAX_REFUSALS = 100


@dataclass
class GuardVerdict:
    """``refusals`` empty means the source may be compiled as ``source`` (line ends normalised to LF)."""

    source: str
    refusals: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.refusals


def normalise_line_ends(source: str) -> str:
    """CR LF and a lone CR become LF: g++ ends a line at each, NVRTC only at LF and CR LF."""
    return source.replace("\r\n", "\n").replace("\r", "\n")


def check_source(source: str, file_name: str = "kernel.cu") -> GuardVerdict:
    source = normalise_line_ends(source)
    problems: list[tuple[int, str]] = []  # (physical line, why)

    def at(offset: int, why: str) -> None:
        problems.append((source.count("\n", 0, offset) + 1, why))

    try:  # lone surrogates cannot be encoded for the compilers at all
        source.encode("utf-8")
    except UnicodeEncodeError as exc:
        at(exc.start, "the source is not valid Unicode text (lone surrogate)")
    if "\x00" in source:
        at(source.index("\x00"), "NUL bytes are not accepted")
    for m in _CONTROL.finditer(source):
        at(m.start(), f"control character U+{ord(m.group(0)):04X} is not accepted")
    for m in _TRIGRAPH.finditer(source):
        at(m.start(), "trigraphs are not accepted")
    for m in _SPACED_SPLICE.finditer(source):
        at(m.start(), "a backslash followed by blanks at the end of a line is not accepted (g++ reads a line "
                      "splice, NVRTC does not)")
    # A splice on the last line would join whatever the build appends after the candidate.
    if source.endswith("\\") or source.endswith("\\\n"):
        at(len(source) - 1, "the last line ends with a backslash (a line splice into nothing)")

    text, phys = _join_splices(source)
    for m in _RAW_STRING.finditer(text):
        problems.append((phys[m.start()], "raw string literals are not accepted"))
    lines = _tokenised_lines(text, phys, problems)

    first_conditional = first_pasting = pragma_operator = None
    word_lines: list[tuple[int, str]] = []  # (line, word) of pragma words outside #include directives
    for physical, line in lines:
        m = _FORBIDDEN_IDENTIFIERS.search(line)
        if m:
            problems.append((physical, f"{m.group(0)!r} is not allowed (it probes host files)"))
        if pragma_operator is None and "_Pragma" in line:
            pragma_operator = physical
        if first_pasting is None and ("##" in line or "%:%:" in line):
            first_pasting = physical
        directive = _directive(line)
        if directive is None or directive[0] != "include":
            m = _PRAGMA_WORDS.search(line)
            if m:
                word_lines.append((physical, m.group(0)))
        if directive is None:
            continue
        name, operand = directive
        # g++ only pedwarns about form feed and vertical tab in a directive; refuse rather than rely on it.
        if "\f" in line or "\v" in line:
            problems.append((physical, "form feed or vertical tab in a directive is not accepted"))
        if name not in _DIRECTIVES:
            problems.append((physical, f"directive #{name or operand.strip()[:20]} is not allowed"))
        elif name == "" and operand.strip(" \t\f\v"):
            # `# 12 "file"` is a GNU line marker to g++ and NVRTC: it renames the file like #line.
            problems.append((physical, f"'# {operand.strip()[:20]}' is not allowed (only a bare # may stand alone)"))
        elif name in ("if", "elif") and first_conditional is None:
            first_conditional = physical
        elif name == "pragma" and _PRAGMA_WORDS.search(operand):
            problems.append((physical, "this #pragma is not allowed"))
        elif name == "line" and not _LINE_OPERAND.fullmatch(operand):
            # A file name makes g++ quote that file's lines in diagnostics; a macro could expand to one.
            problems.append((physical, f"#line takes only a decimal line number (no file name, no macro), "
                                       f"got {operand.strip()[:60]!r}"))
        elif name == "include":
            problem = _check_include(operand)
            if problem:
                problems.append((physical, problem))
    if pragma_operator is not None:
        # _Pragma takes a string a macro may assemble from words written anywhere in the source.
        problems += [(n, f"{word!r} is not allowed in a source that uses _Pragma (line {pragma_operator})")
                     for n, word in word_lines]
    for guarded, what in ((first_conditional, "#if/#elif"), (pragma_operator, "_Pragma")):
        if first_pasting is not None and guarded is not None:
            problems.append((first_pasting, f"token pasting (##) in a source with {what} (line {guarded}) "
                                            f"is not allowed"))
    refusals = list(dict.fromkeys(f"{file_name}({n}): {why}" for n, why in sorted(problems, key=lambda p: p[0])))
    if len(refusals) > _MAX_REFUSALS:
        refusals[_MAX_REFUSALS:] = [f"[{len(refusals) - _MAX_REFUSALS} more refusal(s) omitted]"]
    return GuardVerdict(source=source, refusals=refusals)


def code_lines(source: str, blank_literals: bool = False) -> list[tuple[int, str]]:
    """(first physical line, text) of each line as the compiler sees it: splices joined, comments gone.

    With ``blank_literals`` the contents of string and character literals are replaced by spaces, so a
    scan for identifiers does not trip over words inside strings.
    """
    text, phys = _join_splices(normalise_line_ends(source))
    lines = _tokenised_lines(text, phys, [])
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
    m = _INCLUDE_OPERAND.fullmatch(operand)
    if not m:
        return f"#include must name a header literally, got {operand.strip()[:60]!r}"
    header = m.group(1) or m.group(2)
    if header not in ALLOWED_HEADERS:
        return f"#include of {header!r} is refused; allowed headers: {', '.join(sorted(ALLOWED_HEADERS))}"
    return None


def _join_splices(source: str) -> tuple[str, list[int]]:
    """Phase 2: backslash-newline joins lines (``source`` has LF line ends only).

    Returns the joined text and, per character of it (plus one for its end), its physical line.
    """
    physical = source.split("\n")
    parts: list[str] = []
    phys: list[int] = []
    for number, line in enumerate(physical, start=1):
        last = number == len(physical)
        if line.endswith("\\") and not last:
            line = line[:-1]
        elif not last:
            line += "\n"
        parts.append(line)
        phys += [number] * len(line)
    phys.append(len(physical))
    return "".join(parts), phys


def _tokenised_lines(text: str, phys: list[int], problems: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Phase 3: literals kept, each comment replaced by one space (joining the lines it spans).

    Appends to ``problems`` what the compilers might read differently from this scan.
    """
    lines: list[tuple[int, str]] = []
    current: list[str] = []
    line_start = phys[0]
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            lines.append((line_start, "".join(current)))
            current = []
            line_start = phys[i + 1]
            i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" and j + 1 < n and text[j + 1] != "\n" else 1
            if j < n and text[j] == c:
                j += 1
            else:
                # Compilers disagree on what follows a lone quote (g++ ends it at the line end, NVRTC may
                # lex on): a quote hidden this way could make the scan and the compiler see different code.
                problems.append((phys[i], f"unterminated {c} literal is not accepted"))
            current.append(text[i:j])
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            current.append(" ")
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                problems.append((phys[i], "unterminated /* comment is not accepted"))
            i = n if j < 0 else j + 2  # the comment's lines merge into this one
            current.append(" ")
        elif c in _DIGITS or (c == "." and i + 1 < n and text[i + 1] in _DIGITS):
            j = _pp_number_end(text, i)
            if j < n and text[j] == "'":
                # Only `'` between ASCII letters/digits is a separator here; g++ also takes `''`, `'$`, `'\u`
                # and `'` before UTF-8 into the number, where NVRTC starts a character literal.
                problems.append((phys[j], "a ' right after a number must be a digit separator between "
                                          "ASCII digits or letters"))
            current.append(text[i:j])
            i = j
        elif c in _IDENT_CHARS:
            j = i
            while j < n and text[j] in _IDENT_CHARS:
                j += 1
            current.append(text[i:j])
            i = j
        else:
            if ord(c) > 0x7F:
                # Compilers take some of these into identifiers and pp-numbers (g++ even after a `'`), and
                # this scan does not: outside literals and comments they could hide or reveal a quote.
                name = unicodedata.name(c, "unnamed")
                problems.append((phys[i], f"character U+{ord(c):04X} ({name}) outside string literals and "
                                          f"comments is not accepted: identifiers and numbers must be ASCII"))
            elif c == "$":
                problems.append((phys[i], "'$' outside string literals is not accepted (g++ takes it into "
                                          "identifiers and numbers)"))
            elif c == "\\":
                problems.append((phys[i], "a backslash outside literals is not accepted (universal character "
                                          "names and stray splices are read differently by the compilers)"))
            current.append(c)
            i += 1
    lines.append((line_start, "".join(current)))
    return lines


def _pp_number_end(text: str, i: int) -> int:
    """End of a preprocessing number: ASCII digits and identifier chars, '.', exponent signs, separators."""
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
