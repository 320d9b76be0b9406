"""Profiling and sanitizing when the tools are missing, refuse, or hang: clear answers, nothing hangs.

Stand-in ``ncu`` / ``compute-sanitizer`` executables (small shell scripts) play the external tools; the
engine around them is real (NVRTC compile, inputs, request files, the process-group timeout)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness_tools.inspect.profile import INSTALL_HINT, PERMISSION_HINT, profile_candidate
from harness_tools.inspect.sanitize import sanitize_cuda
from harness_tools.task import candidate as candidates
from harness_tools.task.loading import resolve_task


def fake_tool(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def transpose():
    task = resolve_task("transpose")
    return task, candidates.baseline(task)


def test_missing_ncu_says_how_to_get_it(monkeypatch, tmp_path, transpose):
    monkeypatch.setenv("CUDAOPT_NCU", str(tmp_path / "no-such-ncu"))
    result = profile_candidate(*transpose, "sm_90", tmp_path / "p")
    assert result.status == "unavailable" and INSTALL_HINT in result.message and result.summary is None


def test_counters_not_permitted_is_reported_with_the_fix(monkeypatch, tmp_path, transpose):
    ncu = fake_tool(tmp_path, "ncu", 'echo "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access '
                                     'NVIDIA GPU Performance Counters on the target device 0."; exit 1')
    monkeypatch.setenv("CUDAOPT_NCU", str(ncu))
    result = profile_candidate(*transpose, "sm_90", tmp_path / "p")
    assert result.status == "unavailable" and result.message == PERMISSION_HINT
    assert (tmp_path / "p" / "ncu.log").read_text().startswith("==ERROR== ERR_NVGPUCTRPERM")
    assert (tmp_path / "p" / "request.pkl").is_file()  # the launcher's request was prepared for a perf case
    assert result.case == "perf_8192x8192"


def test_a_hanging_profiler_is_killed_at_the_timeout(monkeypatch, tmp_path, transpose):
    ncu = fake_tool(tmp_path, "ncu", "sleep 300 & sleep 300; wait")
    monkeypatch.setenv("CUDAOPT_NCU", str(ncu))
    started = time.monotonic()
    result = profile_candidate(*transpose, "sm_90", tmp_path / "p", timeout_s=2)
    assert result.status == "timeout" and "2 s" in result.message
    assert time.monotonic() - started < 30


def test_no_kernel_profiled_is_a_failure_with_the_tools_last_lines(monkeypatch, tmp_path, transpose):
    ncu = fake_tool(tmp_path, "ncu", 'echo "==WARNING== No kernels were profiled."; exit 0')
    monkeypatch.setenv("CUDAOPT_NCU", str(ncu))
    result = profile_candidate(*transpose, "sm_90", tmp_path / "p", case_name="perf_4097x3001")
    assert result.status == "failed" and "No kernels were profiled" in result.message
    assert result.case == "perf_4097x3001"


def test_an_unknown_case_is_refused(monkeypatch, tmp_path, transpose):
    monkeypatch.setenv("CUDAOPT_NCU", str(fake_tool(tmp_path, "ncu", "exit 0")))
    with pytest.raises(Exception, match="no case 'nope'"):
        profile_candidate(*transpose, "sm_90", tmp_path / "p", case_name="nope")


def test_missing_compute_sanitizer_says_how_to_get_it(monkeypatch, tmp_path, transpose):
    monkeypatch.setenv("CUDAOPT_COMPUTE_SANITIZER", str(tmp_path / "none"))
    result = sanitize_cuda(*transpose, "sm_90", tmp_path / "s")
    assert result.status == "unavailable" and "CUDAOPT_COMPUTE_SANITIZER" in result.message


def test_sanitizer_output_becomes_findings_and_a_hang_a_timeout(monkeypatch, tmp_path, transpose):
    report = ("========= COMPUTE-SANITIZER\n"
              "========= Invalid __global__ write of size 4 bytes\n"
              "=========     at transpose+0x1d0 in /build/x/kernel.cu:6\n"
              "=========     by thread (3,0,0) in block (0,0,0)\n"
              "=========     Address 0x7f0000001000 is out of bounds\n"
              "========= ERROR SUMMARY: 1 error")
    sanitizer = fake_tool(tmp_path, "compute-sanitizer", f"cat <<'EOF'\n{report}\nEOF\nexit 0")
    monkeypatch.setenv("CUDAOPT_COMPUTE_SANITIZER", str(sanitizer))
    result = sanitize_cuda(*transpose, "sm_90", tmp_path / "s", tools=["memcheck"], case_names=["val_odd_33x65"])
    assert result.status == "findings" and result.cases == ["val_odd_33x65"]
    finding = result.reports[0].findings[0]
    assert (finding.file, finding.line) == ("kernel.cu", 6) and "/build" not in result.text()
    hang = fake_tool(tmp_path, "hang", "sleep 300")
    monkeypatch.setenv("CUDAOPT_COMPUTE_SANITIZER", str(hang))
    slow = sanitize_cuda(*transpose, "sm_90", tmp_path / "s2", tools=["racecheck"], case_names=["val_odd_33x65"],
                         timeout_s=2)
    assert slow.status == "timeout" and "racecheck" in slow.message
