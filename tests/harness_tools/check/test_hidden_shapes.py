"""Hidden shapes derived from the validation cases: their classes, bounds, determinism and the task's size rules."""

from __future__ import annotations

import copy
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from harness_tools.check.hidden_shapes import (
    CLASSES,
    FLOOR_BYTES,
    GROWTH,
    MAX_DERIVED,
    TASK_HIDDEN,
    derived_sizes,
    hidden_shapes,
    hidden_task,
    tile_sizes,
)
from harness_tools.check.hidden_shapes import _is_prime as miller_rabin
from harness_tools.errors import TaskSpecError
from harness_tools.task.loading import BUNDLED_DIR, bundled_task_names, load_task, resolve_task
from harness_tools.task.spec import TaskSpec, buffer_bytes

MATMUL = {
    "name": "mm", "description": "C = A B", "kernel_name": "mm",
    "params": [
        {"kind": "buffer", "name": "A", "dtype": "float32", "shape": ["M", "K"], "role": "in"},
        {"kind": "buffer", "name": "B", "dtype": "float32", "shape": ["K", "N"], "role": "in"},
        {"kind": "buffer", "name": "C", "dtype": "float32", "shape": ["M", "N"], "role": "out"},
        {"kind": "scalar", "name": "M", "dtype": "int32", "value": "M"},
        {"kind": "scalar", "name": "N", "dtype": "int32", "value": "N"},
        {"kind": "scalar", "name": "K", "dtype": "int32", "value": "K"},
    ],
    "sizes": ["M", "N", "K"],
    "cases": [
        {"name": "v1", "role": "validation", "sizes": {"M": 64, "N": 64, "K": 32}},
        {"name": "v2", "role": "validation", "sizes": {"M": 300, "N": 300, "K": 96}},
        {"name": "v3", "role": "validation", "sizes": {"M": 130, "N": 130, "K": 8}},
        {"name": "p", "role": "performance", "sizes": {"M": 4096, "N": 4096, "K": 4096}},
    ],
    "reference": {"kind": "numpy"},
    "tolerance": {"float32": {"atol": 1e-4}},
    "baseline": {"source": "b.cu", "launch": {"grid": ["ceil_div(N, 16)", "ceil_div(M, 16)"], "block": [16, 16]}},
    "tunables": {"source": "b.cu", "params": {"BM": [48, 96], "BK": [4, 8]},
                 "launch": {"grid": ["ceil_div(N, BM)"], "block": [128]}},
}


EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def spec(**changes) -> TaskSpec:
    raw = copy.deepcopy(MATMUL)
    raw.update(changes)
    return TaskSpec.model_validate(raw)


def _bytes(s: TaskSpec, sizes: dict[str, int]) -> int:
    return sum(buffer_bytes(b, s.shape_of(b, sizes)) for b in s.buffers)


def _is_prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, math.isqrt(n) + 1))


