"""Mismatch maps: where a failing output is wrong, binned over its matrix view, through ``compare``."""

from __future__ import annotations

import numpy as np
import pytest

from harness_tools.backends.contract import DeviceComparison
from harness_tools.check.compare import OutputComparison, compare
from harness_tools.check.device_compare import as_output_comparison
from harness_tools.check.mismatch_map import bin_grid
from harness_tools.task.loading import load_task
from harness_tools.task.spec import Tolerance
from tests.harness_tools.check.checking_tasks import write_task

TOL = Tolerance(atol=1e-3, rtol=1e-2)


def _map(out: np.ndarray, ref: np.ndarray):
    result = compare("C", out, ref, TOL, {})
    assert not result.passed and result.mismatch_map is not None
    return result, result.mismatch_map


def test_a_passing_output_has_no_map():
    ref = np.arange(12.0).reshape(3, 4)
    assert compare("C", ref.astype(np.float32), ref, TOL, {}).mismatch_map is None


def test_a_wrong_right_edge_shows_in_the_last_column_bins_only():
    ref = np.random.default_rng(1).standard_normal((100, 64))
    out = ref.copy()
    out[:, 62:] += 1.0  # an unguarded edge: the last two columns
    result, m = _map(out, ref)
    assert (m.rows, m.cols, m.view_shape) == (32, 32, (100, 64))
    counts = np.array(m.mismatches)
    assert counts[:, :31].sum() == 0 and counts[:, 31].sum() == 200 == result.mismatches
    assert np.array(m.elements).sum() == 6400 and set(np.array(m.elements)[:, 31]) <= {6, 8}  # 3 or 4 rows × 2 cols
    assert np.array(m.nonfinite).sum() == 0


