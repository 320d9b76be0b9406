"""cudaopt new: a task folder from a kernel file, which loads at once, says what is missing, and once its reference
is written evaluates through the CLI and through MCP."""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
import pytest
from mcp import Client

from cudaopt_mcp.server.app import build_server
from cudaopt_mcp.service.state import ServerConfig
from harness_tools.errors import TaskSpecError
from harness_tools.task.loading import load_task
from harness_tools.task.scaffold import kernel_signature

SAXPY = """// y = a*x + y
#include <cuda_fp16.h>
extern "C" __global__ void __launch_bounds__(256) saxpy(const float* __restrict__ x, float *y, int n, float a,
                                                        const __half* unused) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""
REFERENCE = """def reference(inputs, sizes):
    return {"y": inputs["a"] * inputs["x"] + inputs["y"]}
"""


def cudaopt(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "cudaopt_mcp.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_the_signature_is_read_from_the_source():
    name, params = kernel_signature(SAXPY)
    assert name == "saxpy"
    assert [(p.name, p.dtype, p.pointer, p.const) for p in params] == [
        ("x", "float32", True, True), ("y", "float32", True, False), ("n", "int32", False, False),
        ("a", "float32", False, False), ("unused", "float16", True, True)]
    with pytest.raises(TaskSpecError, match="several kernels"):
        kernel_signature(SAXPY + 'extern "C" __global__ void other(int* p) {}')
    assert kernel_signature(SAXPY + 'extern "C" __global__ void other(int* p) {}', "other")[0] == "other"
    with pytest.raises(TaskSpecError, match="which a task cannot pass"):
        kernel_signature('__global__ void k(float3* p) {}')
    with pytest.raises(TaskSpecError, match="no __global__"):
        kernel_signature("int main() { return 0; }")


@pytest.mark.parametrize("source, says", [
    # the preprocessor picks another version than the one read first: the cubin has one more parameter
    ('#ifdef NEVER\nextern "C" __global__ void k(float* y) {}\n#else\n'
     'extern "C" __global__ void k(float* y, int n) { y[0] = n; }\n#endif\n', "takes 2"),
    # a typedef's real size differs from the name the reading took it for
    ('#define long short\nextern "C" __global__ void k(float* y, long n) { y[0] = n; }', "is 2 bytes"),
    ('extern "C" __global__ void k(float* y, int n) { y[0] = undefined_name; }', "does not compile"),
])
def test_a_signature_the_compiler_disagrees_with_writes_nothing(tmp_path, source, says):
    kernel = tmp_path / "k.cu"
    kernel.write_text(source)
    made = cudaopt("new", str(tmp_path / "task"), "--kernel", str(kernel))
    assert made.returncode == 2 and says in made.stderr, made.stderr
    assert not (tmp_path / "task").exists()


def test_a_scaffolded_task_loads_says_what_is_missing_then_evaluates(tmp_path):
    kernel = tmp_path / "saxpy.cu"
    kernel.write_text(SAXPY.replace(", const __half* unused", ""))
    folder = tmp_path / "saxpy_task"
    made = cudaopt("new", str(folder), "--kernel", str(kernel))
    assert made.returncode == 0, made.stderr
    assert "still to do" in made.stdout and "cudaopt eval" in made.stdout
    assert "signature: saxpy(float32* x, float32* y, int32 n, float32 a, float16* unused), checked against the " \
        "compiled cubin (5 parameters" in made.stdout, made.stdout
    task = load_task(folder)
    assert [c.sizes["n"] for c in task.spec.cases if c.role == "validation"] == [1, 31, 33, 255, 257, 1009]
    again = cudaopt("new", str(folder), "--kernel", str(kernel))
    assert again.returncode == 2 and "already holds a task.json" in again.stderr

    missing = cudaopt("eval", str(folder), "--backend", "cpu")
    assert missing.returncode == 2 and "write me" in missing.stderr and "['y']" in missing.stderr

    # what the author fills in: y is read and written, and the reference
    raw = json.loads((folder / "task.json").read_text())
    raw["params"][1]["role"] = "inout"
    raw["params"][3]["value"] = "2.5"
    raw["description"] = "y = a*x + y"
    (folder / "task.json").write_text(json.dumps(raw))
    (folder / "reference.py").write_text(REFERENCE)
    done = cudaopt("eval", str(folder), "--backend", "cpu", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["correct"]

    async def over_mcp():
        config = ServerConfig(results_dir=tmp_path / "results", backend="cpu", transport="inprocess")
        async with Client(build_server(config)) as client:
            run = (await client.call_tool("create_run", {"task": str(folder)})).structured_content
            result = await client.call_tool("evaluate", {"run_id": run["run_id"], "roles": ["validation"]})
            return result.structured_content
    assert anyio.run(over_mcp)["correct"]


def test_a_kernel_file_that_cannot_be_read_is_exit_2(tmp_path):
    bad = tmp_path / "k.cu"
    bad.write_text("__global__ void k(float3* p) {}")
    out = cudaopt("new", str(tmp_path / "t"), "--kernel", str(bad))
    assert out.returncode == 2 and "float3" in out.stderr and not (tmp_path / "t").exists()
    out = cudaopt("new", str(tmp_path / "t"), "--kernel", str(tmp_path / "missing.cu"))
    assert out.returncode == 2 and "cudaopt: error:" in out.stderr
