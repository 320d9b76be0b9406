"""The MCP server through the SDK's in-process client, on the real engine and the cpu backend."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import jsonschema
import pytest
from mcp import Client, MCPError

from cudaopt_mcp.server.app import build_server
from cudaopt_mcp.service.state import ServerConfig
from harness_tools.task.loading import BUNDLED_DIR, resolve_task

EXPECTED_TOOLS = {"list_tasks", "create_run", "list_runs", "get_run", "compile", "evaluate", "run", "compare", "time",
                  "profile", "sanitize", "history", "best", "start_evaluation", "job", "cancel_job"}


def client(results: Path, transport: str = "inprocess", backend: str = "cpu", **config) -> Client:
    return Client(build_server(ServerConfig(results_dir=results, backend=backend, transport=transport, **config)))


async def call(c: Client, tool: str, **args):
    return await c.call_tool(tool, args)


def text(result) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def test_tools_are_described_annotated_and_typed(tmp_path):
    async def main():
        async with client(tmp_path / "results") as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert set(tools) == EXPECTED_TOOLS and len(tools) <= 16
            for tool in tools.values():
                a = tool.annotations
                assert None not in (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint), tool.name
                assert tool.output_schema and tool.output_schema.get("type") == "object", tool.name
                assert len(tool.description) > 100, tool.name
            assert tools["get_run"].annotations.read_only_hint and not tools["evaluate"].annotations.read_only_hint
            assert not any(t.annotations.open_world_hint for t in tools.values())
            # the tools that replace a candidate's stored records say so; the others do not
            rewriting = {"compile", "evaluate", "run", "time", "profile", "sanitize", "start_evaluation"}
            assert {name for name, t in tools.items() if t.annotations.destructive_hint} == rewriting
            templates = {t.uri_template for t in (await c.list_resource_templates()).resource_templates}
            assert "cudaopt://runs/{run_id}/candidates/{candidate_id}/{name}.cu{?part}" in templates
            assert [p.name for p in (await c.list_prompts()).prompts] == ["optimize"]
    anyio.run(main)


def test_baseline_then_wrong_then_broken_kernel(tmp_path, kernels):
    async def main():
        async with client(tmp_path / "results") as c:
            created = await call(c, "create_run", task="transpose")
            assert not created.is_error, text(created)
            run_id = created.structured_content["run_id"]
            assert run_id == "run-001"
            assert created.structured_content["task"]["signature"].startswith('extern "C" __global__ void transpose(')

            progress: list[tuple[float, float | None, str | None]] = []

            async def on_progress(done, total, message):
                progress.append((done, total, message))

            base = await c.call_tool("evaluate", {"run_id": run_id}, progress_callback=on_progress)
            out = base.structured_content
            assert not base.is_error, text(base)
            # cpu backend: the validation cases and the one performance case sized for a CPU
            assert out["correct"] and out["candidate_id"] == "c0001" and out["roles"] == ["validation", "performance"]
            cases = resolve_task("transpose").spec.cases_for(["validation", "performance"], "cpu")
            assert [case["status"] for case in out["cases"]] == ["passed"] * len(cases)
            assert out["cases"][-1]["name"] == "perf_cpu_1024x1024" and out["score_ms"] > 0
            assert out["clock"] == "cpu-wall-clock"
            assert out["compile"]["registers"] > 0
            assert progress and progress[-1][0] == progress[-1][1] == 4
            assert [p[0] for p in progress] == sorted(p[0] for p in progress)
            links = {b.uri for b in base.content if b.type == "resource_link"}
            assert f"cudaopt://runs/{run_id}/candidates/c0001/evaluation.json" in links

            wrong = await call(c, "evaluate", run_id=run_id, source=kernels["wrong"], note="copy, not transpose")
            assert wrong.is_error
            w = wrong.structured_content
            assert not w["correct"] and w["candidate_id"] == "c0002"
            bad = next(case for case in w["cases"] if not case["passed"])
            assert bad["status"] == "mismatch" and bad["first_mismatch"]["buffer"] == "out"
            assert "first at" in w["failure"] and "mismatch" in text(wrong)


            broken = await call(c, "evaluate", run_id=run_id, source=kernels["broken"])
            assert broken.is_error
            b = broken.structured_content
            assert b["compile"]["status"] == "error" and b["cases"] == []
            assert "undefined_thing" in b["compile"]["first_error"] and "kernel.cu(3)" in b["compile"]["first_error"]
            log = await c.read_resource(f"cudaopt://runs/{run_id}/candidates/{b['candidate_id']}/compile.log")
            assert "undefined_thing" in log.contents[0].text

            got = (await call(c, "get_run", run_id=run_id)).structured_content
            assert [r["status"] for r in got["run"]["recent"]] == ["correct", "incorrect", "compile_error"]
            assert any("evaluate" in line for line in got["history_digest"])

            # a kernel that writes NaN: JSON has no NaN, so the value is named, and the answer still fits its schema
            nan = await call(c, "evaluate", run_id=run_id, source=kernels["wrong"].replace(
                "= in[(size_t)r * cols + c]", "= 0.0f / 0.0f"))
            first = next(case for case in nan.structured_content["cases"] if not case["passed"])["first_mismatch"]
            assert first["got"] == "NaN" and isinstance(first["expected"], float)
            schema = next(t for t in (await c.list_tools()).tools if t.name == "evaluate").output_schema
            jsonschema.validate(nan.structured_content, schema)
    anyio.run(main)


def test_run_compare_time_best_and_speedups(tmp_path, small_task, kernels):
    async def main():
        async with client(tmp_path / "results") as c:
            run_id = (await call(c, "create_run", task=str(small_task))).structured_content["run_id"]
            both = ["validation", "performance"]
            base = (await call(c, "evaluate", run_id=run_id, roles=both)).structured_content
            assert base["correct"] and base["score_ms"] > 0 and base["clock"] == "cpu-wall-clock"
            assert base["new_best"] and base["baseline_score_ms"] == base["score_ms"]

            tiled = {"TR": 32, "TC": 32, "THREADS": 128, "VEC": 4, "CS": 0}
            compiled = await call(c, "compile", run_id=run_id, tunables=tiled, note="tiled")
            cid = compiled.structured_content["candidate_id"]
            assert compiled.structured_content["ok"] and compiled.structured_content["static_shared_bytes"] > 0
            again = await call(c, "compile", run_id=run_id, tunables=tiled)
            assert again.structured_content["candidate_id"] == cid and again.structured_content["reused"]

            ran = await call(c, "run", run_id=run_id, candidate_id=cid, roles=both)
            assert not ran.is_error and "score_ms" not in ran.structured_content
            assert all("median_ms" not in case for case in ran.structured_content["cases"])
            assert ran.structured_content["outputs_kept"]
            output = await c.read_resource(f"cudaopt://runs/{run_id}/candidates/{cid}/outputs/perf_64x96/out")
            assert output.contents[0].blob  # a .npy file, base64 on the wire

            compared = await call(c, "compare", run_id=run_id, candidate_id=cid)
            cmp = compared.structured_content
            assert not compared.is_error and cmp["correct"] and cmp["source_record"] == "execution.json"
            assert all(case["max_abs_err"] == 0 and case["mismatches"] == 0 for case in cmp["cases"])

            timed = await call(c, "time", run_id=run_id, candidate_id=cid, reps=3, warmup=0)
            t = timed.structured_content
            assert not timed.is_error and t["roles"] == ["performance"] and t["score_ms"] > 0
            assert all(case["reps"] == 3 and case["median_ms"] > 0 for case in t["cases"])
            assert t["speedup_vs_baseline"] == pytest.approx(base["score_ms"] / t["score_ms"], rel=1e-3)

            perf_only = (await call(c, "evaluate", run_id=run_id, candidate_id=cid, roles=["performance"]))
            assert perf_only.structured_content["score_ms"] > 0 and perf_only.structured_content["best_before_ms"]

            best = (await call(c, "best", run_id=run_id)).structured_content
            assert best["best"]["candidate_id"] in ("c0001", cid)
            assert set(best["correct_candidates"]) == {"c0001", cid}
            page = (await call(c, "history", run_id=run_id, offset=0, limit=3)).structured_content
            assert len(page["events"]) == 3 and page["next_offset"] == 3 and page["events"][0]["event"] == "created"

            prof = await call(c, "profile", run_id=run_id, candidate_id=cid)
            assert prof.is_error and not prof.structured_content["available"]
            assert prof.structured_content["status"] == "unavailable"
            assert "needs the cuda backend" in prof.structured_content["reason"]
    anyio.run(main)


def test_a_validation_case_for_another_backend_does_not_block_the_best(tmp_path, small_task):
    # sgemm has GPU-only validation cases; on the cpu backend a candidate validated on every cpu case counts
    spec = json.loads((small_task / "task.json").read_text())
    spec["cases"].insert(0, {"name": "val_gpu_only_4097x3", "role": "validation", "sizes": {"rows": 4097, "cols": 3},
                             "backends": ["cuda"]})
    (small_task / "task.json").write_text(json.dumps(spec))

    async def main():
        async with client(tmp_path / "results") as c:
            run_id = (await call(c, "create_run", task=str(small_task))).structured_content["run_id"]
            checked = (await call(c, "evaluate", run_id=run_id, roles=["validation"])).structured_content
            assert checked["correct"] and "val_gpu_only_4097x3" not in {case["name"] for case in checked["cases"]}
            timed = (await call(c, "time", run_id=run_id, candidate_id=checked["candidate_id"], reps=3, warmup=0))
            assert timed.structured_content["score_ms"] > 0 and timed.structured_content["new_best"], timed.structured_content
    anyio.run(main)


@pytest.mark.parametrize("bad", ["../run-001", "run-001/../run-001", "/etc/passwd", "run-1", "run-001\x00", ""])
def test_unknown_and_traversal_run_ids_are_refused(tmp_path, bad):
    async def main():
        async with client(tmp_path / "results") as c:
            await call(c, "create_run", task="transpose")
            for tool in ("get_run", "evaluate", "history", "best"):
                result = await call(c, tool, run_id=bad)
                assert result.is_error and "run id" in text(result), (tool, text(result))
            unknown = await call(c, "get_run", run_id="run-999")
            assert unknown.is_error and "unknown run 'run-999'" in text(unknown)
    anyio.run(main)


def test_traversal_candidate_ids_and_artifacts_are_refused(tmp_path):
    async def main():
        async with client(tmp_path / "results") as c:
            await call(c, "create_run", task="transpose")
            await call(c, "compile", run_id="run-001")
            for cid in ("../c0001", "c0001/..", "c9999", "c1"):
                result = await call(c, "compare", run_id="run-001", candidate_id=cid)
                assert result.is_error and "candidate" in text(result), cid
            base = "cudaopt://runs/run-001/candidates/c0001/"
            assert "extern" in (await c.read_resource(base + "kernel.cu")).contents[0].text
            for uri in (base + "..%2F..%2Frun.json", base + ".evaluating", base + "%2E%2E", base + "outputs",
                        "cudaopt://runs/run-001/task/..%2F..%2F..%2Fetc%2Fpasswd", "cudaopt://runs/..%2Frun-001",
                        base + "outputs/..%2F..%2F/x"):
                with pytest.raises(MCPError):
                    await c.read_resource(uri)
    anyio.run(main)


def test_bad_arguments_say_what_is_wrong(tmp_path):
    async def main():
        async with client(tmp_path / "results") as c:
            await call(c, "create_run", task="transpose", max_candidates=1)
            cases = [
                ({"launch": {"grid": [1]}}, "block"),
                ({"options": ["--include-path=/etc"]}, "not accepted"),
                ({"defines": {"X": "\"/etc/passwd\""}}, "X"),
                ({"source": "x", "tunables": {"TILE": 16}}, "not both"),
                ({"roles": ["warmup"]}, "roles"),
                ({"candidate_id": "c0001", "source": "x"}, "not both"),
            ]
            for args, message in cases:
                result = await call(c, "evaluate", run_id="run-001", **args)
                assert result.is_error and message in text(result), (args, text(result))
            assert (await call(c, "compile", run_id="run-001")).structured_content["candidate_id"] == "c0001"
            over = await call(c, "compile", run_id="run-001", defines={"UNUSED": 1})
            assert over.is_error and "budget of 1" in text(over)
            neither = await call(c, "create_run")
            assert neither.is_error and "exactly one" in text(neither)
            missing = await call(c, "create_run", task="no_such_task")
            assert missing.is_error and "not a bundled task" in text(missing)
    anyio.run(main)


def test_inline_spec_only_from_a_local_client(tmp_path, small_task):
    spec = json.loads((BUNDLED_DIR / "transpose" / "task.json").read_text())
    files = {name: (BUNDLED_DIR / "transpose" / name).read_text() for name in ("baseline.cu", "reference.py", "tuned.cu")}

    async def main():
        async with client(tmp_path / "local") as c:
            made = await call(c, "create_run", spec=spec, files=files)
            assert not made.is_error, text(made)
            assert (await call(c, "evaluate", run_id="run-001")).structured_content["correct"]
        async with client(tmp_path / "remote", transport="http") as c:
            refused = await call(c, "create_run", spec=spec, files=files)
            assert refused.is_error and "stdio" in text(refused)
            outside = await call(c, "create_run", task=str(small_task))
            assert outside.is_error and "--task-root" in text(outside)
            assert not (await call(c, "create_run", task="transpose")).is_error
            for probe in ("harness_tools", "/etc", "../..", "~"):  # no folder of the server's is probed or loaded
                refused = await call(c, "create_run", task=probe)
                assert refused.is_error and "no task.json" not in text(refused), probe
        async with client(tmp_path / "remote2", transport="http", task_roots=(small_task.parent,)) as c:
            inside = await call(c, "create_run", task=str(small_task))
            assert not inside.is_error, text(inside)
    anyio.run(main)


def test_resources_and_prompt(tmp_path, kernels):
    async def main():
        async with client(tmp_path / "results") as c:
            await call(c, "create_run", task="transpose")
            await call(c, "evaluate", run_id="run-001", source=kernels["wrong"])
            runs = json.loads((await c.read_resource("cudaopt://runs")).contents[0].text)
            assert [r["run_id"] for r in runs["runs"]] == ["run-001"]
            run = json.loads((await c.read_resource("cudaopt://runs/run-001")).contents[0].text)
            assert run["task"]["name"] == "transpose" and run["run"]["recent"][0]["status"] == "incorrect"
            task_json = (await c.read_resource("cudaopt://runs/run-001/task/task.json")).contents[0].text
            assert json.loads(task_json)["kernel_name"] == "transpose"
            history = (await c.read_resource("cudaopt://runs/run-001/history")).contents[0].text
            assert json.loads(history.splitlines()[0])["event"] == "created"
            record = json.loads((await c.read_resource("cudaopt://runs/run-001/candidates/c0001/evaluation.json"))
                                .contents[0].text)
            assert record["correct"] is False and record["cases"]

            prompt = await c.get_prompt("optimize", {"run_id": "run-001"})
            body = prompt.messages[0].content.text
            assert 'extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols)' in body
            assert "Candidate c0001: incorrect" in body and "first at" in body and "$" not in body
            # bad arguments are invalid params (-32602) with the reason, not an internal error
            with pytest.raises(MCPError) as unknown:
                await c.get_prompt("optimize", {"run_id": "run-404"})
            assert unknown.value.error.code == -32602 and "unknown run 'run-404'" in unknown.value.error.message
            with pytest.raises(MCPError) as bad_mode:
                await c.get_prompt("optimize", {"run_id": "run-001", "mode": "chat"})
            assert bad_mode.value.error.code == -32602 and "mode must be 'tools' or 'reply'" in bad_mode.value.error.message
            listed = (await c.list_prompts()).prompts[0]
            assert all(a.description for a in listed.arguments), listed.arguments
            # and so are an unknown prompt, a missing required argument and an unknown tool (MCP 2025-11-25)
            for request, reason in [(c.get_prompt("optimise", {"run_id": "run-001"}), "unknown prompt 'optimise'"),
                                    (c.get_prompt("optimize", {}), "needs the argument(s) run_id"),
                                    (c.call_tool("evaluat", {"run_id": "run-001"}), "unknown tool 'evaluat'")]:
                with pytest.raises(MCPError) as refused:
                    await request
                assert refused.value.error.code == -32602 and reason in refused.value.error.message
    anyio.run(main)


@pytest.mark.gpu
def test_feedback_on_a_short_kernel_names_the_timing_floor(tmp_path):
    async def main():
        async with client(tmp_path / "results", backend="cuda") as c:
            await call(c, "create_run", task="reduce_sum")
            done = await call(c, "evaluate", run_id="run-001",
                              tunables={"BLOCK": 256, "ITEMS": 4, "GRID_THREADS": 262144, "CS": 1})
            assert not done.is_error, text(done)
            body = (await c.get_prompt("optimize", {"run_id": "run-001"})).messages[0].content.text
            assert "Timing floor: an empty kernel measures" in body  # the n=10,000,019 case takes ~14 µs
    anyio.run(main)


@pytest.mark.gpu
def test_a_search_step_compares_small_outputs_on_the_device_and_run_downloads_them(tmp_path):
    """evaluate (the search step) compares outputs of 64 KiB or more on the GPU: no download, no host comparison;
    run still downloads outputs under 16 MB and keeps them for the client to read."""
    task = Path(__file__).resolve().parents[3] / "examples" / "vector_add"  # outputs of 4 B to 40 MB

    async def main():
        async with client(tmp_path / "results", backend="cuda") as c:
            run_id = (await call(c, "create_run", task=str(task))).structured_content["run_id"]
            searched = await call(c, "evaluate", run_id=run_id)
            assert not searched.is_error and searched.structured_content["correct"], text(searched)
            cid = searched.structured_content["candidate_id"]
            record = json.loads((await c.read_resource(f"cudaopt://runs/{run_id}/candidates/{cid}/evaluation.json"))
                                .contents[0].text)
            where = {case["name"]: case["outputs"][0]["compared_on"] for case in record["cases"]}
            assert where == {"val_n1": "host", "val_n31": "host", "val_n1000": "host", "val_n65537": "device",
                             "val_n1000003": "device", "perf_n10000000": "device"}, where
            ran = await call(c, "run", run_id=run_id, candidate_id=cid)
            assert not ran.is_error and "val_n1000003" in ran.structured_content["outputs_kept"], text(ran)
            uri = f"cudaopt://runs/{run_id}/candidates/{cid}/outputs/val_n1000003/c"
            summary = json.loads((await c.read_resource(f"{uri}/summary")).contents[0].text)
            assert summary["shape"] == [1000003] and summary["dtype"] == "float32", summary
            assert (await c.read_resource(f"{uri}?part=1")).contents[0].blob  # 4 MB: read in parts
    anyio.run(main)


def test_two_clients_on_one_run_lose_no_candidates(tmp_path):
    server = build_server(ServerConfig(results_dir=tmp_path / "results", backend="cpu", transport="inprocess"))
    ids: list[str] = []

    async def worker(c: Client, offset: int):
        for i in range(6):
            result = await call(c, "compile", run_id="run-001", defines={"VARIANT": offset + i})
            ids.append(result.structured_content["candidate_id"])

    async def main():
        async with Client(server) as a, Client(server) as b:
            await call(a, "create_run", task="transpose")
            async with anyio.create_task_group() as tg:
                tg.start_soon(worker, a, 0)
                tg.start_soon(worker, b, 100)
            got = (await call(b, "get_run", run_id="run-001")).structured_content
            assert got["run"]["candidates"] == 12
    anyio.run(main)
    assert sorted(ids) == [f"c{i:04d}" for i in range(1, 13)]


def test_start_then_poll(tmp_path, kernels):
    """Work that may outlast a client's call limit: start_evaluation answers at once, job() polls."""
    async def main():
        async with client(tmp_path / "results") as c:
            run_id = (await call(c, "create_run", task="transpose")).structured_content["run_id"]
            started = (await call(c, "start_evaluation", run_id=run_id)).structured_content
            assert started["job_id"] == "job-0001" and started["status"] in ("running", "done")
            for _ in range(600):
                status = (await call(c, "job", job_id=started["job_id"])).structured_content
                if status["status"] != "running":
                    break
                await anyio.sleep(0.1)
            assert status["status"] == "done", status
            assert status["result"]["correct"] and status["result"]["candidate_id"] == "c0001"
            stored = (await call(c, "get_run", run_id=run_id)).structured_content  # stored like any evaluation
            assert [r["status"] for r in stored["run"]["recent"]] == ["correct"]
            wrong = (await call(c, "start_evaluation", run_id=run_id, source=kernels["wrong"])).structured_content
            for _ in range(600):
                status = (await call(c, "job", job_id=wrong["job_id"])).structured_content
                if status["status"] != "running":
                    break
                await anyio.sleep(0.1)
            assert status["status"] == "done" and not status["result"]["correct"]
            # sanitize (racecheck over many cases can take minutes) as a background job too
            san = (await call(c, "start_evaluation", run_id=run_id, what="sanitize",
                              candidate_id=status["result"]["candidate_id"])).structured_content
            for _ in range(1200):
                done = (await call(c, "job", job_id=san["job_id"])).structured_content
                if done["status"] != "running":
                    break
                await anyio.sleep(0.1)
            assert done["status"] == "done" and done["what"] == "sanitize", done
            assert done["result"]["backend"] == "cpu" and done["result"]["cases"]
            assert (await call(c, "start_evaluation", run_id=run_id, what="profile")).is_error  # needs candidate_id
            for bad in ("job-9999", "../job-0001"):
                refused = await call(c, "job", job_id=bad)
                assert refused.is_error
            assert (await call(c, "start_evaluation", run_id="run-999")).is_error
    anyio.run(main)


