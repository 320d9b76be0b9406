"""The ``cudaopt`` command line, run as a real subprocess: listing tasks and refusing bad input clearly."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness_tools.backends.cuda.backend import gpu_present


def cudaopt(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cudaopt_mcp.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_tasks_lists_the_bundled_tasks():
    out = cudaopt("tasks", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert set(rows) == {"sgemm", "reduce_sum", "softmax_rows", "transpose", "rmsnorm_bf16", "softmax_split", "gemm_bf16",
                         "gemm_bf16_wgmma"}
    assert {"BM", "BN", "BK", "TM", "TN"} <= set(rows["sgemm"]["tunables"])
    plain = cudaopt("tasks")
    assert plain.returncode == 0 and "sgemm" in plain.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["eval", "no_such_task"], "not a bundled task"),
        (["eval", "sgemm", "--kernel", "missing.cu"], "missing.cu"),
        (["eval", "sgemm", "--launch", "{not json"], "error"),
        (["eval", "sgemm", "--launch", '{"grid": [1]}'], "block"),
        (["eval", "sgemm", "--tuned", "BM=abc"], "invalid literal"),
        (["eval", "sgemm", "--tuned", "XX=1"], "unknown tunables"),
        (["eval", "sgemm", "--tuned", "BM=64"], "missing tunables ['BK', 'BN', 'MINB', 'TM', 'TN', 'WIDE_MIN']"),
        (["eval", "sgemm", "-D", "novalue"], "NAME=VALUE"),
        (["eval", "sgemm", "-D", 'X="/etc/passwd"'], "simple expressions"),
        (["eval", "sgemm", "--tuned", "BM=64", "--kernel", "k.cu"], "exclude each other"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(args, message, tmp_path):
    out = cudaopt(*args, cwd=tmp_path)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert message in out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_bad_task_folder_names_file_and_field(tmp_path):
    (tmp_path / "task.json").write_text('{"name": "x"}')
    out = cudaopt("eval", str(tmp_path))
    assert out.returncode == 2
    assert "task.json" in out.stderr and "description" in out.stderr


def test_unknown_backend_is_refused_by_the_parser():
    out = cudaopt("eval", "sgemm", "--backend", "tpu")
    assert out.returncode == 2 and "invalid choice" in out.stderr


@pytest.mark.skipif(gpu_present(), reason="checks the message on machines without a GPU")
def test_eval_without_a_gpu_says_so():
    out = cudaopt("eval", "sgemm", "--backend", "cuda")
    assert out.returncode == 2
    assert "no NVIDIA GPU" in out.stderr


@pytest.mark.gpu
def test_eval_json_on_the_gpu(tmp_path):
    out = cudaopt("eval", "transpose", "--json", "--reps", "5", "--warmup", "1", "--keep", str(tmp_path / "keep"))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["compile"]["ok"] is True and data["correct"] is True and data["score_ms"] > 0
    for case in data["cases"]:
        assert {"name", "role", "passed", "max_abs_err", "median_ms"} <= set(case)
        if case["role"] == "performance":
            assert len(case["timing"]["samples_ms"]) == 5
    assert (tmp_path / "keep" / "compile.log").is_file() and (tmp_path / "keep" / "result.json").is_file()
    assert 0 < data["environment"]["device"]["timing_floor_ms"] < min(c["median_ms"] for c in data["cases"]
                                                                      if c["role"] == "performance")


@pytest.mark.gpu
def test_eval_of_a_wrong_kernel_exits_1(tmp_path):
    kernel = tmp_path / "bad.cu"
    kernel.write_text('extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {\n'
                      "  int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;\n"
                      "  if (r < rows && c < cols) out[r * cols + c] = in[r * cols + c];\n}\n")
    out = cudaopt("eval", "transpose", "--kernel", str(kernel), "--only", "validation")
    assert out.returncode == 1
    assert "NOT CORRECT" in out.stdout and "mismatch" in out.stdout
    assert "an empty kernel measures" in out.stdout  # the timing floor, on a GPU


@pytest.mark.skipif(gpu_present(), reason="checks the fallback on machines without a GPU")
def test_without_a_gpu_eval_falls_back_to_the_cpu_backend(tmp_path):
    out = cudaopt("eval", "transpose", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "no GPU found; using the cpu backend" in out.stderr
    data = json.loads(out.stdout)
    assert data["backend"] == "cpu" and data["correct"] is True
    # on the cpu backend only the performance case sized for a CPU runs, timed in CPU time
    timed = [c for c in data["cases"] if c["role"] == "performance"]
    assert [c["name"] for c in timed] == ["perf_cpu_1024x1024"]
    assert data["score_ms"] is not None and timed[0]["timing"]["clock"] == "cpu-wall-clock"


def test_cpu_eval_table_labels_cpu_timings(tmp_path):
    out = cudaopt("eval", "reduce_sum", "--backend", "cpu", "--only", "validation", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "CPU wall clock" in out.stdout and "CORRECT" in out.stdout


def test_cpu_eval_of_a_kernel_with_a_divergent_barrier_exits_1(tmp_path):
    kernel = tmp_path / "div.cu"
    kernel.write_text('extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {\n'
                      "  if (threadIdx.x < 3) __syncthreads();\n"
                      "  int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;\n"
                      "  if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];\n}\n")
    out = cudaopt("eval", "transpose", "--backend", "cpu", "--kernel", str(kernel), cwd=tmp_path)
    assert out.returncode == 1
    assert "kernel.cu(2)" in out.stdout and "__syncthreads" in out.stdout


def test_serve_on_a_public_address_without_a_token_refuses_to_start(tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if k != "CUDAOPT_MCP_TOKEN"}
    out = subprocess.run([sys.executable, "-m", "cudaopt_mcp.cli", "serve", "--transport", "http", "--host", "0.0.0.0",
                          "--port", "1", "--results", str(tmp_path)], capture_output=True, text=True, timeout=60,
                         env=env)
    assert out.returncode == 2
    assert "CUDAOPT_MCP_TOKEN" in out.stderr


def test_dash_vv_logs_each_steps_timings_and_dash_v_does_not(tmp_path):
    """-vv: the engine's and the service's DEBUG lines (a hidden check's time, say)."""
    def stderr(flag: str) -> str:
        out = cudaopt(flag, "optimize", "examples/vector_add", "--backend", "cpu", "--max-iterations", "0",
                      "--no-report", "--no-confirm", "--results", str(tmp_path / flag))
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stderr

    debug, info = stderr("-vv"), stderr("-v")
    assert "hidden check of c0001" in debug and "hidden check of" not in info
    assert "baseline: c0001" in info and "starting the cpu backend" in info
