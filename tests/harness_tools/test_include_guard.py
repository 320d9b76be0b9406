"""Candidate source is hostile: no host file may reach NVRTC, whatever the spelling of the include.

Each bypass is checked twice: by ``check_source`` and end to end by ``compile_candidate`` (status
"refused", the log names the offending line, and the content of the host file never shows up). The
"exfiltration" form wraps the bypass in ``static_assert(false, STR(...))``: were the include to reach
NVRTC, the file's text would come back inside a diagnostic located in kernel.cu itself.
"""

from __future__ import annotations

import re
import uuid

import pytest
from pydantic import ValidationError

from harness_tools.candidate import Candidate
from harness_tools.compile import compile_candidate
from harness_tools.include_guard import check_source

ARCH = "sm_90"
KERNEL = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n'
LAUNCH = {"grid": [1], "block": [32]}


@pytest.fixture(scope="module")
def secret(tmp_path_factory) -> tuple[str, str]:
    """(absolute path, unique token) of a host file no candidate may read."""
    token = f"HOSTSECRET_{uuid.uuid4().hex}"
    path = tmp_path_factory.mktemp("host") / "secret.txt"
    path.write_text(f"{token} root:x:0:0:root:/root:/bin/bash\n")
    return str(path), token


def candidate(source: str, **kwargs) -> Candidate:
    return Candidate(source=source, kernel_name="k", launch=LAUNCH, **kwargs)


# (id, fragment using {path}, lines that a refusal may name). The fragment is followed by KERNEL.
BYPASSES = [
    ("angle", '#include <{path}>\n', {1}),
    ("quote", '// a kernel\n#include "{path}"\n', {2}),
    ("macro", '#define P "{path}"\n#include P\n', {2}),
    ("macro-angle", "#define P <{path}>\n#include P\n", {2}),
    ("digraph", '%:include "{path}"\n', {1}),
    ("splice-in-word", '// a kernel\n#inc\\\nlude "{path}"\n', {2, 3}),
    ("splice-after-hash", '#\\\ninclude "{path}"\n', {1, 2}),
    ("splice-in-path", '#include "{path}\\\n"\n', {1, 2}),
    ("comment-after-hash", '# /**/ include "{path}"\n', {1}),
    ("comment-no-space", '#/* x */include "{path}"\n', {1}),
    ("include_next", '#include_next "{path}"\n', {1}),
    ("has_include", '#if __has_include("{path}")\n#endif\n', {1}),
    ("defined-has_include", '// probe\n#if defined(__has_include)\n#endif\n', {2}),
    ("has_include-in-code", '__device__ int probe = __has_include("{path}");\n', {1}),
    (
        "paste-has_include",
        '#define CAT(a, b) a##b\n#if CAT(__has_, include)("{path}")\n#endif\n',
        {1, 2},
    ),
    (
        "paste-digraph-has_include",
        '#define CAT(a, b) a%:%:b\n#if CAT(__has_, include)("{path}")\n#endif\n',
        {1, 2},
    ),
    ("raw-string-hides-comment", 'const char* r = R"(x"/*)";\n#include "{path}"\n// */\n', {1}),
    ("trigraph", '??=include "{path}"\n', {1}),
    ("import", '#import "{path}"\n', {1}),
    ("embed", '__device__ const char data[] = {{\n#embed "{path}"\n}};\n', {2}),
    ("pragma-include_alias", '#pragma include_alias("a.h", "{path}")\n#include "a.h"\n', {1, 2}),
    # A block comment that spans lines inside a directive is one space: this is "# include".
    ("multiline-comment-in-directive", '#/*\n*/include "{path}"\n', {1, 2}),
    # C++14 digit separator: 1'0 is one number; a lexer that takes ' as a char literal sees "/*" as a comment.
    (
        "digit-separator",
        'static const int a = 1\'0; static const char s[] = "\'/*";\n#include "{path}"\n// */\n',
        {1, 2},
    ),
]
IDS = [b[0] for b in BYPASSES]


def line_named(log: str, lines: set[int]) -> bool:
    return any(re.search(rf"kernel\.cu\({n}\)", log) for n in lines)


