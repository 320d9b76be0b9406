"""Facts read from the cubin itself agree with ptxas' own report."""

from __future__ import annotations

from harness_tools.compile import compile_candidate
from harness_tools.compile.cubin import read_cubin
from harness_tools.compile.nvrtc import parse_resources
from harness_tools.task.candidate import Candidate

SOURCE = """
__device__ __noinline__ float helper(const float* x, int i) { return x[i] * 2.f; }
extern "C" __global__ void with_stack(float* x, int n) {
    __shared__ float s[256];
    float local[64];
    for (int j = 0; j < 64; ++j) local[j] = x[j * n];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.f;
    __syncthreads();
    if (i < n) x[i] = s[255 - threadIdx.x] + local[n & 63] + helper(x, i);
}
extern "C" __global__ void plain(double* y) { __shared__ double t[100]; t[threadIdx.x] = 1; __syncthreads(); y[0] = t[3]; }
"""


def test_cubin_facts_match_ptxas():
    cand = Candidate(source=SOURCE, kernel_name="plain", launch={"grid": [1], "block": [1]})
    result = compile_candidate(cand, "sm_90")
    assert result.ok, result.log
    facts = read_cubin(result.cubin)
    assert set(facts.kernels) == {"with_stack", "plain"}  # the device function is not an entry
    assert result.entries == ["plain", "with_stack"]
    for name in facts.kernels:
        ptxas = parse_resources(result.full_log, name)
        assert ptxas is not None
        k = facts.kernels[name]
        assert (k.registers, k.frame_bytes, k.static_shared_bytes) == (
            ptxas.registers, ptxas.stack_bytes, ptxas.static_shared_bytes)
    assert facts.kernels["with_stack"].frame_bytes >= 256
    assert facts.kernels["plain"].static_shared_bytes == 800


def test_garbage_is_not_a_cubin():
    assert read_cubin(b"not an elf").kernels == {}
    assert read_cubin(b"\x7fELF\x02" + b"\x00" * 10).kernels == {}


def test_parameter_sizes_come_from_the_cubin_in_declaration_order():
    from harness_tools.task.spec import LaunchSpec

    source = ('extern "C" __global__ void k(const float* a, float* b, int n, unsigned long long m, double d, short s)'
              " { if (n) b[0] = a[0] + m + d + s; }\n"
              'extern "C" __global__ void none() {}\n')
    result = compile_candidate(Candidate(source=source, kernel_name="k", launch=LaunchSpec(grid=[1], block=[1])), "sm_90")
    assert result.ok and result.param_sizes == [8, 8, 4, 8, 8, 2]
    assert read_cubin(result.cubin).kernels["none"].param_sizes == []
