"""The kernel's own defaults for its tunables, read from ``#ifndef`` / ``#define`` the way the preprocessor would."""

from __future__ import annotations

import pytest

from harness_tools.task.loading import resolve_task
from harness_tools.task.tunable_defaults import tunable_defaults


def defaults(source: str, *names: str) -> dict[str, int]:
    return tunable_defaults(source, names or ("X",))


def test_the_bundled_sgemm_kernel_gives_every_tunable_a_default():
    task = resolve_task("sgemm")
    params = task.spec.tunables.params
    assert tunable_defaults(task.read(task.spec.tunables.source), params) == {
        "BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8, "MINB": 2, "WIDE_MIN": -1}


def test_a_task_whose_kernel_derives_a_tunable_gives_it_no_default():
    task = resolve_task("softmax_split")  # WARPS is (THREADS / 32); THREADS, CHUNK and VEC have no #define at all
    assert tunable_defaults(task.read(task.spec.tunables.source), task.spec.tunables.params) == {}


@pytest.mark.parametrize("source, expected", [
    ("#ifndef X\n#define X 4\n#endif\n", 4),
    ("  #  ifndef\tX  \n\t# define   X\t 4   \n #  endif\n", 4),
    ("#if !defined(X)\n#define X 4\n#endif\n", 4),
    ("#if ! defined ( X )\n#define X 4\n#endif\n", 4),
    ("#if !defined X\n#define X 4\n#endif\n", 4),
    ("#ifndef X\n#define X -1\n#endif\n", -1),
    ("#ifndef X\n#define X (4)\n#endif\n", 4),
    ("#ifndef X\n#define X ( -1 )\n#endif\n", -1),
    ("#ifndef X\n#define X -(2)\n#endif\n", -2),
    ("#ifndef X\n#define X 0x20\n#endif\n", 32),
    ("#ifndef X\n#define X 16u\n#endif\n", 16),
    ("#ifndef X\n#define X 010\n#endif\n", 8),  # octal, as in C
    ("#ifndef X\n#define X 0\n#endif\n", 0),
    ("#ifndef X  // the tile\n#define X 4  /* threads */\n#endif\n", 4),
    ("/* a\n   comment */ #ifndef X\n#define X /* why */ 4\n#endif\n", 4),
    ("#ifndef X\n#define X \\\n  4\n#endif\n", 4),  # a line splice
    ("#ifndef INCLUDED\n#define INCLUDED\n#ifndef X\n#define X 4\n#endif\n#endif\n", 4),  # inside an include guard
    ("#ifndef X\n#define X 4\n#endif\n#ifndef X\n#define X 8\n#endif\n", 4),  # the second is never taken
    ('const char* open = "/*";\n#ifndef X\n#define X 4\n#endif\n// */\n', 4),  # no comment opens in a string
])
def test_a_default_is_read(source, expected):
    assert defaults(source) == {"X": expected}


@pytest.mark.parametrize("source", [
    "#define X 4\n",  # not guarded: a -D would not override it
    "#ifndef Y\n#define X 4\n#endif\n",  # guarded by another name
    "#ifndef X\n#define X (W + 1)\n#endif\n",  # an expression
    "#ifndef X\n#define X\n#endif\n",  # no value
    "#ifndef X\n#define X(a) a\n#endif\n",  # a function-like macro
    "#ifndef X\n#define X 4.0\n#endif\n",
    "#ifndef X\n#if __CUDA_ARCH__ >= 900\n#define X 8\n#endif\n#endif\n",  # another condition
    "#ifdef FAST\n#ifndef X\n#define X 8\n#endif\n#endif\n",
    "#ifndef X\n#else\n#define X 4\n#endif\n",  # the #else branch
    "#if !defined(X) && FAST\n#define X 4\n#endif\n",
    "#if FAST\n#define X 8\n#endif\n#ifndef X\n#define X 4\n#endif\n",  # the first definition depends on FAST
    "#define LARGE 1\n#ifndef LARGE\n#ifndef X\n#define X 4\n#endif\n#endif\n",  # LARGE is defined: never taken
    "// #ifndef X\n// #define X 4\n",  # commented out
    "/*\n#ifndef X\n#define X 4\n#endif\n*/\n",
])
def test_no_default_is_read(source):
    assert defaults(source) == {}


def test_only_the_names_asked_for_are_returned():
    source = "#ifndef X\n#define X 4\n#endif\n#ifndef Y\n#define Y 8\n#endif\n#define APAD 4\n"
    assert defaults(source, "Y", "Z") == {"Y": 8}
