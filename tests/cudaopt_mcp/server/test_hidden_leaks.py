"""Hidden means hidden: every tool output, resource and prompt of a run, swept for the hidden sizes and names.

A run of a small task (one named hidden case, derived ones) on the cpu backend, through the in-process MCP
client: candidates are created, evaluated, run, timed, compared, checked on the hidden cases (their private
records then hold the sizes), and the best is exported; then everything a client can read is collected.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import re
from pathlib import Path

import anyio
import numpy as np
from mcp import Client

from cudaopt_mcp.server.app import build_server
from cudaopt_mcp.service.candidates import load_candidate
from cudaopt_mcp.service.hidden import PRIVATE_RECORD, check_hidden, read_private_record
from cudaopt_mcp.service.runs import ARTIFACT
from cudaopt_mcp.service.state import ServerConfig, ServerState
from harness_tools.check.hidden_shapes import hidden_shapes
from harness_tools.task.loading import load_task
from tests.cudaopt_mcp.service.test_hidden import CORRECT, MULTIPLE_OF_256, SCALE_TASK, write_task

SPEC = copy.deepcopy(SCALE_TASK)
SPEC["cases"] = [{"name": "val_a", "role": "validation", "sizes": {"n": 768}},
                 {"name": "val_b", "role": "validation", "sizes": {"n": 2560}},
                 {"name": "val_c", "role": "validation", "sizes": {"n": 5376}},
                 {"name": "perf_cpu", "role": "performance", "sizes": {"n": 8192}}]


def dump(result) -> str:
    """Everything a client gets from a tool call: text blocks, links, structured content."""
    parts = [json.dumps(result.structured_content or {})]
    for block in result.content:
        parts.append(getattr(block, "text", "") or "")
        parts.append(str(getattr(block, "uri", "") or ""))
    return "\n".join(parts)


def contents(read) -> str:
    """A resource's text; of a binary one (a kept .npy output) its NumPy header, where shapes would show."""
    parts = []
    for c in read.contents:
        if getattr(c, "text", None) is not None:
            parts.append(c.text)
            continue
        data = io.BytesIO(base64.b64decode(c.blob))
        read_header = (np.lib.format.read_array_header_1_0 if np.lib.format.read_magic(data) == (1, 0)
                       else np.lib.format.read_array_header_2_0)
        parts.append(repr(read_header(data)))
    return "\n".join(parts)


def shows(text: str, value: int) -> bool:
    """``value`` as a number of its own (not inside a float, a seed, a hex digest or an id)."""
    return re.search(rf"(?<![0-9A-Za-z.]){value}(?![0-9A-Za-z.])", text) is not None


