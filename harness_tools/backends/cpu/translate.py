"""From CUDA source to a C++ translation unit for the cpu backend.

The source is compiled by g++ against ``runtime/cudaopt_cpu.h`` almost unchanged; this module
(1) refuses up front, with the construct and its line, what the CPU runtime cannot honour,
(2) rewrites ``extern __shared__`` declarations to the block's dynamic shared memory (keeping line
numbers), (3) decides whether the kernel needs fibers, and (4) generates the launcher that unpacks
the kernel's arguments.
"""

from __future__ import annotations

import re

from harness_tools.backends.contract import ArgSpec, CaseRequest
from harness_tools.task.dtypes import HALF_TYPES
from harness_tools.task.include_guard import code_lines

# (pattern on a comment-free, literal-blanked line, what to say). Checked in order; one report per line.
_UNSUPPORTED: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(asm|__asm__|__asm)\b"), "inline PTX `asm` cannot run on the CPU"),
    (re.compile(r"\b(wmma|nvcuda|mma_sync|load_matrix_sync|__hmma\w*)\b|<mma\.h>|\"mma\.h\""),
     "warp matrix operations (wmma/mma) are not supported on the cpu backend"),
    (re.compile(r"\b(__pipeline_\w+|memcpy_async|cp_async\w*|__cp_async\w*|cuda_pipeline)\b"),
     "asynchronous copies (cp.async / memcpy_async / pipelines) are not supported on the cpu backend"),
    (re.compile(r"\b(cp\.async|cp\.async\.bulk|cuTensorMap\w*|CUtensorMap\w*|tma\w*)\b"),
     "TMA / bulk asynchronous copies are not supported on the cpu backend"),
    (re.compile(r"\bcuda\s*::\s*(barrier|pipeline|std|memcpy_async|atomic\w*)\b|\bcuda::"),
     "libcu++ (cuda::barrier, cuda::std, ...) is not supported on the cpu backend"),
    (re.compile(r"\b(cooperative_groups|this_grid|grid_group|this_cluster|cluster_group)\b"),
     "cooperative groups (grid-wide sync, clusters) are not supported on the cpu backend"),
    (re.compile(r"\b(__cluster_dims__|cluster_dims|__cluster_\w+|cudaLaunchKernelEx)\b"),
     "thread block clusters are not supported on the cpu backend"),
    (re.compile(r"\b(tex1D\w*|tex2D\w*|tex3D\w*|texCubemap\w*|texture|cudaTextureObject_t|surf\dD\w*|"
                r"surfCubemap\w*|cudaSurfaceObject_t|tex1Dfetch)\b"),
     "textures and surfaces are not supported on the cpu backend"),
    (re.compile(r"<<<|\bcudaLaunchDevice\b|\bcudaGetParameterBuffer\b"),
     "dynamic parallelism (launching kernels from device code) is not supported on the cpu backend"),
    (re.compile(r"\b(cub|thrust|cutlass|cute)\s*::"), "CUB/Thrust/CUTLASS are not supported on the cpu backend"),
    # __half, __nv_bfloat16 and the fp8 types e4m3/e5m2 are emulated (runtime/cudaopt_cpu_half.h, _fp8.h); the
    # e8m0 scale type is not
    (re.compile(r"\b(__nv_fp8\w*e8m0\w*|__nv_cvt_\w*e8m0\w*)\b"),
     "the e8m0 scale type (__nv_fp8_e8m0, __nv_cvt_*_e8m0) is not supported on the cpu backend"),
    (re.compile(r"\b(__syncthreads_count|__syncthreads_and|__syncthreads_or)\b(?=\s*\(\s*\))"),
     "__syncthreads_count/_and/_or need a predicate"),
]

_FIBER_NAMES = re.compile(
    r"\b(__syncthreads\w*|__syncwarp|__shfl\w*|__ballot_sync|__any_sync|__all_sync|__activemask|"
    r"__match_any_sync|__match_all_sync|__reduce_\w+_sync|__uni_sync|__nanosleep)\b"
)

_DYNAMIC_SHARED = re.compile(
    r"extern\s+(?:(?:__align__|alignas)\s*\(\s*\d+\s*\)\s*)?__shared__\s+"
    r"(?:(?:__align__|alignas)\s*\(\s*\d+\s*\)\s*)?(?P<type>[A-Za-z_][\w\s:<>,*]*?)\s*"
    r"(?P<name>[A-Za-z_]\w*)\s*\[\s*\]\s*;"
)

_CTYPES = {
    "float32": "float", "float64": "double", "int8": "signed char",
    "int16": "short", "int32": "int", "int64": "long long", "uint8": "unsigned char",
    "uint16": "unsigned short", "uint32": "unsigned int", "uint64": "unsigned long long",
}


def unsupported(source: str) -> list[str]:
    """``kernel.cu(LINE): what`` for every construct the cpu backend refuses."""
    problems = []
    plain = dict(code_lines(source))
    for line, text in code_lines(source, blank_literals=True):
        if text.lstrip().startswith(("#", "%:")):
            text = plain[line]  # a directive's operand (an #include's header name) is not a literal
        for pattern, message in _UNSUPPORTED:
            if pattern.search(text):
                problems.append(f"kernel.cu({line}): {message}")
                break
    return problems


def needs_fibers(source: str) -> bool:
    """Whether any barrier or warp operation appears; without them threads can run one after another."""
    return any(_FIBER_NAMES.search(text) for _, text in code_lines(source, blank_literals=True))


