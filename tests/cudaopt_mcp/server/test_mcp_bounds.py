"""Bounded answers whatever the run store holds: a real store with 2,000 candidates and 45 runs, read through the
SDK's in-process client. Every read tool answer and every resource read stays under ~25k tokens, and paging
(cursors, history pages, file parts) reaches every run and every event exactly once."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import anyio
import pytest
from mcp import Client, MCPError

from cudaopt_mcp.api_pages import ANSWER_CHARS, HISTORY_PAGE_EVENTS, READ_CHARS, RUNS_PAGE
from cudaopt_mcp.server.app import build_server
from cudaopt_mcp.service.runs import ARTIFACT
from cudaopt_mcp.service.state import ServerConfig

CANDIDATES = 2000
RUNS = 45
BOTH = ["validation", "performance"]


def answer_chars(result) -> int:
    """What a host holds of a tool answer: every content block and the structured content."""
    blocks = sum(len(b.text) if b.type == "text" else len(b.model_dump_json()) for b in result.content)
    return blocks + len(json.dumps(result.structured_content or {}))


def read_chars(read) -> int:
    return sum(len(getattr(c, "text", None) or getattr(c, "blob", None) or "") for c in read.contents)


def fill(run_dir: Path, count: int) -> None:
    """Clone the real, evaluated c0001 into c0002..c<count> in the store's own format, with the history lines the
    service writes: every third one incorrect, every seventh a compile error. Seconds, not 2,000 evaluations."""
    source = run_dir / "candidates" / "c0001"
    files = {n: (source / n).read_text() for n in ("kernel.cu", "candidate.json", "compile.json", "compile.log",
                                                   "evaluation.json")}
    meta, evaluation, compiled = (json.loads(files[n]) for n in ("candidate.json", "evaluation.json", "compile.json"))
    lines = []
    for n in range(2, count + 1):
        cid = f"c{n:04d}"
        folder = run_dir / "candidates" / cid
        folder.mkdir()
        record = dict(evaluation, correct=n % 3 != 0, failure=None if n % 3 else "case val_odd_33x65: 17 mismatches")
        texts = dict(files, **{"candidate.json": json.dumps({**meta, "candidate_id": cid, "digest": f"{n:016x}",
                                                             "baseline": False, "note": f"idea {n}: unroll by {n}"}),
                               "evaluation.json": json.dumps(record)})
        if n % 7 == 0:
            texts["compile.json"] = json.dumps({**compiled, "ok": False, "status": "error",
                                                "log": f"kernel.cu(3): error: identifier \"x{n}\" is undefined"})
            del texts["evaluation.json"]
        for name, text in texts.items():
            (folder / name).write_text(text)
        events = [{"event": "candidate", "candidate_id": cid, "digest": f"{n:016x}", "note": f"idea {n}"},
                  {"event": "compiled", "candidate_id": cid, "status": "error" if n % 7 == 0 else "ok"}]
        if n % 7:
            events.append({"event": "evaluate", "candidate_id": cid, "correct": n % 3 != 0, "score_ms": 0.01 * n,
                           "roles": BOTH, "seed": n})
        lines += [json.dumps({"time": 1.8e9 + n, **e}, separators=(",", ":")) for e in events]
    with open(run_dir / "history.jsonl", "a") as f:
        f.write("\n".join(lines) + "\n")


def more_runs(results: Path, count: int) -> None:
    """Runs 2..count: copies of run-001's task and record, with no candidates."""
    record = json.loads((results / "run-001" / "run.json").read_text())
    for n in range(2, count + 1):
        run_id = f"run-{n:03d}"
        folder = results / run_id
        (folder / "candidates").mkdir(parents=True)
        shutil.copytree(results / "run-001" / "task", folder / "task")
        (folder / "run.json").write_text(json.dumps({**record, "run_id": run_id}))
        (folder / "history.jsonl").write_text(json.dumps({"time": 1.8e9, "event": "created", "task": "t"}) + "\n")


@pytest.fixture
def make_store(tmp_path, small_task):
    """make_store(n): a results folder holding one evaluated run of n candidates and 44 more runs."""
    def make(count: int) -> Path:
        results = tmp_path / "results"

        async def evaluate_baseline():
            async with Client(build_server(ServerConfig(results_dir=results, backend="cpu",
                                                        transport="inprocess"))) as c:
                run_id = (await c.call_tool("create_run", {"task": str(small_task)})).structured_content["run_id"]
                done = await c.call_tool("evaluate", {"run_id": run_id, "roles": BOTH})
                assert done.structured_content["correct"] and done.structured_content["new_best"], done.structured_content
        anyio.run(evaluate_baseline)
        fill(results / "run-001", count)
        more_runs(results, RUNS)
        return results
    return make


