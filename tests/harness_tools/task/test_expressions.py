"""Safe size/launch/constraint expressions: what they compute and what they refuse."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from harness_tools.errors import ExpressionError
from harness_tools.task.expressions import evaluate_expression, evaluate_int, names_in


@pytest.mark.parametrize(
    ("expression", "variables", "expected"),
    [
        ("N * M + 3", {"N": 4, "M": 5}, 23),
        ("ceil_div(N, 256)", {"N": 1000}, 4),
        ("ceil_div(N, 256)", {"N": 1024}, 4),
        ("ceil_div(N, 256)", {"N": 1025}, 5),
        ("min(N, 64) + max(N, 64)", {"N": 10}, 74),
        ("N // 3 + N % 3", {"N": 10}, 4),
        ("2 ** 10 - (N << 2) + (N >> 1)", {"N": 8}, 1024 - 32 + 4),
        ("-N + +N", {"N": 7}, 0),
        ("(N & 6) | 1", {"N": 7}, 7),
        ("abs(-N)", {"N": 3}, 3),
        ("64 if N > 1000 else 32", {"N": 2000}, 64),
        ("64 if N > 1000 else 32", {"N": 10}, 32),
        (" 2 * N ", {"N": 3}, 6),
    ],
)
def test_arithmetic(expression, variables, expected):
    assert evaluate_expression(expression, variables) == expected


def test_float_functions():
    assert evaluate_expression("sqrt(N)", {"N": 16}) == 4.0
    assert evaluate_expression("log2(N)", {"N": 1024}) == 10.0
    assert evaluate_expression("ceil(N / 3)", {"N": 10}) == 4
    assert evaluate_expression("floor(N / 3)", {"N": 10}) == 3
    assert evaluate_expression("int(N / 4)", {"N": 10}) == 2
    assert evaluate_expression("N / 4", {"N": 10}) == 2.5


def test_numbers_pass_through_unchanged():
    assert evaluate_expression(128, {}) == 128
    assert evaluate_expression(0.5, {}) == 0.5
    assert evaluate_int(7, {}) == 7


@pytest.mark.parametrize("value", [True, False])
def test_booleans_are_not_numbers(value):
    with pytest.raises(ExpressionError):
        evaluate_expression(value, {})


@pytest.mark.parametrize(
    ("expression", "variables", "expected"),
    [
        ("BM % TM == 0 and BM * BN <= 16384", {"BM": 64, "TM": 8, "BN": 128}, True),
        ("BM % TM == 0 and BM * BN <= 16384", {"BM": 64, "TM": 8, "BN": 512}, False),
        ("BM % TM == 0 and BM * BN <= 16384", {"BM": 60, "TM": 8, "BN": 128}, False),
        ("BM == 32 or BN == 32", {"BM": 64, "BN": 32}, True),
        ("BM == 32 or BN == 32", {"BM": 64, "BN": 64}, False),
        ("not BM > 64", {"BM": 64}, True),
        ("16 <= BM < 128", {"BM": 64}, True),
        ("16 <= BM < 128", {"BM": 128}, False),
        ("BM != BN", {"BM": 1, "BN": 1}, False),
        ("BM >= BN", {"BM": 2, "BN": 1}, True),
    ],
)
def test_comparisons_and_boolean_constraints(expression, variables, expected):
    assert evaluate_expression(expression, variables) is expected


def test_boolean_operators_short_circuit_like_python():
    # The usual way to guard a division in a tunable constraint: with TM == 0 the right-hand side must
    # not be evaluated (Python semantics), so the constraint is simply False.
    assert evaluate_expression("TM != 0 and BM % TM == 0", {"TM": 0, "BM": 64}) is False
    assert evaluate_expression("TM == 0 or BM % TM == 0", {"TM": 0, "BM": 64}) is True


def test_evaluate_int():
    assert evaluate_int("N / 4", {"N": 16}) == 4
    assert isinstance(evaluate_int("N / 4", {"N": 16}), int)
    assert evaluate_int("ceil_div(N, BS)", {"N": 1000, "BS": 128}) == 8


@pytest.mark.parametrize("expression", ["N / 4", "sqrt(N)", "0.5", "1e400"])
def test_evaluate_int_refuses_non_integral_results(expression):
    with pytest.raises(ExpressionError):
        evaluate_int(expression, {"N": 10})


def test_ceil_div_of_a_fraction_rounds_up_or_refuses():
    # ceil_div(3.5, 1) must not silently truncate 3.5 to 3 (a grid one block short).
    try:
        value = evaluate_expression("ceil_div(N / 2, 1)", {"N": 7})
    except ExpressionError:
        return
    assert value == 4


def test_complex_results_are_an_expression_error():
    # A negative base with a fractional exponent gives a Python complex number.
    with pytest.raises(ExpressionError):
        evaluate_int("(-N) ** 0.5", {"N": 8})


@pytest.mark.parametrize(
    "expression",
    [
        "N / 0",
        "N // (M - M)",
        "N % 0",
        "ceil_div(N, 0)",
        "0 ** -1",
    ],
)
def test_division_by_zero_is_an_expression_error(expression):
    with pytest.raises(ExpressionError, match="division by zero"):
        evaluate_expression(expression, {"N": 5, "M": 2})


def test_unknown_name_lists_the_known_names():
    with pytest.raises(ExpressionError) as info:
        evaluate_expression("ceil_div(K, BS)", {"N": 1, "BS": 2})
    message = str(info.value)
    assert "'K'" in message
    assert "BS" in message and "N" in message


@pytest.mark.parametrize(
    "expression",
    [
        "N.bit_length()",  # attribute access
        "N.__class__",
        "(lambda: 1)()",  # lambda
        "lambda x: x",
        "[1, 2][0]",  # subscript
        "N[0]",
        "foo(N)",  # unknown function
        "exec('1')",
        "__import__('os').getcwd()",
        "__import__('os')",
        "min(N, key=abs)",  # keyword arguments
        "'text'",  # string constant
        "True",  # bool constant
        "[N]",
        "N if",  # syntax error
        "N ^ 1",  # operator not on the list
        "N in [1]",
        "N is 1",
        "N := 3",
        "",
    ],
)
def test_disallowed_constructs_raise_expression_error(expression):
    with pytest.raises(ExpressionError):
        evaluate_expression(expression, {"N": 4})


def test_exponent_too_large_is_refused():
    with pytest.raises(ExpressionError, match="too large"):
        evaluate_expression("N ** 100000000", {"N": 10})
    with pytest.raises(ExpressionError, match="too large"):
        evaluate_expression("2 ** 2 ** 10", {})  # right-associative: the exponent is 1024


@pytest.mark.parametrize(
    "expression",
    [
        "1 << 2 ** 40",  # a 2**40-bit integer
        "((((((2 ** 64) ** 64) ** 64) ** 64) ** 64) ** 64)",  # each exponent is small; the result is not
    ],
)
def test_huge_results_are_refused_quickly(expression):
    # Launch expressions come from candidates (models, remote clients): a huge intermediate must be an
    # ExpressionError, not minutes of CPU or an exhausted machine. Run in a child with bounded memory.
    script = textwrap.dedent(
        f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        from harness_tools.errors import ExpressionError
        from harness_tools.task.expressions import evaluate_expression
        try:
            evaluate_expression({expression!r}, {{}})
        except ExpressionError:
            print("ExpressionError")
        except BaseException as exc:
            print(type(exc).__name__)
        else:
            print("no error")
        """
    )
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"evaluating {expression!r} ran for more than 20 s")
    assert done.stdout.strip() == "ExpressionError", done.stdout + done.stderr


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("ceil_div(N, BN) * BM", {"N", "BN", "BM"}),
        ("min(M, N) + max(K, 1)", {"M", "N", "K"}),
        ("N", {"N"}),
        ("4 * 32", set()),
        (256, set()),
        (0.5, set()),
    ],
)
def test_names_in(expression, expected):
    assert names_in(expression) == expected


