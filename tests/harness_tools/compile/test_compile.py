"""NVRTC → cubin with real NVRTC (no GPU needed): results, resources, errors, cache and log filtering."""

from __future__ import annotations

import uuid

import pytest

from harness_tools.compile import compile_candidate
from harness_tools.compile.nvrtc import LOG_CAP_CHARS, filter_log, parse_resources
from harness_tools.task.candidate import Candidate

ARCH = "sm_90"
LAUNCH = {"grid": [1], "block": [256]}

SHARED_KERNEL = """\
extern "C" __global__ void k(float* x) {
    __shared__ float s[256];
    s[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    x[threadIdx.x] = s[255 - threadIdx.x];
}
"""


def candidate(source: str, kernel_name: str = "k", **kwargs) -> Candidate:
    return Candidate(source=source, kernel_name=kernel_name, launch=LAUNCH, **kwargs)


def unique(source: str) -> str:
    """A source no earlier test compiled, so the module-wide cache cannot answer for it."""
    return f"// {uuid.uuid4().hex}\n{source}"


def test_successful_compile():
    result = compile_candidate(candidate(SHARED_KERNEL), ARCH)
    assert result.ok and result.status == "ok", result.log
    assert result.arch == ARCH and result.kernel_name == "k"
    assert isinstance(result.cubin, bytes) and result.cubin.startswith(b"\x7fELF")
    assert result.entries == ["k"]
    assert result.nvrtc_version.count(".") == 1
    res = result.resources
    assert res is not None
    assert res.registers is not None and res.registers > 0
    assert res.static_shared_bytes == 256 * 4
    assert res.barriers is not None and res.barriers >= 1
    assert (res.stack_bytes, res.spill_store_bytes, res.spill_load_bytes) == (0, 0, 0)
    # The cubin and the uncapped log stay out of serialised results.
    dumped = result.model_dump()
    assert "cubin" not in dumped and "full_log" not in dumped


def test_local_array_with_dynamic_index_uses_stack():
    source = """\
extern "C" __global__ void k(float* x, int i) {
    float a[512];
    for (int j = 0; j < 512; ++j) a[j] = x[j];
    x[0] = a[i];
}
"""
    result = compile_candidate(candidate(source), ARCH)
    assert result.ok, result.log
    assert result.resources.stack_bytes >= 512 * 4
    assert result.resources.static_shared_bytes == 0


def test_resources_belong_to_the_requested_entry():
    source = SHARED_KERNEL + 'extern "C" __global__ void k_big(float* x, int i) {\n' \
        "    float a[512];\n    for (int j = 0; j < 512; ++j) a[j] = x[j];\n    x[0] = a[i];\n}\n"
    small = compile_candidate(candidate(source, "k"), ARCH)
    big = compile_candidate(candidate(source, "k_big"), ARCH)
    assert small.ok and big.ok
    assert sorted(small.entries) == ["k", "k_big"]
    assert small.resources.static_shared_bytes == 1024 and small.resources.stack_bytes == 0
    assert big.resources.static_shared_bytes == 0 and big.resources.stack_bytes >= 2048


def test_syntax_error_names_the_line():
    source = 'extern "C" __global__ void k(float* x) {\n    float y = 1.0f;\n    x[0] = y + undefined_thing;\n}\n'
    result = compile_candidate(candidate(source), ARCH)
    assert not result.ok and result.status == "error"
    assert result.cubin is None and result.resources is None
    assert "kernel.cu(3): error" in result.log
    assert "undefined_thing" in result.log


def test_kernel_name_not_in_source():
    result = compile_candidate(candidate(SHARED_KERNEL, kernel_name="other"), ARCH)
    assert not result.ok and result.status == "error"
    assert result.cubin is None
    assert "'other' is not an entry point" in result.log
    assert "['k']" in result.log


def test_kernel_without_extern_c_is_mangled():
    source = "__global__ void k(float* x) { x[0] = 1.0f; }\n"
    result = compile_candidate(candidate(source), ARCH)
    assert not result.ok and result.status == "error"
    assert result.entries == ["_Z1kPf"]
    assert "'k' is not an entry point" in result.log
    assert 'extern "C"' in result.log


def test_cache_hit_for_identical_candidate_only():
    source = unique("extern \"C\" __global__ void k(float* x) { x[threadIdx.x] = BS; }\n")
    first = compile_candidate(candidate(source, defines={"BS": 128}), ARCH)
    again = compile_candidate(candidate(source, defines={"BS": 128}), ARCH)
    changed = compile_candidate(candidate(source, defines={"BS": 64}), ARCH)
    assert first.ok and again.ok and changed.ok
    assert first.cached is False
    assert again.cached is True
    assert again.cubin == first.cubin
    assert changed.cached is False


