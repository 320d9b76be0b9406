"""The session parses every structured tool result into its api model: a result of another shape is a
SessionError naming the tool and what does not validate, before the loop touches it."""

from __future__ import annotations

import anyio
import pytest
from mcp.types import CallToolResult, TextContent

from cudaopt_mcp.api import EvaluateOutput, HistoryOutput
from cudaopt_mcp.client.loop import attempt_from_evaluation, optimise
from cudaopt_mcp.client.loop_models import LoopConfig
from cudaopt_mcp.client.session import Session
from cudaopt_mcp.errors import SessionError


class ScriptedClient:
    """Answers every tool call with one fixed structured result (or a refusal when it is None)."""

    def __init__(self, structured, is_error=False):
        self.structured, self.is_error = structured, is_error

    async def call_tool(self, tool, arguments, **_):
        return CallToolResult(content=[TextContent(text=f"{tool} answered\nmore")],
                              structured_content=self.structured, is_error=self.is_error)


def call(structured, model, is_error=False):
    async def main():
        return await Session(ScriptedClient(structured, is_error), "test").call("history", model, run_id="run-001")
    return anyio.run(main)


def test_a_valid_result_arrives_as_its_model():
    outcome = call({"run_id": "run-001", "total": 1, "offset": 0, "events": [{"event": "created"}]}, HistoryOutput)
    assert isinstance(outcome.data, HistoryOutput) and outcome.data.next_offset is None
    assert outcome.data.events == [{"event": "created"}] and outcome.text == "history answered"
    assert not outcome.is_error


def test_a_result_of_another_shape_is_a_session_error_with_the_evidence():
    with pytest.raises(SessionError) as caught:
        call({"run_id": "run-001", "total": "many", "events": "none"}, HistoryOutput, is_error=True)
    message = str(caught.value)
    assert message.startswith("history: ") and "HistoryOutput" in message and "3 problems" in message
    assert "total:" in message and "offset: Field required" in message and "events:" in message


def test_a_refusal_is_a_session_error_with_the_servers_text():
    with pytest.raises(SessionError, match="history: history answered"):
        call(None, HistoryOutput)


def test_the_loop_stops_at_a_malformed_create_run_instead_of_crashing(tmp_path):
    config = LoopConfig(task="transpose", results=tmp_path / "results")
    session = Session(ScriptedClient({"run_id": "run-001", "backend": "cpu", "task": {}}), "test")
    with pytest.raises(SessionError, match="create_run: .*CreateRunOutput.*task.name: Field required"):
        anyio.run(optimise, session, None, config, None)
    assert not (tmp_path / "results").exists()


def test_an_evaluation_keeps_the_shape_the_server_sent():
    sent = {"run_id": "run-001", "candidate_id": "c0001", "step": "evaluate", "correct": True, "backend": "cpu",
            "roles": ["validation"], "compile": {"ok": True, "status": "ok", "registers": 12},
            "cases": [{"name": "v", "role": "validation", "status": "passed", "passed": True}],
            "new_best": False, "outputs_kept": [], "source_uri": "cudaopt://runs/run-001/candidates/c0001/kernel.cu",
            "elapsed_s": 0.5}
    attempt = attempt_from_evaluation(1, None, EvaluateOutput.model_validate(sent))
    assert attempt.status == "correct" and attempt.registers == 12 and attempt.case_medians_ms == {}
    assert attempt.model_dump(mode="json")["evaluation"] == sent  # the --json summary's shape is unchanged