def test_every_read_tool_and_resource_is_bounded_and_pages_reach_everything_once(make_store):
    full_store = make_store(CANDIDATES)
    sizes: dict[str, int] = {}
    history_file = (full_store / "run-001" / "history.jsonl").read_text()
    all_events = [json.loads(line) for line in history_file.splitlines()]
    assert len(all_events) > 5000

    async def tool(c: Client, name: str, **args):
        result = await c.call_tool(name, args)
        assert not result.is_error, (name, result.content[0].text[:500])
        sizes[f"{name} {args}"[:90]] = answer_chars(result)
        return result.structured_content

    async def read(c: Client, uri: str):
        got = await c.read_resource(uri)
        sizes[uri] = read_chars(got)
        return got.contents[0]

    async def main():
        async with Client(build_server(ServerConfig(results_dir=full_store, backend="cpu", transport="inprocess"))) as c:
            # list_runs: cursor pages, each run once
            seen, cursor, pages = [], None, 0
            while True:
                page = await tool(c, "list_runs", **({"cursor": cursor} if cursor else {}))
                seen += [r["run_id"] for r in page["runs"]]
                pages += 1
                assert page["total"] == RUNS and len(page["runs"]) <= RUNS_PAGE
                cursor = page.get("next_cursor")
                if not cursor:
                    break
            assert seen == [f"run-{n:03d}" for n in range(1, RUNS + 1)] and pages == 3
            # the runs resource: the same pages, linked by next_uri
            seen, uri = [], "cudaopt://runs"
            while uri:
                page = json.loads((await read(c, uri)).text)
                seen += [r["run_id"] for r in page["runs"]]
                uri = page.get("next_uri")
            assert seen == [f"run-{n:03d}" for n in range(1, RUNS + 1)]

            run = await tool(c, "get_run", run_id="run-001")
            assert run["run"]["candidates"] == CANDIDATES and len(run["run"]["recent"]) == 8
            await tool(c, "get_run", run_id="run-045")
            for task in (await tool(c, "list_tasks"))["tasks"]:
                assert "hidden" not in json.loads((await read(c, f"cudaopt://tasks/{task['name']}")).text)
            best = await tool(c, "best", run_id="run-001")
            correct = ["c0001"] + [f"c{n:04d}" for n in range(2, CANDIDATES + 1) if n % 3 and n % 7]
            assert best["correct_total"] == len(correct) and best["correct_candidates"] == correct[-200:]
            assert best["best"]["candidate_id"] == "c0001"

            # history by cursor, and by offset (the bundled client's way): every event once, in order
            events, cursor = [], None
            while True:
                page = await tool(c, "history", run_id="run-001", limit=100, **({"cursor": cursor} if cursor else {}))
                events += page["events"]
                cursor = page.get("next_cursor")
                if not cursor:
                    break
            assert events == all_events
            events, offset = [], 0
            while offset is not None:
                page = await tool(c, "history", run_id="run-001", offset=offset, limit=100)
                events += page["events"]
                offset = page.get("next_offset")
            assert events == all_events

            # the history resource: refused whole, served in pages that add up to the file
            with pytest.raises(MCPError) as whole:
                await c.read_resource("cudaopt://runs/run-001/history")
            count = -(-len(all_events) // HISTORY_PAGE_EVENTS)
            assert whole.value.error.code == -32602 and f"in {count} pages" in whole.value.error.message
            assert f"cudaopt://runs/run-001/history?page={count}" in whole.value.error.message
            text = "".join([(await read(c, f"cudaopt://runs/run-001/history?page={p}")).text for p in range(1, count + 1)])
            assert text == history_file
            assert (await read(c, "cudaopt://runs/run-045/history")).text.count("\n") == 1  # a short one: whole

            # every other resource of the big run, and the artifacts of a spread of its candidates
            await read(c, "cudaopt://runs/run-001")
            for name in sorted(p.name for p in (full_store / "run-001" / "task").iterdir()):
                await read(c, f"cudaopt://runs/run-001/task/{name}")
            for name in ("best_kernel.cu", "best_launch.json"):
                await read(c, f"cudaopt://runs/run-001/best/{name}")
            for n in (1, 7, 9, 1000, CANDIDATES):
                folder = full_store / "run-001" / "candidates" / f"c{n:04d}"
                for name in sorted(p.name for p in folder.iterdir() if p.is_file() and ARTIFACT.match(p.name)):
                    await read(c, f"cudaopt://runs/run-001/candidates/c{n:04d}/{name}")
            for output in sorted((full_store / "run-001" / "candidates" / "c0001" / "outputs").glob("*/*.npy")):
                base = f"cudaopt://runs/run-001/candidates/c0001/outputs/{output.parent.name}/{output.stem}"
                await read(c, base)
                await read(c, base + "/summary")
    anyio.run(main)
    largest = max(sizes, key=sizes.get)
    tools = {k: v for k, v in sizes.items() if not k.startswith("cudaopt://")}
    biggest_tool = max(tools, key=tools.get)
    print(f"\n{len(sizes)} answers; largest {sizes[largest]:,} characters: {largest}; largest tool answer "
          f"{tools[biggest_tool]:,}: {biggest_tool}")
    assert len(sizes) > 150
    over = {k: v for k, v in sizes.items() if v > ANSWER_CHARS}
    assert not over, over


def test_a_file_too_big_for_one_read_comes_in_parts_that_add_up_to_it(make_store):
    full_store = make_store(3)
    folder = full_store / "run-001" / "candidates" / "c0002"
    log = "".join(f"kernel.cu({i}): warning: variable \"v{i}\" was declared but never referenced\n" for i in range(4000))
    (folder / "compile.log").write_text(log)
    report = bytes(range(256)) * 800  # 204,800 bytes of a binary artifact
    (folder / "profile.ncu-rep").write_bytes(report)
    uri = "cudaopt://runs/run-001/candidates/c0002/"

    async def main():
        async with Client(build_server(ServerConfig(results_dir=full_store, backend="cpu", transport="inprocess"))) as c:
            for name, size, unit in (("compile.log", len(log), "characters"), ("profile.ncu-rep", len(report), "bytes")):
                with pytest.raises(MCPError) as whole:
                    await c.read_resource(uri + name)
                message = whole.value.error.message
                assert whole.value.error.code == -32602 and f"is {size:,} {unit}" in message, message
                assert f"{uri}{name}?part=1" in message, message
            count = -(-len(log) // READ_CHARS)
            parts = [(await c.read_resource(f"{uri}compile.log?part={p}")).contents[0] for p in range(1, count + 1)]
            assert "".join(p.text for p in parts) == log
            assert all(p.mime_type == "text/plain" and len(p.text) <= READ_CHARS for p in parts)
            blobs = []
            for p in range(1, 6):
                part = (await c.read_resource(f"{uri}profile.ncu-rep?part={p}")).contents[0]
                assert part.mime_type == "application/octet-stream" and len(part.blob) <= READ_CHARS
                blobs.append(base64.b64decode(part.blob))
            assert b"".join(blobs) == report
            for bad in ("0", "6", "x", "1" * 30):
                with pytest.raises(MCPError) as refused:
                    await c.read_resource(f"{uri}profile.ncu-rep?part={bad}")
                assert "parts are 1 to 5" in refused.value.error.message
    anyio.run(main)


def test_bad_cursors_are_refused_with_what_to_do(make_store):
    full_store = make_store(20)
    async def main():
        async with Client(build_server(ServerConfig(results_dir=full_store, backend="cpu", transport="inprocess"))) as c:
            runs_cursor = (await c.call_tool("list_runs", {})).structured_content["next_cursor"]
            history_cursor = (await c.call_tool("history", {"run_id": "run-001"})).structured_content["next_cursor"]
            cases = [("list_runs", {"cursor": "not-a-cursor"}, "not a cursor this server gave out"),
                     ("list_runs", {"cursor": history_cursor}, "it pages 'history', not 'runs'"),
                     ("history", {"run_id": "run-002", "cursor": history_cursor}, "belongs to 'run-001', not 'run-002'"),
                     ("history", {"run_id": "run-001", "cursor": runs_cursor}, "it pages 'runs'"),
                     ("history", {"run_id": "run-001", "cursor": history_cursor, "offset": 5}, "not both")]
            for tool, args, words in cases:
                refused = await c.call_tool(tool, args)
                assert refused.is_error and words in refused.content[0].text, (tool, args, refused.content[0].text)
                assert "next_cursor" in refused.content[0].text or "not both" in refused.content[0].text
            with pytest.raises(MCPError) as bad:
                await c.read_resource("cudaopt://runs?cursor=" + history_cursor)
            assert bad.value.error.code == -32602 and "it pages 'history'" in bad.value.error.message
    anyio.run(main)
