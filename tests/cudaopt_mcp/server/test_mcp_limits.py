"""Hostile arguments through the MCP tools (in-process client, real engine, cpu backend): every one is a
clear, quick error that loses nothing, and an evaluation stays within the budget the call sets."""

from __future__ import annotations

import copy
import json
import shutil
import time
from pathlib import Path

import anyio

from harness_tools.task.loading import BUNDLED_DIR
from tests.cudaopt_mcp.server.test_mcp_server import call, client, text
from tests.harness_tools.evaluation.test_evaluation_limits import SPIN, big_task

TRANSPOSE_SPEC = json.loads((BUNDLED_DIR / "transpose" / "task.json").read_text())
TRANSPOSE_FILES = {name: (BUNDLED_DIR / "transpose" / name).read_text() for name in ("baseline.cu", "reference.py", "tuned.cu")}


def quick(seconds: float = 5.0):
    start = time.perf_counter()
    return lambda: time.perf_counter() - start < seconds


def test_huge_arguments_are_validation_errors_and_register_nothing(tmp_path):
    async def main():
        async with client(tmp_path / "results") as c:
            run_id = (await call(c, "create_run", task="transpose")).structured_content["run_id"]
            fast = quick()
            cases = [
                ({"source": "x" * (10 << 20)}, "524288"),
                ({"launch": {"grid": ["rows" + " + 1" * 2_500_000], "block": [32]}}, "1000"),
                ({"defines": {f"D{i}": i for i in range(1000)}}, "64"),
                ({"options": ["-lineinfo"] * 1000}, "32"),
                ({"note": "n" * 100_000}, "500"),
                ({"seed": -1}, "greater than or equal to 0"),
                ({"roles": ["validation"] * 1000}, "2"),
                ({"tunables": {f"T{i}": 1 for i in range(1000)}}, "32"),
            ]
            for args, words in cases:
                refused = await call(c, "evaluate", run_id=run_id, **args)
                assert refused.is_error and words in text(refused), (list(args), text(refused)[:300])
                assert len(text(refused)) < 5000, list(args)  # the argument is not echoed back whole
            assert fast()
            got = (await call(c, "get_run", run_id=run_id)).structured_content
            assert got["run"]["candidates"] == 0
            # the run is intact: a good call still works
            assert not (await call(c, "evaluate", run_id=run_id, roles=["validation"])).is_error
    anyio.run(main)


def test_a_launch_beyond_cuda_limits_comes_back_as_case_errors(tmp_path):
    async def main():
        async with client(tmp_path / "results") as c:
            run_id = (await call(c, "create_run", task="transpose")).structured_content["run_id"]
            out = await call(c, "evaluate", run_id=run_id, launch={"grid": [1, 1, 100000], "block": [32, 8]})
            assert out.is_error
            cases = out.structured_content["cases"]
            assert cases and all(case["status"] == "run_error" for case in cases)
            assert "z = 100000 exceeds CUDA's limit of 65535" in cases[0]["message"]
    anyio.run(main)


def test_inline_specs_with_bad_names_or_too_many_cases_are_refused(tmp_path):
    async def main():
        async with client(tmp_path / "results") as c:
            escape = copy.deepcopy(TRANSPOSE_SPEC)
            escape["params"][0]["name"] = "../../../../x"
            refused = await call(c, "create_run", spec=escape, files=TRANSPOSE_FILES)
            assert refused.is_error and "parameter name '../../../../x' must be an identifier" in text(refused)

            dotted = copy.deepcopy(TRANSPOSE_SPEC)
            dotted["cases"][0]["name"] = "../../owned"
            refused = await call(c, "create_run", spec=dotted, files=TRANSPOSE_FILES)
            assert refused.is_error and "case name '../../owned' must be an identifier" in text(refused)

            many = copy.deepcopy(TRANSPOSE_SPEC)
            many["cases"] = [{"name": f"v{i}", "role": "validation", "sizes": {"rows": 4, "cols": 4}}
                             for i in range(20_000)]
            fast = quick()
            refused = await call(c, "create_run", spec=many, files=TRANSPOSE_FILES)
            assert fast()
            assert refused.is_error and "20000 entries; at most 256" in text(refused)

            bad_file = await call(c, "create_run", spec=TRANSPOSE_SPEC, files={"../baseline.cu": "x"})
            assert bad_file.is_error and "plain file name" in text(bad_file)
            assert not (await call(c, "list_runs")).structured_content["runs"]
        assert not list(tmp_path.rglob("x.npy")) and not (tmp_path / "owned").exists()
    anyio.run(main)


def test_a_task_folder_with_a_link_out_of_it_is_refused_over_http(tmp_path, small_task):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET\n")
    linked = small_task.parent / "linked"
    shutil.copytree(small_task, linked)
    (linked / "notes.txt").symlink_to(secret)
    inner = small_task.parent / "inner"
    shutil.copytree(small_task, inner)
    (inner / "kernel.cu").write_text((inner / "baseline.cu").read_text())
    (inner / "baseline.cu").unlink()
    (inner / "baseline.cu").symlink_to("kernel.cu")

    async def main():
        async with client(tmp_path / "results", transport="http", task_roots=(small_task.parent,)) as c:
            refused = await call(c, "create_run", task=str(linked))
            assert refused.is_error and "notes.txt" in text(refused) and "leads out of the task folder" in text(refused)
            assert "TOP SECRET" not in text(refused)
            made = await call(c, "create_run", task=str(inner))  # a link that stays inside is fine
            assert not made.is_error, text(made)
            run_id = made.structured_content["run_id"]
            source = await c.read_resource(f"cudaopt://runs/{run_id}/task/baseline.cu")
            assert 'extern "C"' in source.contents[0].text
            copied = tmp_path / "results" / run_id / "task" / "baseline.cu"
            assert copied.is_symlink() and Path(copied.readlink()) == Path("kernel.cu")
    anyio.run(main)


def test_a_case_too_big_for_this_machine_is_a_clear_refusal_and_the_run_goes_on(tmp_path):
    task = big_task(tmp_path)

    async def main():
        async with client(tmp_path / "results") as c:
            run_id = (await call(c, "create_run", task=str(task.folder))).structured_content["run_id"]
            fast = quick()
            refused = await call(c, "evaluate", run_id=run_id, roles=["validation", "performance"])
            assert fast()
            assert refused.is_error and "case perf_big needs about" in text(refused)
            assert "GB of memory available" in text(refused) and "roles=['validation']" in text(refused)
            assert "MemoryError" not in text(refused) and "Traceback" not in text(refused)
            assert (await call(c, "get_run", run_id=run_id)).structured_content["run"]["candidates"] == 0  # budget kept
            ok = await call(c, "evaluate", run_id=run_id, roles=["validation"])
            assert not ok.is_error, text(ok)
    anyio.run(main)


def test_evaluate_stays_within_its_timeout(tmp_path):
    async def main():
        async with client(tmp_path / "results") as c:
            run_id = (await call(c, "create_run", task="transpose")).structured_content["run_id"]
            start = time.perf_counter()
            out = await call(c, "evaluate", run_id=run_id, source=SPIN, roles=["validation"], timeout_s=10)
            assert time.perf_counter() - start < 22
            cases = out.structured_content["cases"]
            assert out.is_error and cases[0]["status"] == "run_error"
            assert "budget of" in cases[0]["message"] and "ran out during this case" in cases[0]["message"]
            assert cases[1:] and all(case["status"] == "skipped" and "timeout_s" in case["message"] for case in cases[1:])
    anyio.run(main)
