"""``cudaopt optimize`` end to end: the real CLI, which starts the real MCP server over stdio (cpu backend
without a GPU), or talks to a real HTTP server; the tuner proposes, nothing is mocked."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness_tools.backends.cuda.backend import gpu_present
from harness_tools.task.expressions import evaluate_expression
from harness_tools.task.loading import BUNDLED_DIR, resolve_task
from tests.cudaopt_mcp.client.scripted_llm import completion, error

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(gpu_present(), reason="these runs are sized for the cpu backend")


def optimize(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    return subprocess.run([sys.executable, "-m", "cudaopt_mcp.cli", "optimize", *args], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, env={**environment, **(env or {})})


def tunables_of(summary: dict) -> list[tuple]:
    return [tuple(sorted(a["proposal"]["tunables"].items())) for a in summary["attempts"]
            if a.get("proposal") and a["proposal"].get("tunables")]


def test_tuner_optimises_sgemm_through_a_stdio_server_and_a_run_can_be_continued(tmp_path):
    results = tmp_path / "results"
    out = optimize("sgemm", "--proposer", "tuner", "--max-iterations", "5", "--results", str(results), "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)  # stdout carries only the JSON summary; progress went to stderr
    assert "proposer tuner (asked for)" in out.stderr and "iteration 5:" in out.stderr
    assert summary["backend"] == "cpu" and summary["clock"] == "cpu-wall-clock" and summary["proposer"] == "tuner"
    attempts = summary["attempts"]
    assert [a["iteration"] for a in attempts] == [0, 1, 2, 3, 4, 5]
    assert attempts[0]["proposal"] is None and attempts[0]["correct"] and attempts[0]["score_ms"] > 0
    configs = tunables_of(summary)
    assert len(configs) == 5 and len(set(configs)) == 5
    spec = resolve_task("sgemm").spec
    for config in configs:  # every proposal honours the task's constraints
        assert all(evaluate_expression(c, dict(config)) for c in spec.tunables.constraints)
    best = summary["best"]
    # the server's best (crowned beyond the noise, head-to-head), with the score it recorded: not merely the lowest
    # number the loop saw
    recorded = json.loads((results / summary["run_id"] / "best.json").read_text())
    assert best["correct"] and best["candidate_id"] == recorded["candidate_id"]
    assert best["score_ms"] == pytest.approx(recorded["score_ms"])
    assert best["candidate_id"] == [a for a in attempts if a["new_best"]][-1]["candidate_id"]
    assert summary["confirmation"]["correct"] and summary["confirmation"]["candidate_id"] == best["candidate_id"]
    assert summary["confirmation"]["evaluation"]["seed"] != summary["seed"]  # fresh inputs for the confirmation
    assert summary["found_correct"] is True

    run = results / summary["run_id"]
    kernel = Path(summary["best_kernel"])
    assert kernel == run / "best_kernel.cu"
    text = kernel.read_text()
    for name, value in best["proposal"]["tunables"].items() if best["proposal"] else []:
        assert f"#define {name} {value}" in text
    assert "grid" in text and 'extern "C" __global__' in text
    launch = json.loads((run / "best_launch.json").read_text())
    assert launch["candidate_id"] == best["candidate_id"] and launch["per_case"]
    for attempt in attempts:
        assert (run / "candidates" / attempt["candidate_id"] / "kernel.cu").is_file()
    journal = [json.loads(line) for line in (run / "optimize.jsonl").read_text().splitlines()]
    assert [j["iteration"] for j in journal] == [0, 1, 2, 3, 4, 5]

    again = optimize("--run", summary["run_id"], "--proposer", "tuner", "--max-iterations", "3",
                     "--results", str(results), "--json")
    assert again.returncode == 0, again.stderr
    resumed = json.loads(again.stdout)
    assert "continuing sgemm in run-001" in again.stderr
    new = [a for a in resumed["attempts"] if a["iteration"] > 0]
    assert len(new) == 3 and all(a["proposal"]["tunables"] for a in new)  # the baseline is not evaluated again
    assert not set(tunables_of({"attempts": new})) & set(configs)  # no configuration evaluated twice


def test_auto_picks_the_tuner_without_an_api_key_and_the_tuner_stops_when_there_is_nothing_to_tune(tmp_path):
    folder = tmp_path / "plain_transpose"
    shutil.copytree(BUNDLED_DIR / "transpose", folder, ignore=shutil.ignore_patterns("__pycache__"))
    spec = json.loads((folder / "task.json").read_text())
    spec.pop("tunables")
    (folder / "task.json").write_text(json.dumps(spec))
    out = optimize(str(folder), "--max-iterations", "3", "--results", str(tmp_path / "results"))
    assert out.returncode == 2, out.stderr  # said before any work: no baseline is run for nothing
    assert "proposer tuner (no OPENAI_API_KEY in the environment)" in out.stderr
    assert "declares no tunable parameters" in out.stderr and "--proposer llm" in out.stderr


def test_bad_invocations_exit_2_with_the_reason(tmp_path):
    both = optimize("sgemm", "--run", "run-001", "--results", str(tmp_path))
    assert both.returncode == 2 and "not both" in both.stderr
    unknown = optimize("no_such_task", "--proposer", "tuner", "--results", str(tmp_path))
    assert unknown.returncode == 2 and "no_such_task" in unknown.stderr
    missing_run = optimize("--run", "run-042", "--proposer", "tuner", "--results", str(tmp_path))
    assert missing_run.returncode == 2 and "run-042" in missing_run.stderr


def test_optimize_against_a_running_http_server(tmp_path, http_server):
    _, url = http_server(tmp_path / "served")
    out = optimize("transpose", "--proposer", "tuner", "--max-iterations", "2", "--server", url, "--reps", "3",
                   "--results", str(tmp_path / "local"), "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert [a["status"] for a in summary["attempts"]][0] == "correct" and len(summary["attempts"]) == 3
    # the run lives with the server; the export is offered as a resource
    assert (tmp_path / "served" / summary["run_id"] / "history.jsonl").is_file()
    assert summary["best_kernel"] == f"cudaopt://runs/{summary['run_id']}/best/best_kernel.cu"
    # searching used the lighter timing plan asked for; the confirmation of the best the full one (cpu: 10)
    other = next(a["candidate_id"] for a in summary["attempts"] if a["candidate_id"] != summary["best"]["candidate_id"])
    record = json.loads((tmp_path / "served" / summary["run_id"] / "candidates" / other / "evaluation.json").read_text())
    assert len(record["cases"][-1]["timing"]["samples_ms"]) == 3
    assert summary["confirmation"]["evaluation"]["cases"][-1]["reps"] == 10


def test_the_time_budget_stops_the_loop(tmp_path):
    out = optimize("transpose", "--proposer", "tuner", "--max-iterations", "5", "--time-budget", "0.01",
                   "--results", str(tmp_path / "results"), "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert [a["iteration"] for a in summary["attempts"]] == [0]
    assert summary["stopped"] == "time budget of 0.01 s used"


FAKE_KEY = "sk-test-FAKE0123456789abcdef"
USAGE = {"prompt_tokens": 1200, "completion_tokens": 800, "total_tokens": 2000}


TRANSPOSE_32x8 = ('extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols)\n{\n'
                  "    const int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;\n"
                  "    if (r < rows && c < cols) out[(size_t)c * rows + r] = in[(size_t)r * cols + c];\n}\n")
COPY_NOT_TRANSPOSE = TRANSPOSE_32x8.replace("out[(size_t)c * rows + r]", "out[(size_t)r * cols + c]")


def reply(source: str, note: str) -> tuple[int, dict, dict]:
    return completion(json.dumps({"note": note, "source": source, "defines": [], "options": [],
                                  "launch": {"grid": ["ceil_div(cols, 32)", "ceil_div(rows, 8)"], "block": ["32", "8"],
                                             "shared_mem": "0"}}), USAGE)


def test_optimize_with_the_llm_proposer_end_to_end(llm_server, tmp_path):
    llm_server.script = [reply(TRANSPOSE_32x8, "32x8 blocks"), completion("Sorry, I would rather talk about it.", USAGE),
                         error(429, "slow down", {"Retry-After": "0"}), reply(COPY_NOT_TRANSPOSE, "copy rows")]
    results = tmp_path / "results"
    out = optimize("transpose", "--proposer", "llm", "--base-url", llm_server.base_url, "--max-iterations", "3",
                   "--results", str(results), "--json", env={"OPENAI_API_KEY": FAKE_KEY})
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["proposer"] == "llm" and "gpt-5-mini" in summary["proposer_detail"]
    assert [a["status"] for a in summary["attempts"]] == ["correct", "correct", "unusable_reply", "incorrect"]
    assert summary["attempts"][1]["proposal"]["note"] == "32x8 blocks"
    assert "mismatch" in summary["attempts"][3]["failure"]
    assert summary["usage"]["requests"] == 4 and summary["usage"]["prompt_tokens"] == 3 * 1200
    # over the wire: the server's prompt for this run, with the feedback of the previous candidate
    bodies = [r["body"] for r in llm_server.received]
    assert all(b["model"] == "gpt-5-mini" and b["reasoning_effort"] == "medium" for b in bodies)
    first, second = (b["messages"][-1]["content"] for b in bodies[:2])
    assert "Task `transpose`" in first and "Candidate c0001: correct" in first
    assert "Candidate c0002: correct (32x8 blocks)" in second and "perf_cpu_1024x1024" in second
    assert llm_server.received[0]["headers"]["authorization"] == f"Bearer {FAKE_KEY}"
    # recorded: every HTTP attempt, the failed one included; the key nowhere in the run folder
    run = results / summary["run_id"]
    assert len(list((run / "requests").glob("*-request.json"))) == 4
    responses = [json.loads(p.read_text()) for p in sorted((run / "requests").glob("*-response.json"))]
    assert [r.get("http_status") for r in responses][2] == 429
    for path in run.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".jsonl", ".cu", ".log"):
            assert FAKE_KEY not in path.read_text()


def test_the_llm_proposes_its_own_launch_sequence_on_a_two_kernel_task(llm_server, tmp_path):
    tuned = (BUNDLED_DIR / "softmax_split" / "tuned.cu").read_text()
    source = tuned  # its tunables come as defines, so the launch expressions see them too
    defines = [{"name": "THREADS", "value": "128"}, {"name": "CHUNK", "value": "2048"}, {"name": "VEC", "value": "4"}]
    grid = ["ceil_div(cols, CHUNK)", "rows"]
    steps = [{"kernel": "softmax_chunk_stats", "grid": grid, "block": ["THREADS"], "shared_mem": "0",
              "args": ["x", "st", "rows", "cols"]},
             {"kernel": "softmax_chunk_write", "grid": grid, "block": ["THREADS"], "shared_mem": "0",
              "args": ["x", "st", "y", "rows", "cols"]}]
    scratch = [{"name": "st", "dtype": "float32", "count": "2 * rows * ceil_div(cols, CHUNK)"}]
    missing_pass = steps[:1]  # the writes never happen: every y stays poisoned
    llm_server.script = [
        completion(json.dumps({"note": "online stats, 2048-column chunks", "source": source, "launch": None,
                               "launches": steps, "scratch": scratch, "defines": defines, "options": []}), USAGE),
        completion(json.dumps({"note": "skip the second pass", "source": source, "launch": None,
                               "launches": missing_pass, "scratch": scratch, "defines": defines, "options": []}), USAGE)]
    out = optimize("softmax_split", "--proposer", "llm", "--base-url", llm_server.base_url, "--max-iterations", "2",
                   "--results", str(tmp_path / "results"), "--json", "--no-confirm",
                   env={"OPENAI_API_KEY": FAKE_KEY})
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert [a["status"] for a in summary["attempts"]] == ["correct", "correct", "incorrect"], summary["attempts"]
    assert [s["kernel"] for s in summary["attempts"][1]["proposal"]["launches"]] == ["softmax_chunk_stats",
                                                                                     "softmax_chunk_write"]
    first = llm_server.received[0]["body"]["messages"][-1]["content"]
    assert "a sequence of launches" in first and "softmax_chunk_write" in first


def test_the_tuner_compiles_its_next_candidate_while_the_current_one_runs(tmp_path):
    results = tmp_path / "results"
    # on by default on a GPU backend only: asked for here, on the cpu backend; a fresh cache: no compile seen before
    out = optimize("sgemm", "--proposer", "tuner", "--max-iterations", "4", "--results", str(results), "--json",
                   "--no-confirm", "--compile-ahead", "on", env={"CUDAOPT_CUBIN_CACHE": str(tmp_path / "cubins")})
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    run = results / summary["run_id"]
    tuned = [a for a in summary["attempts"] if a["iteration"] > 0]
    assert [a["iteration"] for a in tuned] == [1, 2, 3, 4] and all(a["correct"] for a in tuned)
    compiled = {a["iteration"]: json.loads((run / "candidates" / a["candidate_id"] / "compile.json").read_text())
                for a in tuned}
    # the first was proposed and compiled while the baseline ran, each later one while the one before it ran, so
    # every evaluation found the cubin
    assert all(compiled[i]["cached"] for i in (1, 2, 3, 4))
    history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    for a in tuned:  # compiled by the compile tool (ahead), then again (from the cache) by its evaluation
        events = [e["event"] for e in history if e.get("candidate_id") == a["candidate_id"]]
        assert events.count("compiled") == 2 and events[-1] == "evaluate", events
    # nothing proposed ahead is left over: one candidate per attempt, none twice
    assert sorted(p.name for p in (run / "candidates").iterdir()) == sorted(a["candidate_id"] for a in summary["attempts"])

    plain = optimize("sgemm", "--proposer", "tuner", "--max-iterations", "2", "--results", str(results), "--json",
                     "--no-confirm", env={"CUDAOPT_CUBIN_CACHE": str(tmp_path / "other")})  # auto: off on cpu
    assert plain.returncode == 0, plain.stderr
    second = json.loads(plain.stdout)["attempts"][-1]
    record = results / json.loads(plain.stdout)["run_id"] / "candidates" / second["candidate_id"] / "compile.json"
    assert not json.loads(record.read_text())["cached"]


def test_the_tuner_keeps_several_candidates_compiling_ahead(tmp_path):
    results = tmp_path / "results"
    out = optimize("sgemm", "--proposer", "tuner", "--max-iterations", "6", "--results", str(results), "--json",
                   "--no-confirm", "--compile-ahead", "on", "--ahead", "3",
                   env={"CUDAOPT_CUBIN_CACHE": str(tmp_path / "cubins")})
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    run = results / summary["run_id"]
    tuned = [a for a in summary["attempts"] if a["iteration"] > 0]
    assert [a["iteration"] for a in tuned] == [1, 2, 3, 4, 5, 6] and all(a["correct"] for a in tuned)
    configs = [tuple(sorted(a["proposal"]["tunables"].items())) for a in tuned]
    assert len(set(configs)) == 6  # three in flight at once, never the same point twice
    cached = [json.loads((run / "candidates" / a["candidate_id"] / "compile.json").read_text())["cached"]
              for a in tuned]
    assert cached == [True] * 6  # the first three compiled while the baseline ran, each later one while earlier ones did
    assert sorted(p.name for p in (run / "candidates").iterdir()) == sorted(a["candidate_id"] for a in summary["attempts"])


def test_the_tuner_evaluates_several_candidates_at_once_on_the_servers_workers(tmp_path):
    results = tmp_path / "results"
    out = optimize("sgemm", "--proposer", "tuner", "--max-iterations", "8", "--results", str(results), "--json",
                   "--no-confirm", "--parallel", "3", "--seed", "3")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    run = results / summary["run_id"]
    tuned = [a for a in summary["attempts"] if a["iteration"] > 0]
    assert [a["iteration"] for a in tuned] == list(range(1, 9)) and all(a["correct"] for a in tuned)
    assert len(set(tunables_of(summary))) == 8  # three in flight at once, never the same point twice
    slots = {json.loads((run / "candidates" / a["candidate_id"] / "evaluation.json").read_text())["environment"]
             ["device"]["pool_slot"] for a in tuned}
    # the pool hands out its first free worker: a later one measured only while an earlier one was busy
    assert slots >= {0, 1}, slots
    history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    evaluated = [e["candidate_id"] for e in history if e.get("event") == "evaluate"]
    assert sorted(evaluated) == sorted(a["candidate_id"] for a in summary["attempts"])  # each once, none lost
    journal = [json.loads(line) for line in (run / "optimize.jsonl").read_text().splitlines()]
    assert [j["iteration"] for j in journal if j.get("iteration")] == list(range(1, 9))
    best = json.loads((run / "best.json").read_text())  # crowned in whatever order the results came back
    assert best["candidate_id"] in {a["candidate_id"] for a in summary["attempts"] if a["correct"]}


def test_ahead_and_parallel_out_of_range_are_refused(tmp_path):
    out = optimize("sgemm", "--proposer", "tuner", "--ahead", "0", "--results", str(tmp_path / "r"))
    assert out.returncode == 2 and "--ahead must be between 1 and 32, got 0" in out.stderr
    out = optimize("sgemm", "--proposer", "tuner", "--parallel", "0", "--results", str(tmp_path / "r"))
    assert out.returncode == 2 and "--parallel must be between 1 and 64, got 0" in out.stderr


def _copy_without(tmp_path: Path, task: str, drop: str | None = None, constraints: list[str] | None = None) -> Path:
    folder = tmp_path / task
    shutil.copytree(BUNDLED_DIR / task, folder)
    raw = json.loads((folder / "task.json").read_text())
    raw.pop("$schema", None)
    if drop:
        raw.pop(drop)
    if constraints is not None:
        raw["tunables"]["constraints"] = constraints
    (folder / "task.json").write_text(json.dumps(raw))
    return folder


def test_the_tuner_on_a_task_without_tunables_says_so_before_any_work(tmp_path):
    folder = _copy_without(tmp_path, "reduce_sum", drop="tunables")
    results = tmp_path / "results"
    out = optimize(str(folder), "--proposer", "tuner", "--results", str(results))
    assert out.returncode == 2, out.stderr
    assert "declares no tunable parameters" in out.stderr and "--proposer llm" in out.stderr
    assert '"tunables"' in out.stderr and "examples/vector_add/task.json" in out.stderr
    assert "iteration" not in out.stderr.lower() and "baseline" not in out.stderr.lower()  # nothing was run
    runs = list(results.glob("run-*"))
    assert len(runs) == 1
    candidates = runs[0] / "candidates"
    assert not candidates.exists() or not any(candidates.iterdir())


def test_the_tuner_on_constraints_that_exclude_everything_says_so(tmp_path):
    folder = _copy_without(tmp_path, "reduce_sum", constraints=["BLOCK < 0"])
    out = optimize(str(folder), "--proposer", "tuner", "--results", str(tmp_path / "results"))
    assert out.returncode == 2 and "exclude every one of the" in out.stderr, out.stderr
