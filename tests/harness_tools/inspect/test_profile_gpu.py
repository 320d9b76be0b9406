"""Nsight Compute and compute-sanitizer on the real GPU (``gpu`` marker; skipped without one)."""

from __future__ import annotations

import pytest

from harness_tools.inspect.profile import profile_candidate
from harness_tools.inspect.sanitize import sanitize_cuda
from harness_tools.task import candidate as candidates
from harness_tools.task.loading import bundled_task_names, resolve_task
from tests.transpose_kernels import OOB_LINE, OOB_READ, RACY_TRANSPOSE, TILE_LOAD_LINE, TILE_STORE_LINE, TILED_LAUNCH

pytestmark = pytest.mark.gpu



def _arch(cuda_backend) -> str:
    return cuda_backend.device_info().arch


@pytest.mark.parametrize("task_name", bundled_task_names())
def test_each_baseline_profile_parses_into_the_summary(cuda_backend, tmp_path, task_name):
    task = resolve_task(task_name)
    result = profile_candidate(task, candidates.baseline(task), _arch(cuda_backend), tmp_path)
    assert result.status == "ok", result.message
    s = result.summary
    first = candidates.baseline(task).steps()[0][0]  # a launch sequence is profiled at its first kernel
    assert s.kernel == first and s.duration_us > 0 and s.occupancy.registers_per_thread > 0
    assert len(s.text()) < 1800 and (tmp_path / "profile.ncu-rep").is_file()


def test_transpose_is_memory_bound_and_tiled_sgemm_compute_bound(cuda_backend, tmp_path):
    transpose = resolve_task("transpose")
    t = profile_candidate(transpose, candidates.baseline(transpose), _arch(cuda_backend), tmp_path / "t")
    sgemm = resolve_task("sgemm")
    tuned = candidates.tuned(sgemm, {"BM": 128, "BN": 64, "BK": 8, "TM": 8, "TN": 8, "MINB": 2, "WIDE_MIN": -1})
    g = profile_candidate(sgemm, tuned, _arch(cuda_backend), tmp_path / "g")
    assert t.summary.bound == "memory", t.summary.text()
    assert g.summary.bound == "compute", g.summary.text()


def test_sanitize_catches_an_out_of_bounds_read_and_a_missing_barrier_with_their_lines(cuda_backend, tmp_path):
    task = resolve_task("transpose")
    base = candidates.baseline(task)
    oob = base.model_copy(update={"source": OOB_READ})
    found = sanitize_cuda(task, oob, _arch(cuda_backend), tmp_path / "oob", tools=["memcheck"],
                          case_names=["val_odd_33x65"])
    assert found.status == "findings", found.text()
    assert any(f.line == OOB_LINE and "read" in f.kind for r in found.reports for f in r.findings), found.text()
    racy = base.model_copy(update={"source": RACY_TRANSPOSE, "launch": base.launch.model_validate(TILED_LAUNCH)})
    raced = sanitize_cuda(task, racy, _arch(cuda_backend), tmp_path / "race", tools=["racecheck"],
                          case_names=["val_odd_33x65"])
    assert raced.status == "findings", raced.text()
    lines = {f.line for r in raced.reports for f in r.findings}
    assert lines & {TILE_STORE_LINE, TILE_LOAD_LINE}, raced.text()
    clean = sanitize_cuda(task, base, _arch(cuda_backend), tmp_path / "clean", case_names=["val_odd_33x65"])
    assert clean.status == "clean", clean.text()
