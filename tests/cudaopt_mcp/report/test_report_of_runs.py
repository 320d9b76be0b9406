"""The run report of real runs: ``cudaopt optimize`` (tuner, and LLM with a scripted endpoint) on the cpu backend
writes it at the end; ``cudaopt report`` rebuilds it; headless Chromium opens the page without a console error."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from harness_tools.backends.cuda.backend import gpu_present
from harness_tools.check.compare import MAX_MAPS
from harness_tools.check.mismatch_map import MismatchMap
from tests.cudaopt_mcp.cli.test_cli import cudaopt as run_cli
from tests.cudaopt_mcp.client.scripted_llm import ScriptedLLM, completion
from tests.cudaopt_mcp.client.test_optimize import COPY_NOT_TRANSPOSE, FAKE_KEY, USAGE, TRANSPOSE_32x8, optimize, reply
from tests.cudaopt_mcp.report.chromium_page import CHROMIUM, open_page

pytestmark = pytest.mark.skipif(gpu_present(), reason="these runs are sized for the cpu backend")
PLOTS = ("progress", "latency", "importance", "space", "roofline", "resources")


@pytest.fixture(scope="module")
def tuner_run(tmp_path_factory) -> tuple[Path, str]:
    results = tmp_path_factory.mktemp("report") / "results"
    out = optimize("sgemm", "--proposer", "tuner", "--max-iterations", "8", "--seed", "3", "--results", str(results))
    assert out.returncode == 0, out.stderr
    return results / "run-001", out.stderr


def self_contained(html: str) -> None:
    """Nothing the page would fetch at view time: no script, no stylesheet link, no external source."""
    assert "<script" not in html and "<link" not in html and "@import" not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)
    assert not re.search(r"url\(\s*['\"]?(https?:|//)", html)


def test_optimize_writes_the_report_of_a_tuner_run(tuner_run):
    run, stderr = tuner_run
    folder = run / "report"
    assert f"report: {folder / 'report.html'}" in stderr
    html = (folder / "report.html").read_text()
    self_contained(html)
    for name in PLOTS:  # every plot the run has data for, inline and beside the page as SVG and PNG
        assert f"<figure id='{name}'><svg" in html, name
        assert (folder / f"{name}.svg").read_text().lstrip().startswith("<?xml")
        assert (folder / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "No candidate produced a wrong output." in html  # the error section says why it is empty
    best = json.loads((run / "best.json").read_text())
    markdown = (folder / "report.md").read_text()
    assert f"Best {best['candidate_id']} at {best['score_ms']:.4g} ms CPU" in markdown
    journal = [json.loads(line) for line in (run / "optimize.jsonl").read_text().splitlines()]
    assert f"{len(journal)} of {len(journal)} evaluations correct" in markdown or "failures:" in markdown
    # importance ranks the task's own tunables; the table lists the fastest correct candidates in order
    names = re.search(r"Parameter importance .*?: (.*)", markdown).group(1)
    assert {part.split()[0] for part in names.split(", ")} == {"BM", "BN", "BK", "TM", "TN", "MINB", "WIDE_MIN"}
    scores = [float(row.split("|")[3]) for row in markdown.splitlines() if re.match(r"\| c\d{4} \|", row)]
    assert scores == sorted(scores) and len(scores) >= 2
    summary = json.loads((run / "optimize_summary.json").read_text())
    assert "attempts" not in summary and "- proposer: tuner" in markdown and summary["run_id"] == "run-001"


def test_the_report_page_opens_in_chromium_without_console_errors(tuner_run, tmp_path):
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (.ci/run installs the distribution's package)")
    run, _ = tuner_run
    shot = tmp_path / "report.png"
    assert open_page(run / "report" / "report.html", shot) == []
    assert shot.stat().st_size > 50_000  # a rendered page of plots, not a blank one
    # the check itself can fail: a page with a script error is caught
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><script>console.error('broken'); missing();</script></body></html>")
    said = open_page(bad, tmp_path / "bad.png", 400, 300)
    assert any("broken" in m for m in said) and any("missing is not defined" in m for m in said)


def test_cudaopt_report_rebuilds_and_copies_the_page(tuner_run, tmp_path):
    run, _ = tuner_run
    copy = tmp_path / "copies" / "sgemm.html"
    out = run_cli("report", str(run), "--out", str(copy))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(copy) and copy.read_text().startswith("<!DOCTYPE html>")
    assert "[9/9] done" in out.stderr  # progress goes to stderr
    md = run_cli("report", "run-001", "--results", str(run.parent), "--markdown")
    assert md.returncode == 0 and md.stdout.startswith("# run-001 · sgemm")


@pytest.mark.parametrize("argument", ["run-404", "results/run-001/..", "not a run"])
def test_an_unknown_run_is_a_clear_error(argument, tmp_path):
    out = run_cli("report", argument, "--results", str(tmp_path))
    assert out.returncode == 2
    assert "cudaopt: error:" in out.stderr and ("unknown run" in out.stderr or "not a run" in out.stderr
                                                or "neither a run id" in out.stderr), out.stderr


def test_the_report_of_an_llm_run_shows_failures_by_kind_the_mismatch_map_and_the_token_cost(tmp_path):
    llm = ScriptedLLM()
    try:
        llm.script = [reply(TRANSPOSE_32x8, "32x8 blocks"), completion("Sorry, I would rather talk about it.", USAGE),
                      reply(COPY_NOT_TRANSPOSE, "copy rows")]
        results = tmp_path / "results"
        out = optimize("transpose", "--proposer", "llm", "--base-url", llm.base_url, "--max-iterations", "3",
                       "--results", str(results), env={"OPENAI_API_KEY": FAKE_KEY})
    finally:
        llm.stop()
    assert out.returncode == 0, out.stderr
    folder = results / "run-001" / "report"
    markdown = (folder / "report.md").read_text()
    assert "failures: wrong output 1, unusable reply 1" in markdown
    assert "- model: gpt-5-mini" in markdown and "- tokens: 3,600 in, 2,400 out" in markdown
    assert "- LLM requests: 3 (0 failed)" in markdown
    html = (folder / "report.html").read_text()
    self_contained(html)
    assert FAKE_KEY not in html and FAKE_KEY not in markdown
    # the copy-instead-of-transpose candidate's output, binned: wrong off the diagonal, right on it
    assert "<figure id='errors'><svg" in html and (folder / "errors.png").is_file()
    evaluation = json.loads((results / "run-001" / "candidates" / "c0003" / "evaluation.json").read_text())
    failing = [o for c in evaluation["cases"] for o in c["outputs"] if not o["passed"]]
    grids = [MismatchMap.model_validate(o["mismatch_map"]) for o in failing if o["mismatch_map"]]
    assert len(grids) == min(len(failing), MAX_MAPS)  # the largest few failing outputs keep a map
    square = next(g for g in grids if g.view_shape[0] == g.view_shape[1] and g.rows > 4)
    wrong = square.mismatches
    assert all(wrong[i][j] > 0 for i in range(square.rows) for j in range(square.cols) if abs(i - j) > 1)
    assert sum(wrong[i][i] for i in range(square.rows)) < sum(square.elements[i][i] for i in range(square.rows))
    # stored as one line of counts per bin row: a whole record stays readable in one resource read
    assert all(isinstance(row, str) for o in failing if o["mismatch_map"] for row in o["mismatch_map"]["mismatches"])


def test_a_remote_run_brings_the_servers_report_home(http_server, tmp_path):
    server_results = tmp_path / "server-results"
    _, url = http_server(server_results)
    local = tmp_path / "local"
    out = optimize("transpose", "--proposer", "tuner", "--max-iterations", "2", "--server", url,
                   "--results", str(local))
    assert out.returncode == 0, out.stderr
    page = local / "run-001" / "report" / "report.html"
    assert f"report: {page}" in out.stderr
    served = (server_results / "run-001" / "report" / "report.html").read_text()
    assert page.read_text() == served and len(served) > 60_000  # fetched in parts, put back together whole
    assert (local / "run-001" / "report" / "report.md").read_text().startswith("# run-001 · transpose")
    shutil.rmtree(local)