def test_cache_ignores_the_launch_configuration_but_not_options():
    source = unique('extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n')
    compile_candidate(candidate(source), ARCH)
    other_launch = Candidate(source=source, kernel_name="k", launch={"grid": [4], "block": [64]})
    assert compile_candidate(other_launch, ARCH).cached is True
    assert compile_candidate(candidate(source, options=["--use_fast_math"]), ARCH).cached is False


def test_defines_reach_the_source():
    source = unique(
        '#if BS != 128\n#error BS must be 128\n#endif\nextern "C" __global__ void k(float* x) { x[0] = BS; }\n'
    )
    good = compile_candidate(candidate(source, defines={"BS": 128}), ARCH)
    assert good.ok, good.log
    bad = compile_candidate(candidate(source, defines={"BS": 64}), ARCH)
    assert bad.status == "error"
    assert "kernel.cu(3)" in bad.log and "BS must be 128" in bad.log
    missing = compile_candidate(candidate(source), ARCH)
    assert missing.status == "error"


SYNTHETIC_LOG = """\
In file included from /etc/passwd
/etc/passwd(1): error: root:x:0:0:root:/root:/bin/bash
  root:x:0:0:root:/root:/bin/bash
  ^

/etc/passwd(2): error: expected a ";"
  daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
        ^

kernel.cu(7): error: identifier "foo" is undefined
      foo();
      ^

ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k' for 'sm_90'
2 errors detected in the compilation of "kernel.cu".
"""


def test_filter_log_drops_other_files_and_keeps_ours():
    kept = filter_log(SYNTHETIC_LOG)
    assert "root:x" not in kept
    assert "daemon" not in kept
    assert "/etc/passwd" not in kept
    assert 'kernel.cu(7): error: identifier "foo" is undefined' in kept
    assert "      foo();" in kept
    assert "ptxas info    : Compiling entry function 'k' for 'sm_90'" in kept
    assert '2 errors detected in the compilation of "kernel.cu".' in kept
    assert "[2 diagnostic(s) located in other files omitted]" in kept


def test_filter_log_keeps_a_clean_log_unchanged():
    log = 'kernel.cu(3): warning #177-D: variable "a" was declared but never referenced\n  int a;\n      ^\n'
    assert filter_log(log) == log.strip()