def rewrite_dynamic_shared(source: str) -> str:
    """``extern __shared__ T name[];`` → the block's dynamic shared memory, keeping line numbers.

    Inside a function it becomes a local pointer; at namespace scope a ``#define`` (a directive needs
    a line of its own: if the declaration shares its line with other code, later lines shift by one).
    """
    memory = "(::cudaopt::rt::current()->dynamic_shared)"
    pieces: list[str] = []
    pos = depth = 0
    for m in _DYNAMIC_SHARED.finditer(source):
        depth += _brace_delta(source[pos : m.start()])
        ctype, name = " ".join(m.group("type").split()), m.group("name")
        if depth > 0:
            replacement = f"{ctype}* const {name} = reinterpret_cast<{ctype}*>{memory};"
        else:
            replacement = f"#define {name} (reinterpret_cast<{ctype}*>{memory})"
            line_start = source.rfind("\n", 0, m.start()) + 1
            line_end = source.find("\n", m.end())
            if source[line_start : m.start()].strip():
                replacement = "\n" + replacement
            if source[m.end() : line_end if line_end >= 0 else len(source)].strip():
                replacement += "\n"
        pieces += [source[pos : m.start()], replacement + "\n" * m.group(0).count("\n")]
        pos = m.end()
    pieces.append(source[pos:])
    return "".join(pieces)


def _brace_delta(chunk: str) -> int:
    return sum(t.count("{") - t.count("}") for _, t in code_lines(chunk, blank_literals=True))


def launcher(request: CaseRequest) -> str:
    """The extern "C" entry points the executor calls: ``cudaopt_launch_<i>`` for launch ``i`` of the request,
    each unpacking ``void**`` args into its kernel's parameters (also as ``cudaopt_launch_table``), and
    ``cudaopt_constant_lookup(name, &size)``: the address and size of each __constant__ symbol the task fills.

    Pointers go through a proxy that converts to whatever pointer type the kernel declares (``int64_t*``
    is ``long*`` to g++ but ``long long*`` to NVRTC); scalars are passed as the task's dtype, and 16-bit floats
    as their bit pattern copied into the declared type (the launcher cannot name ``__half``: it exists only
    where the kernel includes cuda_fp16.h, and converting a number to it would round, not copy). A kernel may be
    a C++ name expression (``gemm<128, 64>``): the call instantiates the template as NVRTC did.
    """
    # Every name here is reserved (double underscore): a candidate's macros (T, a, p, ...) cannot clash.
    entries = []
    for number, launch in enumerate(request.launches):
        call = f"{launch.kernel_name}({', '.join(_unpacked(i, request.args[a]) for i, a in enumerate(launch.args))});"
        entries.append(f'extern "C" int cudaopt_launch_{number}(const cudaopt_launch_config* __c, void** __args) {{\n'
                       f"    return cudaopt_run_grid(__c, [](void** __a) {{ {call} }}, __args);\n}}\n")
    table = ", ".join(f"cudaopt_launch_{n}" for n in range(len(request.launches)))
    entries.append(f'extern "C" int (*const cudaopt_launch_table[])(const cudaopt_launch_config*, void**) = {{{table}}};\n'
                   f'extern "C" const int cudaopt_launch_count = {len(request.launches)};\n')
    lookups = "".join(f'    if (__builtin_strcmp(__name, "{a.constant}") == 0) {{ *__size = sizeof({a.constant}); '
                      f"return (void*)&{a.constant}; }}\n" for a in request.args if a.constant is not None)
    entries.append('extern "C" void* cudaopt_constant_lookup(const char* __name, unsigned long long* __size) {\n'
                   f"{lookups}    *__size = 0; return nullptr;\n}}\n")
    return (
        "\n#line 1 \"cudaopt_launcher\"\n"
        "struct __cudaopt_pointer {\n"
        "    void* __p;\n"
        "    template <class __CudaoptT> operator __CudaoptT*() const { return static_cast<__CudaoptT*>(__p); }\n"
        "};\n"
        "struct __cudaopt_bits16 {\n"
        "    unsigned short __b;\n"
        "    template <class __CudaoptT> operator __CudaoptT() const {\n"
        "        static_assert(sizeof(__CudaoptT) == 2, \"a 16-bit float parameter\");\n"
        "        __CudaoptT __v; std::memcpy(&__v, &__b, 2); return __v;\n"
        "    }\n"
        "};\n" + "".join(entries)
    )


def _unpacked(position: int, arg: ArgSpec) -> str:
    if arg.kind == "buffer":
        return f"__cudaopt_pointer{{*(void**)__a[{position}]}}"
    if arg.dtype in HALF_TYPES:
        return f"__cudaopt_bits16{{*(unsigned short*)__a[{position}]}}"
    return f"*({_CTYPES[arg.dtype]}*)__a[{position}]"


def missing_constants(request: CaseRequest) -> list[str]:
    """Symbols the task fills that the source declares neither __constant__ nor __device__ (the launcher would
    not build). As on a GPU, where cuModuleGetGlobal finds either kind, a __device__ array works too."""
    text = "\n".join(t for _, t in code_lines(request.source, blank_literals=True))
    return [a.constant for a in request.args if a.constant is not None
            and not re.search(rf"__(constant|device)__[^;{{}}]*\b{re.escape(a.constant)}\b", text)]
