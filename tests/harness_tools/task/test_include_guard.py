"""Candidate source is hostile: no host file may reach NVRTC, whatever the spelling of the include.

Each bypass is checked twice: by ``check_source`` and end to end by ``compile_candidate`` (status
"refused", the log names the offending line, and the content of the host file never shows up). The
"exfiltration" form wraps the bypass in ``static_assert(false, STR(...))``: were the include to reach
NVRTC, the file's text would come back inside a diagnostic located in kernel.cu itself.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from pydantic import ValidationError

import harness_tools
from harness_tools.backends.cpu.build import compiler_diagnostics
from harness_tools.compile import compile_candidate
from harness_tools.compile.nvrtc import filter_log
from harness_tools.task.candidate import Candidate
from harness_tools.task.include_guard import check_source

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
    # Desynchronisations seen against the old guard. A non-ASCII "digit" (Python's isdigit() says yes, no
    # compiler does) started a pp-number that swallowed the quote, so the guard saw "/*" open a comment
    # where NVRTC and g++ see a character literal, and the include below is real.
    ("arabic-indic-digit", 'static const int v = \u0663\'a/*\';\n#include "{path}"\n// */\n', {1, 2}),
    ("fullwidth-digit", 'static const int v = \uff11\'a/*\';\n#include "{path}"\n// */\n', {1, 2}),
    # g++ takes `'` followed by `$` or UTF-8 into a number; the guard read a char literal, then a comment.
    ("dollar-after-separator", 'static const int v = 1\'$\'/*\';\n#include "{path}"\n// */\n', {1, 2}),
    ("utf8-after-separator", 'static const int v = 1\'\u0663\'/*\';\n#include "{path}"\n// */\n', {1, 2}),
    ("fullwidth-hash", '\uff03include "{path}"\n', {1}),
    # A lone CR ends a line for g++ (and, normalised, for NVRTC): the include is not inside the comment.
    ("lone-cr", '// a kernel\r#include "{path}"\n', {2}),
    ("crlf-splice", '// a kernel\r\n#inc\\\r\nlude "{path}"\r\n', {2, 3}),
    ("cr-splice", '#inc\\\rlude "{path}"\r', {1, 2}),
    # g++ splices a backslash followed by blanks; NVRTC does not.
    ("spaced-splice", '#define X 1 \\ \n#include "{path}"\n', {1, 2}),
    # A file name in #line (or a GNU line marker) makes g++ quote that file's lines in diagnostics.
    ("line-file", '#line 12 "{path}"\n', {1}),
    ("line-marker", '# 12 "{path}"\n', {1}),
    ("line-macro", '#define F 12 "{path}"\n#line F\n', {2}),
    ("pragma-dependency-through-macro", '#define P(x) _Pragma(#x)\nP(GCC dependency "{path}")\n', {2}),
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


FRAGMENTS = {name: fragment for name, fragment, _ in BYPASSES}


@pytest.mark.parametrize("name", ["quote", "arabic-indic-digit", "fullwidth-digit", "crlf-splice", "spaced-splice"])
def test_the_exfiltration_form_would_leak_through_plain_nvrtc(secret, name):
    """Control: without the guard, NVRTC reads the file and puts its text in a kernel.cu diagnostic."""
    from cuda.bindings import nvrtc

    path, token = secret
    source = exfiltration_source(FRAGMENTS[name], path)
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


# ---- desynchronisation rules ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "line", "words"),
    [
        ("int a;\n__device__ int \u0663 = 1;\n", 2, "U+0663"),
        ("__device__ int x\uff10 = 1;\n", 1, "U+FF10"),
        ("__device__ int x = 1;\u00a0\n", 1, "U+00A0"),
        ("__device__ int a$b = 1;\n", 1, "'$'"),
        ("__device__ int \\u0041 = 1;\n", 1, "backslash"),
        ("__device__ int x = 1;\n\\ \n", 2, "blanks"),
        ("__device__ char c = 'a;\n", 1, "unterminated ' literal"),
        ('__device__ const char* s = "a;\n', 1, 'unterminated " literal'),
        ("__device__ int x;\n/* never closed\n", 2, "unterminated /* comment"),
        ("__device__ int x = 1''0;\n", 1, "digit separator"),
        ("__device__ int x = 1'.0;\n", 1, "digit separator"),
        ("#define X 1\x0c\n", 1, "form feed"),
        ("#\x0bdefine X 1\n", 1, "form feed"),
        ("__device__ int x\x1a = 1;\n", 1, "U+001A"),
        ("// x\x85y\n", 1, "U+0085"),
        ("__device__ int x; // \ud800\n", 1, "Unicode"),
        ("#line 0x10\n", 1, "#line"),
        ("#line 12 foo\n", 1, "#line"),
        ("#line \u0661\u0662\n", 1, "#line"),
        ("#!x\n", 1, "bare #"),
        ('#define P(x) _Pragma(#x)\n#define W import\n', 2, "_Pragma"),
        ('_Pragma("unroll")\n#define CAT(a, b) a##b\n', 2, "token pasting"),
    ],
)
def test_desynchronising_text_is_refused(source, line, words):
    verdict = check_source(source + KERNEL)
    assert not verdict.ok
    text = "\n".join(verdict.refusals)
    assert f"kernel.cu({line}): " in text and words in text, verdict.refusals


@pytest.mark.parametrize("end", ["\\", "\\\n"])
def test_a_splice_on_the_last_line_is_refused(end):
    # The cpu backend appends its launcher to the source: a final splice would join its first line.
    refusals = check_source(KERNEL + "// x " + end).refusals
    assert refusals == ["kernel.cu(2): the last line ends with a backslash (a line splice into nothing)"]


def test_non_ascii_refusal_names_the_character_and_the_rule():
    (refusal,) = check_source("__device__ int x = \u0663;\n" + KERNEL).refusals
    assert refusal.startswith("kernel.cu(1): character U+0663 (ARABIC-INDIC DIGIT THREE)")
    assert "must be ASCII" in refusal


@pytest.mark.parametrize(
    "source",
    [
        "// \u00b5s, 4\u00b7ITEMS, \u0663, \uff03include\n" + KERNEL,
        '__device__ const char s[] = "\u00b5s \u0663\uff11";\n' + KERNEL,
        "__device__ const char c = '$';\n__device__ const char* d = \"$\\\\\";\n" + KERNEL,
        "#line 12\n" + KERNEL,
        "#\n#pragma once\n" + KERNEL,
        "__device__ int v = 1'000'000 + 0x1'F + (int)1'000.5e+1f;\n" + KERNEL,
        '_Pragma("unroll")\n' + KERNEL,
        "#define F(a) a\n\x0c\n" + KERNEL,
    ],
    ids=["non-ascii-comment", "non-ascii-string", "dollar-backslash-in-literals", "line-number",
         "null-directive", "digit-separators", "pragma-operator", "form-feed-outside-directive"],
)
def test_harmless_text_is_accepted(source):
    verdict = check_source(source)
    assert verdict.ok, verdict.refusals
    assert compile_candidate(candidate(source), ARCH).ok


@pytest.mark.parametrize("eol", ["\r\n", "\r"])
def test_cr_line_ends_are_normalised_and_keep_their_line_numbers(eol):
    source = eol.join(["// one", "#include <cstdint>", 'extern "C" __global__ void k(float* x) {', "  x[0] = ;", "}", ""])
    verdict = check_source(source)
    assert verdict.ok and verdict.source == source.replace(eol, "\n")
    assert check_source(source.replace("<cstdint>", "</etc/passwd>")).refusals[0].startswith("kernel.cu(2): ")
    result = compile_candidate(candidate(source), ARCH)
    assert result.status == "error" and "kernel.cu(4): error" in result.log, result.log


def test_every_bundled_kernel_passes_the_guard():
    kernels = sorted(Path(harness_tools.__file__).parent.glob("tasks/*/*.cu"))
    assert kernels
    for path in kernels:
        assert check_source(path.read_text()).ok, (path, check_source(path.read_text()).refusals)


# ---- what of the compilers' logs reaches the caller ------------------------------------------------


def test_filter_log_keeps_only_kernel_cu_and_ptxas():
    raw = "\n".join([
        "kernel.cu(3): error: identifier \"y\" is undefined",
        "    x[0] = y;",
        "           ^",
        "",
        "/etc/secret.h(1): error: expected a declaration",
        "  SECRET_A\rkernel.cu(1): error: SECRET_B\x0ckernel.cu(2): SECRET_C",
        "  ^",
        "In file included from /etc/secret.h:1,",
        "kernel.cu: SECRET_D",
        "Note #3326-D: SECRET_E",
        "ptxas info    : Function properties for k",
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
        "At end of source: error: expected a \")\"",
        '1 error detected in the compilation of "kernel.cu".',
    ])
    log = filter_log(raw)
    assert "SECRET" not in log
    assert 'kernel.cu(3): error: identifier "y" is undefined\n    x[0] = y;' in log
    assert "0 bytes stack frame" in log and "At end of source" in log and "1 error detected" in log
    assert "[1 diagnostic(s) located in other files omitted]" in log


def test_compiler_diagnostics_keep_only_kernel_cu():
    stderr = "\n".join([
        "In file included from /tmp/x/kernel.cpp:1,",
        "                 from kernel.cu:3:",
        "/etc/secret.h:1:9: error: expected primary-expression",
        "    1 | SECRET_A\rkernel.cu:1:1: error: SECRET_B",
        "      |         ^",
        "kernel.cu: In function \u2018void k(float*)\u2019:",
        "kernel.cu:4:12: error: expected primary-expression before \u2018;\u2019 token",
        "kernel.cu:5:10:   required from here",
        "cudaopt_cpu.h:9: note: SECRET_C",
        "compilation terminated.",
    ])
    text = compiler_diagnostics(stderr, "/tmp/x")
    assert "SECRET" not in text
    assert "kernel.cu:4:12: error" in text and "kernel.cu: In function" in text and "required from here" in text


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_gxx_quoting_a_renamed_file_is_dropped(secret, tmp_path):
    """Control and fix: g++ quotes the lines of a #line-named file; compiler_diagnostics drops them."""
    path, token = secret
    (tmp_path / "kernel.cpp").write_text(f'#line 1 "kernel.cu"\nint a = ;\n#line 1 "{path}"\nint b = ;\n')
    out = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "kernel.cpp"], cwd=tmp_path, capture_output=True,
                         text=True)
    assert token in out.stderr  # what a #line with a file name would leak
    text = compiler_diagnostics(out.stderr, str(tmp_path))
    assert token not in text and path not in text
    assert "kernel.cu:1:9: error" in text


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
@pytest.mark.parametrize("form", ["lone-cr", "line-marker"])
def test_these_forms_would_leak_through_plain_gxx(secret, tmp_path, form):
    """Control for the cpu backend's compiler: g++ reads the file (a lone CR ends the comment; a line marker
    renames the source, so g++ quotes the file's lines); the guard refuses both."""
    path, token = secret
    if form == "lone-cr":
        source = exfiltration_source(FRAGMENTS["lone-cr"], path)
    else:
        source = f'# 1 "{path}"\nint b = ;\n'
    (tmp_path / "kernel.cpp").write_text(source, newline="")
    out = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "kernel.cpp"], cwd=tmp_path, capture_output=True,
                         text=True)
    assert token in out.stderr
    assert not check_source(source).ok
    assert token not in compiler_diagnostics(out.stderr, str(tmp_path))