def test_names_in_rejects_unparsable_text():
    with pytest.raises(ExpressionError):
        names_in("N +")


# ---- bounded cost: expressions come from task files, models and remote clients --------------------------
def test_a_ten_megabyte_expression_is_refused_before_parsing():
    import time

    start = time.perf_counter()
    with pytest.raises(ExpressionError, match="at most 1000 are accepted"):
        evaluate_expression("N" + " + N" * 2_500_000, {"N": 1})
    with pytest.raises(ExpressionError, match="at most 1000"):
        names_in("1" * 1001)
    assert time.perf_counter() - start < 1


@pytest.mark.parametrize("expression", ["(" * 300 + "1" + ")" * 300, "-" * 400 + "1", "1 - (" * 40 + "1" + ")" * 40])
def test_deep_nesting_is_refused(expression):
    with pytest.raises(ExpressionError, match="deep"):
        evaluate_expression(expression, {})


def test_nesting_within_the_limit_still_works():
    assert evaluate_expression("(" * 20 + "N" + ")" * 20, {"N": 3}) == 3


@pytest.mark.parametrize("expression", ["10**10**10", "9 ** 9 ** 9", "2 ** 64 * 2 ** 64", "99999999999999999999999",
                                        "int(1e30) * N"])
def test_huge_powers_literals_and_products_are_refused(expression):
    with pytest.raises(ExpressionError):
        evaluate_expression(expression, {"N": 2})


def test_huge_variables_and_numbers_are_refused():
    with pytest.raises(ExpressionError, match="beyond 2\\*\\*64"):
        evaluate_expression("N + 1", {"N": 10 ** 5000})
    with pytest.raises(ExpressionError, match="beyond 2\\*\\*64"):
        evaluate_expression(10 ** 5000, {})


def test_nul_bytes_are_an_expression_error():
    with pytest.raises(ExpressionError):
        evaluate_expression("N\x00", {"N": 1})


def test_large_floats_are_fine_where_an_integer_is_not_needed():
    assert evaluate_expression("1e30 * N", {"N": 2}) == 2e30  # e.g. a loose tolerance
    with pytest.raises(ExpressionError, match="beyond 2"):
        evaluate_int("1e30", {})