def test_an_output_shifted_by_one_row_is_wrong_everywhere_but_the_first_row():
    ref = np.arange(64 * 64, dtype=np.float64).reshape(64, 64)
    out = np.roll(ref, 1, axis=0)
    out[0] = ref[0]
    _, m = _map(out, ref)
    counts, elements = np.array(m.mismatches), np.array(m.elements)
    assert (counts[1:] == elements[1:]).all()  # 2 rows × 2 cols per bin
    assert (counts[0] == elements[0] // 2).all()  # row 0 is right, row 1 is not


def test_nans_count_as_nonfinite_in_their_bins():
    ref = np.ones((40, 40))
    out = ref.copy()
    out[39, 0] = np.nan
    out[0, 39] = np.inf
    out[20, 20] = 5.0
    result, m = _map(out, ref)
    nonfinite = np.array(m.nonfinite)
    assert nonfinite[31, 0] == 1 and nonfinite[0, 31] == 1 and nonfinite.sum() == result.nonfinite == 2
    assert np.array(m.mismatches).sum() == 3 and m.mismatches[16][16] == 1  # 20·32 // 40 = 16


def test_a_3d_output_is_viewed_as_its_leading_dimensions_by_its_last():
    ref = np.zeros((4, 10, 50))
    out = ref.copy()
    out[3, 9, 0] = 1.0  # the last row of the view, its first column
    out[0, 0, 49] = 1.0
    _, m = _map(out, ref)
    assert m.view_shape == (40, 50) and (m.rows, m.cols) == (32, 32)
    assert m.mismatches[31][0] == 1 and m.mismatches[0][31] == 1 and np.array(m.mismatches).sum() == 2
    assert np.array(m.elements).sum() == 2000


def test_a_1d_output_is_one_row_of_up_to_256_bins():
    ref = np.zeros(1000)
    out = ref.copy()
    out[995:] = 1.0
    _, m = _map(out, ref)
    assert (m.rows, m.cols, m.view_shape) == (1, 256, (1, 1000))
    assert m.mismatches[0][255] == 3 and m.mismatches[0][254] == 2 and sum(m.mismatches[0]) == 5  # 997.., 993..
    assert sum(m.elements[0]) == 1000 and set(m.elements[0]) == {3, 4}
    assert bin_grid([7]).cols == 7 and bin_grid([]).view_rows == bin_grid([]).view_cols == 1


def test_a_big_output_mapped_in_parallel_chunks_counts_every_element():
    ref = np.zeros((3000, 3001))  # 9M elements: several threads' runs of chunks
    out = ref.astype(np.float32)
    out[2999, :] = np.nan
    out[:, 0] = 1.0
    result, m = _map(out, ref)
    counts = np.array(m.mismatches)
    assert counts.sum() == result.mismatches == 3000 + 3000
    assert counts[:31, 1:].sum() == 0 and counts[:31, 0].sum() + counts[31].sum() == 6000
    nonfinite = np.array(m.nonfinite)
    assert nonfinite[31].sum() == 3000 == nonfinite.sum()  # (2999, 0) is 1.0, not NaN
    assert np.array(m.elements).sum() == out.size


def test_the_map_survives_a_round_trip_and_old_records_still_read():
    ref = np.zeros((8, 8))
    out = ref.copy()
    out[7, 7] = 1.0
    result = compare("C", out, ref, TOL, {})
    assert OutputComparison.model_validate_json(result.model_dump_json()) == result
    old = result.model_dump(exclude={"mismatch_map"})  # an evaluation.json written before maps existed
    assert OutputComparison.model_validate(old).mismatch_map is None


def test_the_device_counts_become_the_same_map(tmp_path):
    ref = np.zeros((6, 40))
    out = ref.copy()
    out[5, 39] = 2.0
    host = compare("y", out, ref, Tolerance(atol=0, rtol=0), {}).mismatch_map
    grid = bin_grid((6, 40))
    counts = np.zeros((grid.rows, grid.cols), dtype=int)
    counts[5, 31] = 1
    device = DeviceComparison(elements=240, mismatches=1, certain=1, possible=1, nonfinite=0, nans=0, infs=0,
                              max_abs_err=2.0, max_rel_err=2.0, decided=True, bin_mismatches=counts.tolist(),
                              bin_nonfinite=np.zeros_like(counts).tolist())
    task = load_task(write_task(
        tmp_path, kernel_name="k", kernel="", reference_py="", launch={"grid": [1], "block": [1]}, sizes=["n"],
        params=[{"kind": "buffer", "name": "y", "dtype": "float64", "shape": [6, 40], "role": "out"}],
        cases=[{"name": "c", "role": "validation", "sizes": {"n": 1}}], tolerance={"float64": {"atol": 0, "rtol": 0}}))
    buf = task.spec.outputs[0]
    result = as_output_comparison(device, buf, task.spec, {"n": 1})
    assert not result.passed and result.mismatch_map == host


@pytest.mark.parametrize("shape", [(1500, 2001), (2_500_001,), (700_001, 3), (3, 5, 200_001)])
@pytest.mark.parametrize("wrong", [0.001, 0.3, 1.0])
def test_maps_of_multi_chunk_outputs_match_counts_taken_bin_by_bin(shape, wrong):
    """Chunks end mid-row; a few wrong elements and many are counted in different ways: both must agree with
    slicing the output bin by bin."""
    rng = np.random.default_rng(len(shape) + int(wrong * 10))
    ref = rng.standard_normal(shape)
    out = np.where(rng.random(shape) < wrong, ref + 1.0, ref)
    out.reshape(-1)[rng.integers(0, out.size, 50)] = np.nan
    _, m = _map(out, ref)
    grid = bin_grid(shape)
    view_bad = ~np.isclose(out, ref, rtol=TOL.rtol, atol=1e-3, equal_nan=False).reshape(grid.view_rows, grid.view_cols)
    view_nan = np.isnan(out).reshape(view_bad.shape)
    down = [-(-b * grid.view_rows // grid.rows) for b in range(grid.rows + 1)]
    across = [-(-b * grid.view_cols // grid.cols) for b in range(grid.cols + 1)]
    for i in range(grid.rows):
        for j in range(grid.cols):
            cell = np.s_[down[i] : down[i + 1], across[j] : across[j + 1]]
            assert m.mismatches[i][j] == np.count_nonzero(view_bad[cell]), (i, j)
            assert m.nonfinite[i][j] == np.count_nonzero(view_nan[cell]), (i, j)
            assert m.elements[i][j] == view_bad[cell].size, (i, j)