SYNTHETIC_PTXAS = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k_big' for 'sm_90'
ptxas info    : Function properties for k_big
ptxas         .     2048 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 30 registers, used 0 barriers, 2048 bytes cumulative stack size
ptxas info    : Compile time = 12.512 ms
ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 1 barriers, 1024 bytes smem, 380 bytes cmem[0]
ptxas info    : Compile time = 1.366 ms
"""


def test_parse_resources_picks_the_named_entry():
    k = parse_resources(SYNTHETIC_PTXAS, "k")
    assert k is not None
    assert (k.registers, k.barriers, k.static_shared_bytes, k.constant_bytes) == (10, 1, 1024, 380)
    assert (k.stack_bytes, k.spill_store_bytes, k.spill_load_bytes) == (0, 0, 0)
    big = parse_resources(SYNTHETIC_PTXAS, "k_big")
    assert big is not None
    assert (big.registers, big.barriers, big.static_shared_bytes) == (30, 0, 0)
    assert (big.stack_bytes, big.spill_store_bytes, big.spill_load_bytes) == (2048, 8, 12)
    assert parse_resources(SYNTHETIC_PTXAS, "k_") is None


def test_very_long_log_is_capped():
    source = unique(
        "".join(f"__device__ int v{i} = an_undefined_identifier_with_a_long_name_{i};\n" for i in range(300))
        + 'extern "C" __global__ void k(float* x) {}\n'
    )
    result = compile_candidate(candidate(source), ARCH)
    assert result.status == "error"
    assert result.log_truncated is True
    assert len(result.log) <= LOG_CAP_CHARS
    assert len(result.full_log) > len(result.log)
    assert "more characters in the full log" in result.log
    assert result.full_log.startswith(result.log.split("\n…")[0])


def test_short_log_is_not_capped():
    result = compile_candidate(candidate(SHARED_KERNEL), ARCH)
    assert result.log_truncated is False
    assert result.log == result.full_log


@pytest.mark.parametrize("arch", ["sm90", "compute_90", "sm_9", "sm_90 --pre-include=/etc/passwd", "", "SM_90"])
def test_bad_arch_raises_value_error(arch):
    with pytest.raises(ValueError, match="arch"):
        compile_candidate(candidate(SHARED_KERNEL), arch)


def test_nvrtc_loads_from_the_wheel_without_a_toolkit(tmp_path):
    """No nvcc on PATH, no CUDA_HOME/CUDA_PATH, no LD_LIBRARY_PATH: NVRTC still comes from pip."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + "/usr/bin" + os.pathsep + "/bin"
    script = (
        "import shutil; assert shutil.which('nvcc') is None, 'nvcc still on PATH'\n"
        "from harness_tools.task.candidate import Candidate\n"
        "from harness_tools.compile import compile_candidate\n"
        "c = Candidate(source='#include <cuda_fp16.h>\\nextern \"C\" __global__ void k(__half* x) { x[0] = __float2half(1.f); }',"
        " kernel_name='k', launch={'grid': [1], 'block': [1]})\n"
        "r = compile_candidate(c, 'sm_90'); assert r.ok, r.log; print('cubin', len(r.cubin))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("cubin ")


def test_a_compile_past_its_timeout_is_an_error_and_the_next_compile_works():
    """NVRTC runs in a child process: a hang costs that process only, never the caller."""
    from harness_tools.compile import compile_candidate
    from harness_tools.task.candidate import Candidate

    def cand(tag: str) -> Candidate:
        return Candidate(source=f'extern "C" __global__ void k(float* x) {{ x[0] = {tag}; }}\n', kernel_name="k",
                         launch={"grid": [1], "block": [1]})

    slow = compile_candidate(cand("1.0f"), "sm_90", timeout_s=0.001)
    assert not slow.ok and slow.status == "error" and "did not finish within" in slow.log
    again = compile_candidate(cand("1.0f"), "sm_90")  # not cached as a failure
    assert again.ok and not again.cached and again.cubin


def test_arch_specific_targets_sm_90a_so_hopper_only_instructions_compile():
    source = ('extern "C" __global__ void k(float* x) {\n'
              '    asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");\n'
              '    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\\n");\n    x[0] = 1.0f;\n}\n')
    plain = compile_candidate(Candidate(source=source, kernel_name="k", launch={"grid": [1], "block": [128]}), "sm_90")
    assert not plain.ok and "not supported on .target 'sm_90'" in plain.log
    specific = compile_candidate(Candidate(source=source, kernel_name="k", launch={"grid": [1], "block": [128]},
                                           options=["--arch-specific"]), "sm_90")
    assert specific.ok and specific.arch == "sm_90a", specific.log
    assert "--arch-specific" not in specific.log  # ours, never passed to NVRTC


def test_a_source_define_that_shadows_a_candidate_define_is_refused():
    source = '#define CHUNK 2048\nextern "C" __global__ void k(float* x) { x[0] = CHUNK; }\n'
    shadowed = compile_candidate(Candidate(source=source, kernel_name="k", launch={"grid": [1], "block": ["CHUNK / 64"]},
                                           defines={"CHUNK": 4096}), "sm_90")
    assert not shadowed.ok and "the source #defines CHUNK, which the candidate also sets (-DCHUNK=4096" in shadowed.log
    guarded = source.replace("#define CHUNK 2048", "#ifndef CHUNK\n#define CHUNK 2048\n#endif")
    assert compile_candidate(Candidate(source=guarded, kernel_name="k", launch={"grid": [1], "block": [64]},
                                       defines={"CHUNK": 4096}), "sm_90").ok
    same = source.replace("2048", "4096")  # an identical redefinition is legal C and means the same
    assert compile_candidate(Candidate(source=same, kernel_name="k", launch={"grid": [1], "block": [64]},
                                       defines={"CHUNK": 4096}), "sm_90").ok


def test_a_define_named_like_a_header_identifier_is_explained():
    source = ('#include <cuda_fp16.h>\n'
              'extern "C" __global__ void k(__half* y) { y[threadIdx.x] = __float2half((float)T); }\n')
    clashing = compile_candidate(Candidate(source=source, kernel_name="k", launch=LAUNCH, defines={"T": "8"}), "sm_90")
    assert not clashing.ok
    assert "the define T is also an identifier in cuda_fp16.h" in clashing.log and "-DT=8" in clashing.log
    renamed = source.replace("(float)T", "(float)TILE")
    fine = compile_candidate(Candidate(source=renamed, kernel_name="k", launch=LAUNCH, defines={"TILE": "8"}), "sm_90")
    assert fine.ok and "also an identifier" not in fine.log
