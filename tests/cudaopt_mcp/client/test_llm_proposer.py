"""The LLM proposer against a real local OpenAI-compatible HTTP server that plays back scripted replies."""

from __future__ import annotations

import json
import socket
import sys
import time

import pytest

from cudaopt_mcp.client.proposal import NoProposal, Proposal, ProposalContext, ProposerSettings
from cudaopt_mcp.client.proposers import create_proposer
from cudaopt_mcp.client.proposers.llm_records import TokenUsage, cost_usd
from cudaopt_mcp.errors import ProposerUnavailable
from cudaopt_mcp.service.views import task_summary
from harness_tools.task.loading import resolve_task
from tests.cudaopt_mcp.client.scripted_llm import completion, error

FAKE_KEY = "sk-test-FAKE0123456789abcdef"
KERNEL = ('extern "C" __global__ void sgemm(const float* A, const float* B, float* C, int M, int N, int K)\n'
          "{ /* tiled */ }\n")
GOOD = {"note": "32x32 shared-memory tiles", "source": KERNEL,
        "launch": {"grid": ["ceil_div(N, TILE)", "ceil_div(M, TILE)"], "block": ["TILE", "TILE"], "shared_mem": "0"},
        "defines": [{"name": "TILE", "value": "32"}], "options": ["-use_fast_math"]}
USAGE = {"prompt_tokens": 1200, "completion_tokens": 800, "total_tokens": 2000,
         "prompt_tokens_details": {"cached_tokens": 1000}, "completion_tokens_details": {"reasoning_tokens": 500}}


@pytest.fixture
def context(tmp_path) -> ProposalContext:
    return ProposalContext(run_id="run-001", backend="cpu", task=task_summary(resolve_task("sgemm"), "run-001"),
                           iteration=1, max_iterations=5, attempts=[], prompt="Optimise sgemm. PROMPT-MARKER",
                           requests_dir=tmp_path / "requests")


@pytest.fixture
def proposer_for(llm_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    made = []

    def make(**overrides):
        settings = ProposerSettings(**{"base_url": llm_server.base_url, "retry_base_s": 0.01, **overrides})
        made.append(create_proposer("llm", settings))
        return made[-1]

    yield make
    for proposer in made:
        proposer.close()


def records(context: ProposalContext, kind: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(context.requests_dir.glob(f"*-{kind}.json"))]


def test_structured_reply_becomes_a_proposal_and_the_request_is_what_the_api_expects(llm_server, proposer_for, context):
    llm_server.script = [completion(json.dumps(GOOD), usage=USAGE)]
    proposer = proposer_for()
    assert proposer.describe() == f"llm: gpt-5-mini (reasoning medium) at {llm_server.base_url}"

    result = proposer.propose(context)

    assert isinstance(result, Proposal)
    assert result.source.startswith('extern "C" __global__ void sgemm')
    assert result.launch.grid == ["ceil_div(N, TILE)", "ceil_div(M, TILE)"] and result.launch.block == ["TILE", "TILE"]
    assert result.defines == {"TILE": 32} and result.options == ["-use_fast_math"]
    assert result.note == "32x32 shared-memory tiles"
    [sent] = llm_server.received
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["authorization"] == f"Bearer {FAKE_KEY}"
    body = sent["body"]
    assert body["model"] == "gpt-5-mini" and body["reasoning_effort"] == "medium"
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["strict"] is True
    schema = body["response_format"]["json_schema"]["schema"]
    assert set(schema["required"]) == set(schema["properties"]) == {"note", "source", "launch", "launches", "scratch",
                                                                     "defines", "options"}
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][1]["content"] == context.prompt
    assert "expert CUDA" in body["messages"][0]["content"] and "$reply_format" not in body["messages"][0]["content"]


def test_every_attempt_is_recorded_with_usage_and_never_the_key(llm_server, proposer_for, context):
    llm_server.script = [completion(json.dumps(GOOD), usage=USAGE)]
    proposer = proposer_for()
    proposer.propose(context)

    [request] = records(context, "request")
    [response] = records(context, "response")
    assert (context.requests_dir / "0001-request.json").is_file() and (context.requests_dir / "0001-response.json").is_file()
    assert request["iteration"] == 1 and request["attempt"] == 1 and request["model"] == "gpt-5-mini"
    assert request["body"]["messages"][1]["content"] == context.prompt
    assert request["body"]["response_format"]["type"] == "json_schema" and request["body"]["reasoning_effort"] == "medium"
    assert response["status"] == "ok" and response["http_status"] == 200 and response["latency_s"] >= 0
    assert json.loads(response["text"])["note"] == GOOD["note"]
    assert response["usage"] == {"prompt_tokens": 1200, "completion_tokens": 800, "reasoning_tokens": 500,
                                 "cached_tokens": 1000}
    assert response["cost_usd"] is None  # a local endpoint: OpenAI's prices do not apply
    usage = proposer.usage()
    assert (usage.requests, usage.prompt_tokens, usage.completion_tokens, usage.cost_usd) == (1, 1200, 800, None)
    for path in context.requests_dir.iterdir():
        assert FAKE_KEY not in path.read_text()