@pytest.mark.parametrize(("name", "fragment", "lines"), BYPASSES, ids=IDS)
def test_check_source_refuses(secret, name, fragment, lines):
    path, _ = secret
    verdict = check_source(fragment.format(path=path) + KERNEL)
    assert not verdict.ok
    assert line_named("\n".join(verdict.refusals), lines), verdict.refusals


@pytest.mark.parametrize(("name", "fragment", "lines"), BYPASSES, ids=IDS)
def test_compile_candidate_refuses(secret, name, fragment, lines):
    path, token = secret
    result = compile_candidate(candidate(fragment.format(path=path) + KERNEL), ARCH)
    assert result.status == "refused", result.log
    assert not result.ok and result.cubin is None
    assert token not in result.full_log
    assert line_named(result.log, lines), result.log


def exfiltration_source(fragment: str, path: str) -> str:
    return (
        "#define STR(...) #__VA_ARGS__\n"
        "static_assert(false, STR(\n" + fragment.format(path=path) + "));\n// */\n" + KERNEL
    )


def test_the_exfiltration_form_would_leak_through_plain_nvrtc(secret):
    """Control: without the guard, NVRTC reads the file and puts its text in a kernel.cu diagnostic."""
    from cuda.bindings import nvrtc

    path, token = secret
    source = exfiltration_source('#include "{path}"\n', path)
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"kernel.cu", 0, [], [])
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS
    try:
        nvrtc.nvrtcCompileProgram(prog, 1, [f"--gpu-architecture={ARCH}".encode()])
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = bytes(size)
        nvrtc.nvrtcGetProgramLog(prog, log)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    assert re.search(rf'kernel\.cu\(\d+\): error: static assertion failed with ".*{token}', log.decode())


@pytest.mark.parametrize(("name", "fragment", "lines"), BYPASSES, ids=IDS)
def test_host_file_content_never_reaches_the_log(secret, name, fragment, lines):
    path, token = secret
    result = compile_candidate(candidate(exfiltration_source(fragment, path)), ARCH)
    assert token not in result.log
    assert token not in result.full_log
    assert result.status == "refused", result.log


# ---- options and defines -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "option",
    [
        "--pre-include=/etc/passwd",
        "--pre-include",
        "-include",
        "-include=/etc/passwd",
        "-I/etc",
        "-I",
        "--include-path=/etc",
        "--include-path",
        "-DX=1",
        "--define-macro=X=1",
        "--gpu-architecture=sm_80",
        "-arch=sm_80",
        "--use_fast_math --pre-include=/etc/passwd",
    ],
)
def test_file_and_arch_options_are_rejected_by_the_candidate_model(option):
    with pytest.raises(ValidationError, match="not accepted"):
        candidate(KERNEL, options=[option])


def test_harmless_options_are_accepted():
    c = candidate(KERNEL, options=["--use_fast_math", "--maxrregcount=64", "-std=c++17"])
    assert compile_candidate(c, ARCH).ok


@pytest.mark.parametrize(
    "defines",
    [
        {"P": '"/etc/passwd"'},
        {"P": "1\n#include </etc/passwd>"},
        {"P": "# include"},
        {"P": "__has_include(<cstdint>)"},
        {"P": "1\\"},
        {"X=1 -include /etc/passwd": 1},
        {"X -I/etc": 1},
        {"1X": 1},
    ],
)
def test_define_tricks_are_rejected_by_the_candidate_model(defines):
    with pytest.raises(ValidationError):
        candidate(KERNEL, defines=defines)


def test_a_define_cannot_complete_a_paste_in_the_source():
    # The value is harmless text; pasting it into __has_include needs ## with #if, which the source may not use.
    defines = {"P": "CAT(__has_, include)(<cstdint>)"}
    candidate(KERNEL, defines=defines)  # accepted on its own
    c = candidate("#define CAT(a, b) a##b\n#if P\n#endif\n" + KERNEL, defines=defines)
    assert compile_candidate(c, ARCH).status == "refused"