async def _sweep(c: Client, state: ServerState, folder: Path) -> list[str]:
    seen: list[str] = []

    async def tool(name: str, **args):
        result = await c.call_tool(name, args)
        seen.append(dump(result))
        return result.structured_content or {}

    seen.append(json.dumps([t.model_dump(mode="json") for t in (await c.list_tools()).tools]))
    await tool("list_tasks")
    run_id = (await tool("create_run", task=str(folder)))["run_id"]
    base = await tool("evaluate", run_id=run_id, timeout_s=120)
    wrong = await tool("evaluate", run_id=run_id, source=MULTIPLE_OF_256, timeout_s=120,
                       launch={"grid": ["max(n // 256, 1)"], "block": [256]})
    assert base["correct"] and wrong["correct"], "the wrong kernel passes every public case"
    await tool("compile", run_id=run_id, source=CORRECT, launch={"grid": ["ceil_div(n, 128)"], "block": [128]})
    for cid in (base["candidate_id"], wrong["candidate_id"]):
        await tool("run", run_id=run_id, candidate_id=cid, timeout_s=120)
        await tool("compare", run_id=run_id, candidate_id=cid)
        await tool("time", run_id=run_id, candidate_id=cid, timeout_s=120)
        await tool("profile", run_id=run_id, candidate_id=cid, timeout_s=60)
    job = await tool("start_evaluation", run_id=run_id, source=CORRECT, timeout_s=120,
                     launch={"grid": ["ceil_div(n, 64)"], "block": [64]})
    while (await tool("job", job_id=job["job_id"]))["status"] == "running":
        await anyio.sleep(0.5)
    # a passing candidate's evaluate keeps no outputs unless it is the best: run keeps them, so they are swept too
    await tool("run", run_id=run_id, candidate_id=state.store.candidate_ids(run_id)[-1], timeout_s=120)

    with state.store.locked(run_id):  # what the lead's evaluate does before a candidate may become best
        task = state.store.task(run_id)
        for cid in state.store.candidate_ids(run_id):
            check_hidden(state, run_id, task, load_candidate(state, run_id, cid), cid)
    assert not read_private_record(state, run_id, wrong["candidate_id"])["verdict"]["passed"]

    await tool("get_run", run_id=run_id)
    await tool("list_runs")
    await tool("history", run_id=run_id)
    await tool("best", run_id=run_id)
    seen.append(json.dumps([r.model_dump(mode="json") for r in (await c.list_resources()).resources]))
    uris = ["cudaopt://runs", f"cudaopt://runs/{run_id}", f"cudaopt://runs/{run_id}/history",
            f"cudaopt://runs/{run_id}/best/best_kernel.cu", f"cudaopt://runs/{run_id}/best/best_launch.json"]
    uris += [f"cudaopt://runs/{run_id}/task/{p.name}" for p in sorted((state.store.run_dir(run_id) / "task").iterdir())
             if p.is_file() and ARTIFACT.match(p.name)]
    for cid in state.store.candidate_ids(run_id):
        folder_c = state.store.candidate_dir(run_id, cid)
        assert (folder_c / PRIVATE_RECORD).is_file()
        uris += [f"cudaopt://runs/{run_id}/candidates/{cid}/{p.name}" for p in sorted(folder_c.iterdir())
                 if p.is_file() and ARTIFACT.match(p.name) and p.suffix != ".ncu-rep"]
        uris += [f"cudaopt://runs/{run_id}/candidates/{cid}/outputs/{p.parent.name}/{p.stem}"
                 for p in sorted(folder_c.glob("outputs/*/*.npy"))]
    for uri in uris:
        seen.append(contents(await c.read_resource(uri)))
    for mode in ("tools", "reply"):
        prompt = await c.get_prompt("optimize", {"run_id": run_id, "mode": mode})
        text = "\n".join(m.content.text for m in prompt.messages)
        assert "hidden cases of other sizes, never shown" in text  # that they exist is said, never which
        seen.append(text)
    assert len(uris) > 20
    return seen


def test_no_tool_output_resource_or_prompt_shows_a_hidden_size(tmp_path):
    folder = write_task(tmp_path / "tasks" / "scale_sweep", SPEC)
    shapes = hidden_shapes(load_task(folder).spec, "cpu")
    public = {c["sizes"]["n"] for c in SPEC["cases"]}
    secret_sizes = {s.case.sizes["n"] for s in shapes} - public
    secret_names = {s.case.name for s in shapes}
    assert len(secret_sizes) == len(shapes) == 7
    config = ServerConfig(results_dir=tmp_path / "results", backend="cpu", transport="inprocess")
    state = ServerState.open(config)
    try:
        async def main():
            async with Client(build_server(config)) as c:
                return await _sweep(c, state, folder)
        seen = "\n".join(anyio.run(main))
    finally:
        state.close()
    # the haystack is real: public sizes and names are in it, and the private records hold the secret ones
    assert all(shows(seen, n) for n in public) and "val_c" in seen and "((768,), False" in seen  # outputs too
    private = "\n".join(p.read_text() for p in (tmp_path / "results").glob(f"run-*/candidates/*/{PRIVATE_RECORD}"))
    assert all(str(n) in private for n in secret_sizes) and all(name in private for name in secret_names)
    leaked = {n: seen[max(m.start() - 80, 0):m.end() + 40] for n in secret_sizes
              for m in [re.search(rf"(?<![0-9A-Za-z.]){n}(?![0-9A-Za-z.])", seen)] if m}
    assert not leaked, f"hidden sizes appear in what a client reads: {leaked}"
    assert not [name for name in secret_names if name in seen]
    assert PRIVATE_RECORD not in seen