def test_numbering_continues_after_records_already_there(llm_server, proposer_for, context):
    context.requests_dir.mkdir()
    (context.requests_dir / "0007-request.json").write_text("{}")
    (context.requests_dir / "0007-response.json").write_text("{}")
    llm_server.script = [completion(json.dumps(GOOD)), completion(json.dumps(GOOD))]
    proposer = proposer_for()
    proposer.propose(context)
    proposer.propose(context.model_copy(update={"iteration": 2}))
    assert sorted(p.name for p in context.requests_dir.iterdir())[2:] == [
        "0008-request.json", "0008-response.json", "0009-request.json", "0009-response.json"]
    assert records(context, "request")[-1]["iteration"] == 2


def test_malformed_reply_is_unusable_and_recorded(llm_server, proposer_for, context):
    llm_server.script = [completion('{"note": "oops", "source": "extern')]
    result = proposer_for().propose(context)
    assert isinstance(result, NoProposal) and result.kind == "unusable"
    assert "invalid" in result.reason and "JSON" in result.reason
    assert records(context, "response")[0]["text"] == '{"note": "oops", "source": "extern'


def test_invalid_launch_is_unusable_with_a_readable_reason(llm_server, proposer_for, context):
    bad = {**GOOD, "launch": {"grid": [], "block": ["256"], "shared_mem": "0"}}
    llm_server.script = [completion(json.dumps(bad))]
    result = proposer_for().propose(context)
    assert isinstance(result, NoProposal) and result.kind == "unusable"
    assert result.reason.startswith("invalid launch: grid:")


def test_cut_off_reply_says_so(llm_server, proposer_for, context):
    llm_server.script = [completion('{"note": "x", "source": "extern \\"C\\" __glo', finish_reason="length")]
    result = proposer_for().propose(context)
    assert isinstance(result, NoProposal) and "cut off at the token limit" in result.reason


def test_rate_limit_then_success_honours_retry_after(llm_server, proposer_for, context):
    llm_server.script = [error(429, "slow down", {"Retry-After": "0"}), completion(json.dumps(GOOD), usage=USAGE)]
    proposer = proposer_for(retry_base_s=30.0)  # Retry-After: 0 wins over the 30 s backoff
    started = time.monotonic()
    result = proposer.propose(context)
    assert time.monotonic() - started < 10
    assert isinstance(result, Proposal)
    assert len(llm_server.received) == 2
    assert [r["attempt"] for r in records(context, "request")] == [1, 2]
    responses = records(context, "response")
    assert [(r["status"], r["http_status"]) for r in responses] == [("error", 429), ("ok", 200)]
    assert "slow down" in responses[0]["error"]
    assert proposer.usage().requests == 2 and proposer.usage().failed_requests == 1


def test_server_error_then_success(llm_server, proposer_for, context):
    llm_server.script = [error(500, "boom"), error(503, "overloaded"), completion(json.dumps(GOOD))]
    result = proposer_for().propose(context)
    assert isinstance(result, Proposal)
    assert [r["http_status"] for r in records(context, "response")] == [500, 503, 200]


def test_timeout_is_retried(llm_server, proposer_for, context):
    llm_server.script = [1.0, completion(json.dumps(GOOD)), completion(json.dumps(GOOD))]
    result = proposer_for(request_timeout_s=0.3).propose(context)
    assert isinstance(result, Proposal)
    first = records(context, "response")[0]
    assert first["status"] == "error" and first["http_status"] is None and "Timeout" in first["error"]


def test_unreadable_response_is_retried(llm_server, proposer_for, context):
    llm_server.script = [(200, b"<html>proxy error</html>", {}), completion(json.dumps(GOOD))]
    assert isinstance(proposer_for().propose(context), Proposal)
    first = records(context, "response")[0]
    assert first["status"] == "error" and "JSONDecodeError" in first["error"]


def test_retries_exhausted_is_unusable(llm_server, proposer_for, context):
    llm_server.script = [error(502, "bad gateway")] * 3
    result = proposer_for(max_retries=2).propose(context)
    assert isinstance(result, NoProposal) and result.kind == "unusable"
    assert "gave up after 2 retries" in result.reason and "502" in result.reason and "bad gateway" in result.reason
    assert len(llm_server.received) == 3 and len(records(context, "response")) == 3


def test_connection_refused_is_retried_then_unusable(monkeypatch, context):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    settings = ProposerSettings(base_url=f"http://127.0.0.1:{port}/v1", retry_base_s=0.01, max_retries=1)
    proposer = create_proposer("llm", settings)
    try:
        result = proposer.propose(context)
    finally:
        proposer.close()
    assert isinstance(result, NoProposal) and "gave up after 1 retries; last error: no response" in result.reason
    assert [r["http_status"] for r in records(context, "response")] == [None, None]