def test_option_text_in_a_define_value_stays_macro_text(secret):
    path, token = secret
    source = '#define STR2(x) #x\n#define STR(x) STR2(x)\nstatic_assert(false, STR(X));\n' + KERNEL
    result = compile_candidate(candidate(source, defines={"X": f"1 --pre-include={path}"}), ARCH)
    assert result.status == "error"
    assert f'static assertion failed with "1 --pre-include={path}"' in result.log
    assert token not in result.full_log


# ---- what is allowed ---------------------------------------------------------------------------

HEADER_USES = [
    ("cuda_runtime.h", "x[0] = 1.0f;"),
    ("cstdint", "int32_t v = INT32_MAX; uint64_t w = UINT64_MAX; x[0] = (float)(v + (int32_t)(w & 1));"),
    ("cfloat", "x[0] = FLT_MAX;"),
    ("cmath", "x[0] = INFINITY;"),
    ("climits", "x[0] = (float)INT_MAX;"),
    ("cuda_fp16.h", "__half h = __float2half(1.5f); x[0] = __half2float(h);"),
]


@pytest.mark.parametrize("form", ["<{}>", '"{}"'])
@pytest.mark.parametrize(("header", "use"), HEADER_USES, ids=[h for h, _ in HEADER_USES])
def test_allowed_headers_compile(header, use, form):
    source = f"#include {form.format(header)}\n" + f'extern "C" __global__ void k(float* x) {{ {use} }}\n'
    result = compile_candidate(candidate(source), ARCH)
    assert result.status == "ok", result.log


def test_allowed_includes_are_left_as_written():
    source = '#include <cuda_runtime.h>\n#include "cstdint"\n#include "cuda_fp16.h"\n' + KERNEL
    verdict = check_source(source)
    assert verdict.ok, verdict.refusals
    assert verdict.source == source


def test_all_allowed_headers_together():
    source = (
        "#include <cuda_runtime.h>\n#include \"cstdint\"\n#include <cfloat>\n#include \"cmath\"\n"
        "#include <climits>\n#include \"cuda_fp16.h\"\n"
        'extern "C" __global__ void k(int* i, float* f, __half* h) {\n'
        "    i[0] = INT32_MAX; i[1] = INT_MAX; f[0] = FLT_MAX; f[1] = INFINITY; h[0] = __float2half(2.0f);\n"
        "}\n"
    )
    result = compile_candidate(candidate(source), ARCH)
    assert result.ok, result.log


# A comment opened after an allowed include swallows the next lines for the compiler too: the guard
# must see exactly what the compiler sees (nothing to refuse) and the host file is never read.
COMMENTED_AFTER_ALLOWED = [
    '#include <cstdint> /*\n#include "{path}"\n// */\n',
    '#include <cuda_runtime.h> /*\n#include "{path}"\n// */\n',
]


@pytest.mark.parametrize("fragment", COMMENTED_AFTER_ALLOWED, ids=["builtin", "blanked"])
def test_include_swallowed_by_a_comment_after_an_allowed_include(secret, fragment):
    path, token = secret
    source = fragment.format(path=path) + KERNEL
    assert check_source(source).ok
    result = compile_candidate(candidate(source), ARCH)
    assert result.ok, result.log
    leak = compile_candidate(candidate(exfiltration_source(fragment, path)), ARCH)
    assert token not in leak.full_log


@pytest.mark.parametrize(
    "source",
    [
        '/* #include "/etc/passwd" */\n' + KERNEL,
        '/*\n#include "/etc/passwd"\n#include_next <x>\n*/\n' + KERNEL,
        '// #include "/etc/passwd"\n' + KERNEL,
        '__device__ const char text[] = "#include \\"/etc/passwd\\"";\n' + KERNEL,
        '__device__ const char text[] = "/* #include </etc/passwd>";\n' + KERNEL,
        "__device__ const char c = '#';\n" + KERNEL,
    ],
    ids=["block-comment", "multiline-comment", "line-comment", "string", "string-with-comment-opener", "char"],
)
def test_include_text_in_comments_and_literals_is_not_refused(source):
    assert check_source(source).ok, check_source(source).refusals
    result = compile_candidate(candidate(source), ARCH)
    assert result.ok, result.log