def test_list_runs_stays_small_and_a_misnamed_kernel_says_why(tmp_path):
    """list_runs and the runs resource summarise runs without listing their candidates; a kernel whose name is
    not the task's says so in first_error (not ptxas' "0 bytes gmem" line)."""
    source = resolve_task("transpose").read("baseline.cu").replace("void transpose(", "void not_the_kernel(")

    async def main():
        async with client(tmp_path / "results") as c:
            run_id = (await call(c, "create_run", task="transpose")).structured_content["run_id"]
            for roles in (["validation"], ["validation"]):
                await call(c, "evaluate", run_id=run_id, roles=roles)
            listed = (await call(c, "list_runs")).structured_content["runs"]
            assert [r["run_id"] for r in listed] == [run_id] and all(not r.get("recent") for r in listed)
            resource = json.loads((await c.read_resource("cudaopt://runs")).contents[0].text)
            assert all(not r.get("recent") for r in resource["runs"])
            got = (await call(c, "get_run", run_id=run_id)).structured_content
            assert got["run"]["recent"]  # one run asked for: its latest candidates are shown
            bad = await call(c, "compile", run_id=run_id, source=source)
            assert bad.is_error and "not an entry point" in bad.structured_content["first_error"], bad.structured_content
    anyio.run(main)


def test_unknown_arguments_are_refused_by_name_and_tools_have_titles(tmp_path):
    async def main():
        async with client(tmp_path / "results") as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert all(t.title for t in tools.values()), [n for n, t in tools.items() if not t.title]
            assert all(t.input_schema.get("additionalProperties") is False for t in tools.values())
            run_id = (await call(c, "create_run", task="transpose")).structured_content["run_id"]
            bad = await call(c, "evaluate", run_id=run_id, rep=3, timeout=5)  # misspelt reps / timeout_s
            assert bad.is_error
            assert "unknown argument(s) 'rep', 'timeout'" in text(bad) and "reps" in text(bad) and "timeout_s" in text(bad)
            history = (await call(c, "history", run_id=run_id)).structured_content
            assert not any(e.get("event") == "evaluate" for e in history["events"])  # nothing ran on defaults
    anyio.run(main)


def test_a_relative_task_folder_says_where_it_was_looked_for(tmp_path):
    async def main():
        async with client(tmp_path / "results") as c:
            missing = await call(c, "create_run", task="my_tasks/scale")
            assert missing.is_error
            message = text(missing)
            assert "not a bundled task" in message and "server's working directory" in message
            assert "absolute path" in message and ": -:" not in message
    anyio.run(main)