def test_exhausted_quota_is_not_retried(llm_server, proposer_for, context):
    llm_server.script = [error(429, "You exceeded your current quota", code="insufficient_quota")]
    result = proposer_for().propose(context)
    assert isinstance(result, NoProposal) and result.reason == "HTTP 429: You exceeded your current quota"
    assert len(llm_server.received) == 1


def test_unauthorised_is_not_retried(llm_server, proposer_for, context):
    llm_server.script = [error(401, "Incorrect API key provided")]
    result = proposer_for().propose(context)
    assert isinstance(result, NoProposal) and "401" in result.reason and "OPENAI_API_KEY" in result.reason
    assert len(llm_server.received) == 1


def test_rejected_response_format_falls_back_to_fenced_code_and_remembers(llm_server, proposer_for, context):
    fenced = ("Here you go.\n```cuda\n" + KERNEL + "```\n```json\n"
              '{"note": "fenced", "launch": {"grid": ["ceil_div(N, 16)", "ceil_div(M, 16)"], "block": [16, 16]},'
              ' "defines": {"TILE": 16}}\n```\n')
    llm_server.script = [error(400, "Invalid parameter: 'response_format' of type 'json_schema' is not supported"),
                         completion(fenced), completion(fenced)]
    proposer = proposer_for()
    first = proposer.propose(context)
    second = proposer.propose(context.model_copy(update={"iteration": 2}))

    for result in (first, second):
        assert isinstance(result, Proposal) and result.note == "fenced" and result.defines == {"TILE": 16}
        assert result.launch.block == [16, 16] and "__global__ void sgemm" in result.source
    bodies = [r["body"] for r in llm_server.received]
    assert "response_format" in bodies[0]
    assert all("response_format" not in b for b in bodies[1:]) and len(bodies) == 3
    assert "```cuda" in bodies[1]["messages"][0]["content"]
    assert bodies[1]["reasoning_effort"] == "medium"


def test_rejected_reasoning_effort_is_dropped(llm_server, proposer_for, context):
    llm_server.script = [error(400, "Unsupported parameter for this model.", param="reasoning_effort"),
                         completion(json.dumps(GOOD))]
    assert isinstance(proposer_for().propose(context), Proposal)
    second = llm_server.received[1]["body"]
    assert "reasoning_effort" not in second and second["response_format"]["type"] == "json_schema"


def test_other_bad_request_is_unusable_without_retry(llm_server, proposer_for, context):
    llm_server.script = [error(400, "maximum context length exceeded")]
    result = proposer_for().propose(context)
    assert isinstance(result, NoProposal) and "HTTP 400: maximum context length exceeded" == result.reason
    assert len(llm_server.received) == 1


def test_reasoning_effort_is_left_out_when_unset(llm_server, proposer_for, context):
    llm_server.script = [completion(json.dumps(GOOD))]
    proposer = proposer_for(reasoning_effort=None, model="qwen-coder")
    assert proposer.describe() == f"llm: qwen-coder at {llm_server.base_url}"
    proposer.propose(context)
    body = llm_server.received[0]["body"]
    assert body["model"] == "qwen-coder" and "reasoning_effort" not in body


def test_local_endpoint_without_key_uses_a_placeholder(llm_server, monkeypatch, context):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    llm_server.script = [completion(json.dumps(GOOD))]
    proposer = create_proposer("llm", ProposerSettings(base_url=llm_server.base_url))
    try:
        assert isinstance(proposer.propose(context), Proposal)
    finally:
        proposer.close()
    assert llm_server.received[0]["headers"]["authorization"].startswith("Bearer ")


def test_missing_key_without_base_url_is_unavailable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ProposerUnavailable, match="OPENAI_API_KEY.*--proposer tuner"):
        create_proposer("llm", ProposerSettings())


def test_missing_openai_package_is_unavailable_with_install_hint(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ProposerUnavailable, match=r"pip install 'cudaopt\[llm\]'"):
        create_proposer("llm", ProposerSettings())


def test_openai_is_the_default_endpoint(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    proposer = create_proposer("llm", ProposerSettings(model="gpt-5", reasoning_effort="high"))
    try:
        assert proposer.describe() == "llm: gpt-5 (reasoning high) at https://api.openai.com/v1"
    finally:
        proposer.close()


def test_cost_uses_list_prices_with_cached_input():
    usage = TokenUsage(prompt_tokens=1_000_000, completion_tokens=1_000_000, cached_tokens=400_000)
    assert cost_usd("gpt-5-mini", usage) == pytest.approx(0.6 * 0.25 + 0.4 * 0.025 + 2.00)
    assert cost_usd("gpt-5", usage) == pytest.approx(0.6 * 1.25 + 0.4 * 0.125 + 10.00)
    assert cost_usd("gpt-5-nano-2025-08-07", usage) == pytest.approx(0.6 * 0.05 + 0.4 * 0.005 + 0.40)
    assert cost_usd("qwen-coder", usage) is None