def _pow2(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def test_every_class_is_what_its_name_says():
    s = spec()
    tiles = tile_sizes(s)
    assert {48, 96, 16, 32, 64, 128, 256, 8} <= set(tiles) and 4 not in tiles  # BK=4 is too small for a tile
    derived = dict(derived_sizes(s, "cpu"))
    assert set(derived) == set(CLASSES)  # this task has room for all of them
    checks = {"odd": lambda v: v % 2 == 1, "prime": _is_prime, "pow2-1": lambda v: _pow2(v + 1),
              "pow2+1": lambda v: _pow2(v - 1), "tile-1": lambda v: any((v + 1) % t == 0 for t in tiles),
              "tile+1": lambda v: any((v - 1) % t == 0 for t in tiles)}
    public = [c.sizes for c in s.cases]
    for shape_class, sizes in derived.items():
        assert all(checks[shape_class](v) for v in sizes.values()), (shape_class, sizes)
        assert sizes not in public


def test_bounded_in_count_and_bytes():
    for name in bundled_task_names():
        s = resolve_task(name).spec
        for backend in ("cpu", "cuda"):
            derived = derived_sizes(s, backend)
            assert 1 <= len(derived) <= MAX_DERIVED, name
            largest = max(_bytes(s, c.sizes) for c in s.cases_for(["validation"], backend))
            assert all(_bytes(s, sizes) <= GROWTH * largest for _, sizes in derived), name
    # one small validation case (5x5x5): tile+1 would be 9x9x9 (tiles start at 8), over twice its buffers; no
    # template gives it less, so it takes the floor's limit instead (a few KB here)
    tiny = spec(cases=[{"name": "v", "role": "validation", "sizes": {"M": 5, "N": 5, "K": 5}}])
    kept = dict(derived_sizes(tiny, "cpu"))
    assert kept["odd"] == {"M": 7, "N": 7, "K": 7} and kept["tile+1"] == {"M": 9, "N": 9, "K": 9}
    twice = GROWTH * _bytes(tiny, {"M": 5, "N": 5, "K": 5})
    assert [c for c, sizes in kept.items() if _bytes(tiny, sizes) > twice] == ["tile+1"]


def test_a_coarse_size_lattice_still_gets_a_hidden_case_within_the_floor():
    """N a multiple of 512 with validation cases at 512 and 1024 (Kernel Tuner's matmul): every derived size is
    1536 or more, over twice the bytes of the largest case, so there was no hidden case at all. A class that finds
    none that way may use FLOOR_BYTES: 1536, a multiple that is not a power of two, is checked."""
    square = {"equal": [["M", "N", "K"]], "multiple_of": {"M": 512, "N": 512, "K": 512}}
    cases = [{"name": f"v{n}", "role": "validation", "sizes": {"M": n, "N": n, "K": n}} for n in (512, 1024)]
    coarse = spec(size_rules=square, cases=cases)
    derived = derived_sizes(coarse, "cuda")
    assert derived == [("tile+1", {"M": 1536, "N": 1536, "K": 1536})]
    assert GROWTH * _bytes(coarse, cases[1]["sizes"]) < _bytes(coarse, derived[0][1]) <= FLOOR_BYTES
    assert derived_sizes(resolve_task(str(EXAMPLES / "matmul")).spec, "cuda") == [("tile+1", {"N": 1536})]


def test_deterministic_for_a_task(tmp_path):
    first = [(s.shape_class, s.case.name, s.case.sizes) for s in hidden_shapes(resolve_task("sgemm").spec, "cpu")]
    copy_dir = tmp_path / "sgemm"
    shutil.copytree(BUNDLED_DIR / "sgemm", copy_dir)
    again = [(s.shape_class, s.case.name, s.case.sizes) for s in hidden_shapes(load_task(copy_dir).spec, "cpu")]
    assert first == again
    # the backend matters only through the validation cases that run on it
    assert derived_sizes(resolve_task("transpose").spec, "cpu") == derived_sizes(resolve_task("transpose").spec, "cuda")
    assert derived_sizes(resolve_task("sgemm").spec, "cpu") != derived_sizes(resolve_task("sgemm").spec, "cuda")


def test_size_rules_are_kept_equal_multiple_and_max():
    rules = {"equal": [["M", "N"]], "multiple_of": {"K": 8}, "max": {"M": 400}}
    s = spec(size_rules=rules)
    derived = derived_sizes(s, "cpu")
    assert len(derived) >= 4
    for shape_class, sizes in derived:
        assert sizes["M"] == sizes["N"] and sizes["K"] % 8 == 0 and sizes["M"] <= 400, (shape_class, sizes)
    # on the lattice of K's multiple, the class applies to K / 8: odd means 8 x odd
    odd = dict(derived)["odd"]
    assert (odd["K"] // 8) % 2 == 1 and odd["M"] % 2 == 1


def test_named_hidden_cases_come_first_and_derive_false_keeps_only_them():
    named = {"cases": [{"name": "h_gpu", "sizes": {"M": 7, "N": 9, "K": 11}, "backends": ["cuda"]},
                       {"name": "h_any", "sizes": {"M": 5, "N": 3, "K": 1}}]}
    s = spec(hidden=named)
    shapes = hidden_shapes(s, "cpu")
    assert shapes[0].case.name == "h_any" and shapes[0].shape_class == TASK_HIDDEN
    assert "h_gpu" not in {x.case.name for x in shapes}
    assert [x.shape_class for x in shapes[1:]] == [c for c, _ in derived_sizes(s, "cpu")]
    assert all(x.case.role == "validation" for x in shapes)
    only = hidden_shapes(spec(hidden={**named, "derive": False}), "cuda")
    assert [x.case.name for x in only] == ["h_gpu", "h_any"]


def test_a_stored_reference_gets_no_derived_sizes():
    assert derived_sizes(spec(reference={"kind": "stored"}), "cpu") == []


def test_hidden_cases_never_reach_normal_evaluation():
    s = spec(hidden={"cases": [{"name": "h", "sizes": {"M": 5, "N": 3, "K": 1}}]})
    for backend in ("cpu", "cuda"):
        roles = s.default_roles(backend)
        names = {c.name for c in s.cases_for(["validation", "performance"], backend)}
        assert names == {"v1", "v2", "v3", "p"} and roles == spec().default_roles(backend)
    with pytest.raises(KeyError):
        s.case("h")


def test_hidden_task_is_a_view_with_only_the_hidden_cases():
    task = resolve_task("reduce_sum")
    shapes = hidden_shapes(task.spec, "cpu")
    view = hidden_task(task, shapes)
    assert [c.name for c in view.spec.cases_for(["validation", "performance"], "cpu")] == [x.case.name for x in shapes]
    assert view.folder == task.folder and view.spec.reference == task.spec.reference
    assert hidden_shapes(view.spec, "cpu") == []  # the view does not derive again from its own cases


# ---- the task format: hidden cases and size rules are validated like other cases -------------------------------
def _load(tmp_path: Path, **changes) -> None:
    raw = copy.deepcopy(MATMUL)
    raw.update(changes)
    folder = tmp_path / "mm"
    folder.mkdir(exist_ok=True)
    (folder / "task.json").write_text(json.dumps(raw))
    (folder / "b.cu").write_text("// kernel")
    (folder / "reference.py").write_text("def reference(A, B, C, M, N, K):\n    C[:] = A @ B\n")
    load_task(folder)


@pytest.mark.parametrize("changes, field, words", [
    ({"hidden": {"cases": [{"name": "h", "sizes": {"M": 5, "N": 3}}]}}, "hidden.cases.0.sizes", "must give exactly"),
    ({"hidden": {"cases": [{"name": "v2", "sizes": {"M": 5, "N": 3, "K": 1}}]}}, "hidden.cases.0.name", "repeats"),
    ({"hidden": {"cases": [{"name": "h", "sizes": {"M": 0, "N": 3, "K": 1}}]}}, "params.0 (A) in case 'h'",
     "non-positive"),
    ({"hidden": {"cases": [{"name": "h", "role": "validation", "sizes": {"M": 5, "N": 3, "K": 1}}]}},
     "hidden.cases.0.role", "Extra inputs"),
    ({"hidden": {"derive": "sometimes"}}, "hidden.derive", "boolean"),
    ({"size_rules": {"equal": [["M", "Q"]]}}, "size_rules", "unknown size names ['Q']"),
    ({"size_rules": {"equal": [["M", "N"], ["N", "K"]]}}, "size_rules.equal", "more than one group"),
    ({"size_rules": {"multiple_of": {"K": 64}}}, "cases.0.sizes", "multiple of 64"),
    ({"size_rules": {"max": {"M": 200}}, "cases": MATMUL["cases"][:1]}, None, None),
    ({"size_rules": {"max": {"M": 200}}, "hidden": {"cases": [{"name": "h", "sizes": {"M": 201, "N": 3, "K": 1}}]},
      "cases": MATMUL["cases"][:1]}, "hidden.cases.0.sizes", "at most 200"),
])
def test_bad_hidden_cases_and_rules_name_file_and_field(tmp_path, changes, field, words):
    if field is None:
        _load(tmp_path, **changes)  # the control: the same rule, obeyed, loads
        return
    with pytest.raises(TaskSpecError) as info:
        _load(tmp_path, **changes)
    err = info.value
    assert err.file == str(tmp_path / "mm" / "task.json")
    assert err.field == field and words in err.problem, (err.field, err.problem)


def test_bundled_tasks_name_hidden_cases_and_derive():
    for name in bundled_task_names():
        s = resolve_task(name).spec
        assert s.hidden.cases and s.hidden.derive, name
        public = {json.dumps(c.sizes, sort_keys=True) for c in s.cases}
        assert not public & {json.dumps(c.sizes, sort_keys=True) for c in s.hidden.cases}, name


def test_a_hidden_case_of_a_stored_reference_needs_its_arrays(tmp_path):
    folder = tmp_path / "mm"
    shapes = {"A": (64, 32), "B": (32, 64), "C": (64, 64)}
    for case in ("v1", "h"):
        (folder / "expected" / case).mkdir(parents=True)
        for buf, shape in shapes.items():
            if case == "v1" or buf != "C":  # the hidden case lacks its expected output
                np.save(folder / "expected" / case / f"{buf}.npy", np.ones(shape, np.float32))
    hidden = {"cases": [{"name": "h", "sizes": {"M": 64, "N": 64, "K": 32}}]}
    with pytest.raises(TaskSpecError) as info:
        _load(tmp_path, cases=MATMUL["cases"][:1], reference={"kind": "stored"}, hidden=hidden)
    assert info.value.field == "reference.dir" and str(folder / "expected" / "h" / "C.npy") in info.value.problem
    np.save(folder / "expected" / "h" / "C.npy", np.ones(shapes["C"], np.float32))
    _load(tmp_path, cases=MATMUL["cases"][:1], reference={"kind": "stored"}, hidden=hidden)


def test_prime_sizes_of_int64_magnitude_are_found_quickly_and_are_prime():
    raw = copy.deepcopy(MATMUL)
    raw.update(params=[{"kind": "buffer", "name": "out", "dtype": "int64", "shape": [4], "role": "out"},
                       {"kind": "scalar", "name": "n", "dtype": "int64", "value": "n"}],
               sizes=["n"], cases=[{"name": "v", "role": "validation", "sizes": {"n": 10**15}}],
               tolerance={"int64": {}}, tunables=None)
    prime = dict(derived_sizes(TaskSpec.model_validate(raw), "cpu"))["prime"]["n"]
    assert 10**15 < prime < 10**15 + 1000 and all(prime % d for d in range(2, 200_000))
    assert [n for n in range(3000) if miller_rabin(n)] == [n for n in range(2, 3000) if all(n % d for d in range(2, n))]
