"""Safe arithmetic expressions over a task's size symbols and tunables.

Shapes, scalar values, launch dimensions, FLOP/byte counts and tunable constraints are written as small
expressions such as ``"ceil_div(N, BN)"`` or ``"BM % TM == 0 and BM * BN <= 16384"``. They are parsed
with :mod:`ast` and evaluated by walking an allow-listed subset of nodes: no attribute access, no
calls other than the functions below, no names other than the given variables.

They come from task files, models and remote clients, so their cost is bounded before any work:
at most ``MAX_EXPRESSION_CHARS`` characters and ``MAX_DEPTH`` levels of nesting (checked before
and after parsing), and every integer literal, variable, intermediate and result within ``2**64`` in magnitude
(exponents and shifts are checked before they are computed; floats may be any size, since they cost
the same at every size). Parsed trees are cached by text.
"""

from __future__ import annotations

import ast
import functools
import math
import operator
from collections.abc import Mapping

from harness_tools.errors import ExpressionError

Number = int | float

MAX_MAGNITUDE = 1 << 64  # results beyond this are refused: expressions come from candidates
MAX_EXPRESSION_CHARS = 1000  # longer text is refused before it is parsed (a 10 MB one took 27 s and 3 GB)
MAX_DEPTH = 32  # nesting of the parsed tree: ((((...)))) and - - - ... 1 stop here


def _ceil_div(a: Number, b: Number) -> int:
    if int(a) != a or int(b) != b:
        raise ValueError(f"ceil_div needs integers, got ceil_div({a}, {b})")
    return -(-int(a) // int(b))


_FUNCTIONS = {
    "ceil_div": _ceil_div,
    "min": min,
    "max": max,
    "abs": abs,
    "sqrt": math.sqrt,
    "log2": math.log2,
    "ceil": math.ceil,
    "floor": math.floor,
    "int": int,
}

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}
_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


def evaluate_expression(expression: str | Number, variables: Mapping[str, Number]) -> Number:
    """Evaluate ``expression`` with ``variables``; numbers pass through unchanged."""
    if isinstance(expression, bool):
        raise ExpressionError(f"expected a number or an expression, got {expression!r}")
    if isinstance(expression, (int, float)):
        return _bounded(expression, "the number")
    tree = _parse(expression)
    try:
        return _eval(tree.body, variables, expression)
    except ZeroDivisionError:
        raise ExpressionError(f"division by zero in {expression!r} with {_shown(variables)}") from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise ExpressionError(f"cannot evaluate {expression!r}: {exc}") from None


def _shown(variables: Mapping[str, Number]) -> dict[str, Number]:
    return dict(list(variables.items())[:20])


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> ast.Expression:
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"cannot parse expression {text!r}: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, nesting the parser itself refuses
        raise ExpressionError(f"cannot parse expression {text[:80]!r}: {type(exc).__name__}: {exc}") from None
    depth = _depth(tree.body)
    if depth > MAX_DEPTH:
        raise ExpressionError(f"expression {text[:80]!r} nests {depth} levels deep; at most {MAX_DEPTH} are "
                              "accepted: write it flatter")
    return tree


def _parse(expression: object) -> ast.Expression:
    """The parsed tree of a bounded expression text; every refusal is an ExpressionError saying what to change."""
    if not isinstance(expression, str):
        raise ExpressionError(f"expected a number or an expression, got {type(expression).__name__}")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(f"expression of {len(expression)} characters (starting {expression[:40]!r}); at most "
                              f"{MAX_EXPRESSION_CHARS} are accepted: write it shorter, e.g. move a long computation "
                              "into a #define of the kernel")
    text = expression.strip()
    # Every nesting level costs at least one bracket or operator: a cheap count catches what would
    # make the parser recurse deeply before it runs at all.
    if text.count("(") > 4 * MAX_DEPTH and _bracket_depth(text) > MAX_DEPTH:
        raise ExpressionError(f"expression {text[:80]!r} nests more than {MAX_DEPTH} brackets deep; write it flatter")
    return _parsed(text)


def _bracket_depth(text: str) -> int:
    depth = deepest = 0
    for ch in text:
        if ch == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == ")":
            depth -= 1
    return deepest


def _depth(root: ast.AST) -> int:
    """Depth of the tree, walked without recursion (the tree may be deeper than Python's stack)."""
    deepest, stack = 0, [(root, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            return depth
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def evaluate_int(expression: str | Number, variables: Mapping[str, Number]) -> int:
    """Evaluate to an integer; a non-integral result is an error, not a silent truncation."""
    value = evaluate_expression(expression, variables)
    if isinstance(value, float):
        if not value.is_integer():
            raise ExpressionError(f"{expression!r} = {value} is not an integer")
        value = int(value)
    return int(_bounded(int(value), str(expression)))


def names_in(expression: str | Number) -> set[str]:
    """The variable names an expression refers to (function names excluded)."""
    if isinstance(expression, (int, float)):
        return set()
    tree = _parse(expression)
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - called


def _check_operands(op: ast.operator, left: Number, right: Number, source: str) -> None:
    """Refuse operations whose result would be huge before computing them."""
    if isinstance(op, (ast.LShift, ast.RShift)) and not 0 <= right <= 64:
        raise ExpressionError(f"shift by {right} is out of range in {source!r}")
    if isinstance(op, ast.Pow) and abs(left) > 1 and right * math.log2(abs(left)) > 64:
        raise ExpressionError(f"{left} ** {right} is too large in {source!r}")


def _bounded(value: Number, source: str) -> Number:
    if isinstance(value, complex):
        raise ExpressionError(f"{source!r} has a complex value")
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and abs(value) > MAX_MAGNITUDE:  # a float costs the same at any magnitude
        raise ExpressionError(f"{source[:80]!r} has a value beyond 2**64 in magnitude; sizes, launch dimensions and "
                              "byte counts all fit in 64 bits")
    return value


def _eval(node: ast.AST, variables: Mapping[str, Number], source: str) -> Number:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return _bounded(node.value, source)
    if isinstance(node, ast.Name):
        if node.id not in variables:
            raise ExpressionError(f"unknown name {node.id!r} in {source!r}; known: {sorted(variables)[:50]}")
        value = variables[node.id]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ExpressionError(f"{node.id} = {value!r} is not a number (in {source!r})")
        return _bounded(value, source)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left, variables, source), _eval(node.right, variables, source)
        _check_operands(node.op, left, right, source)
        return _bounded(_BINARY[type(node.op)](left, right), source)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand, variables, source))
    if isinstance(node, ast.BoolOp):  # short-circuits, so "TM != 0 and BM % TM == 0" is safe
        is_and = isinstance(node.op, ast.And)
        for v in node.values:
            if bool(_eval(v, variables, source)) != is_and:
                return not is_and
        return is_and
    if isinstance(node, ast.Compare):
        left = _eval(node.left, variables, source)
        for op, comparator in zip(node.ops, node.comparators):
            if type(op) not in _COMPARE:
                raise ExpressionError(f"comparison {type(op).__name__} not allowed in {source!r}")
            right = _eval(comparator, variables, source)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        test = _eval(node.test, variables, source)
        return _eval(node.body if test else node.orelse, variables, source)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
        if node.keywords:
            raise ExpressionError(f"keyword arguments not allowed in {source!r}")
        return _bounded(_FUNCTIONS[node.func.id](*(_eval(a, variables, source) for a in node.args)), source)
    raise ExpressionError(f"{type(node).__name__} is not allowed in expression {source!r}")
