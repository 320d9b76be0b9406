"""Comparison maths: tolerances, NaN/Inf rules, statistics and the first mismatch."""

from __future__ import annotations

import numpy as np
import pytest

from harness_tools.check.compare import compare
from harness_tools.task.spec import Tolerance

TOL = Tolerance(atol=1e-3, rtol=1e-2)


def test_within_tolerance_passes_and_reports_errors():
    ref = np.array([1.0, 100.0, -2.0])
    out = np.array([1.0005, 100.9, -2.0], dtype=np.float32)
    r = compare("y", out, ref, TOL, {})
    assert r.passed and r.mismatches == 0 and r.first_mismatch is None
    assert r.max_abs_err == pytest.approx(0.9, rel=1e-4)
    assert r.max_rel_err == pytest.approx(0.009, rel=1e-3)


def test_first_mismatch_has_multi_index_and_values():
    ref = np.zeros((3, 4))
    out = ref.copy()
    out[1, 2] = 0.5
    out[2, 3] = 0.7
    r = compare("C", out, ref, TOL, {})
    assert not r.passed and r.mismatches == 2
    assert r.first_mismatch.index == [1, 2] and r.first_mismatch.flat_index == 6
    assert r.first_mismatch.got == 0.5 and r.first_mismatch.expected == 0.0


def test_nan_or_inf_never_passes_where_reference_is_finite():
    ref = np.array([1.0, 2.0, 3.0])
    loose = Tolerance(atol=1e30, rtol=1e30)
    for bad in (np.nan, np.inf, -np.inf):
        out = np.array([1.0, bad, 3.0])
        r = compare("y", out, ref, loose, {})
        assert not r.passed and r.nonfinite == 1 and r.first_mismatch.flat_index == 1
        assert r.max_abs_err == float("inf")


def test_nonfinite_reference_needs_the_identical_value():
    ref = np.array([np.inf, np.nan, -np.inf])
    assert compare("y", ref.copy(), ref, TOL, {}).passed
    assert not compare("y", np.array([np.inf, 0.0, -np.inf]), ref, TOL, {}).passed
    assert not compare("y", np.array([-np.inf, np.nan, -np.inf]), ref, TOL, {}).passed


def test_atol_expression_uses_sizes():
    ref = np.array([10.0])
    tol = Tolerance(atol="1e-3 * K", rtol=0.0)
    assert compare("C", np.array([10.5]), ref, tol, {"K": 1000}).passed
    assert not compare("C", np.array([10.5]), ref, tol, {"K": 100}).passed


def test_exact_tolerance_for_integers():
    ref = np.arange(10)
    out = ref.astype(np.int32)
    assert compare("idx", out, ref, Tolerance(), {}).passed
    out[3] += 1
    assert compare("idx", out, ref, Tolerance(), {}).mismatches == 1


def test_shape_mismatch_is_a_bug_not_a_verdict():
    with pytest.raises(ValueError, match="shape"):
        compare("y", np.zeros(3), np.zeros(4), TOL, {})


def test_big_outputs_compared_in_parallel_report_the_first_mismatch_and_every_count():
    ref = np.linspace(-1.0, 1.0, 9_000_001)
    out = ref.astype(np.float32)
    out[7_654_321] += 1.0  # in a late chunk: another thread's run
    out[3_500_000] -= 1.0
    out[8_999_999] = np.nan
    r = compare("y", out, ref, TOL, {})
    assert not r.passed and r.mismatches == 3 and r.nonfinite == 1
    assert r.first_mismatch.flat_index == 3_500_000 and r.first_mismatch.index == [3_500_000]
    assert r.max_abs_err == float("inf")
    clean = compare("y", ref.astype(np.float32), ref, TOL, {})
    assert clean.passed and clean.elements == 9_000_001 and 0 < clean.max_abs_err < 1e-7
