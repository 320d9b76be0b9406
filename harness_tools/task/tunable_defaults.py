"""The values a tunable kernel gives its own tunables when no ``-D`` sets them (``#ifndef NAME`` / ``#define NAME 4``).

The tuner proposes them first: the kernel author's choice is the best prior there is, and the run then knows how
the defaults score. The reading is conservative: the first ``#define`` of a name decides, and it counts only when
the preprocessor would certainly take it with no ``-D`` given (every enclosing conditional is an ``#ifndef`` or
``#if !defined(...)`` of a name the source has not defined yet, one of them the name's own) and its value is an
integer literal, perhaps signed or in parentheses. Anything else (``#if EXPR``, ``#ifdef``, an ``#else`` branch, an
expression) leaves the name out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# String and character literals are kept whole (a "//" inside one is no comment); a comment becomes one space,
# as for the compiler, so a block comment that spans lines joins them.
_LITERAL_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|/\*.*?\*/|//[^\n]*', re.S)
_DIRECTIVE = re.compile(r"\s*#\s*([A-Za-z_]\w*)(.*)")
_IFNDEF = re.compile(r"([A-Za-z_]\w*)")
_IF_NOT_DEFINED = re.compile(r"!\s*defined\s*\(\s*([A-Za-z_]\w*)\s*\)|!\s*defined\s+([A-Za-z_]\w*)")
_DEFINE = re.compile(r"\s+([A-Za-z_]\w*)(\(?)(.*)")
_LITERAL = re.compile(r"(0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)[uUlL]*")
_PARENS = re.compile(r"\(\s*(.*?)\s*\)")


def tunable_defaults(source: str, names: Iterable[str]) -> dict[str, int]:
    """Each of ``names`` that the source gives an integer default, with that default."""
    wanted = set(names)
    text = _LITERAL_OR_COMMENT.sub(lambda m: " " if m.group().startswith("/") else m.group(),
                                   re.sub(r"\\\r?\n", "", source))
    frames: list[tuple[str | None, bool]] = []  # per open conditional: (the name it guards, taken for certain)
    defined: set[str] = set()  # defined by the source itself, for certain, so far
    decided: set[str] = set()  # the first #define of a name decides
    found: dict[str, int] = {}
    for line in text.splitlines():
        directive = _DIRECTIVE.fullmatch(line)
        if directive is None:
            continue
        word, rest = directive.group(1), directive.group(2)
        certain = not frames or frames[-1][1]
        if word in ("if", "ifdef", "ifndef"):
            name = _guarded_name(word, rest.strip())
            frames.append((name, name is not None and certain and name not in defined))
        elif word in ("elif", "elifdef", "elifndef", "else"):
            if frames:
                frames[-1] = (None, False)
        elif word == "endif":
            if frames:
                frames.pop()
        elif word == "undef" and certain:
            defined.discard(rest.strip())
        elif word == "define" and (match := _DEFINE.match(rest)):
            name, function_like, value = match.groups()
            if certain:
                defined.add(name)
            if name not in wanted or name in decided:
                continue
            decided.add(name)
            number = None if function_like else _integer(value)
            if certain and number is not None and any(guard == name for guard, _ in frames):
                found[name] = number
    return found


def _guarded_name(word: str, condition: str) -> str | None:
    """The name an ``#ifndef NAME`` or ``#if !defined(NAME)`` tests; None for any other condition."""
    pattern = {"ifndef": _IFNDEF, "if": _IF_NOT_DEFINED}.get(word)
    match = pattern.fullmatch(condition) if pattern else None
    return next(g for g in match.groups() if g) if match else None


def _integer(text: str) -> int | None:
    """A C integer literal, perhaps signed and in parentheses: ``4``, ``-1``, ``(8)``, ``(-1)``, ``0x20``, ``16u``."""
    text = _unwrap(text)
    sign = -1 if text[:1] == "-" else 1
    if text[:1] in ("+", "-"):
        text = _unwrap(text[1:])
    literal = _LITERAL.fullmatch(text)
    if literal is None:
        return None
    digits = literal.group(1)
    if digits[:2].lower() in ("0x", "0b"):
        return sign * int(digits, 0)
    return sign * int(digits, 8 if digits.startswith("0") else 10)


def _unwrap(text: str) -> str:
    text = text.strip()
    while (inner := _PARENS.fullmatch(text)) is not None:
        text = inner.group(1)
    return text
