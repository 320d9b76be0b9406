"""Fixtures of the client tests."""

from __future__ import annotations

import pytest

from tests.cudaopt_mcp.client.scripted_llm import ScriptedLLM


@pytest.fixture
def llm_server():
    """A scripted OpenAI-compatible endpoint on 127.0.0.1 for one test."""
    server = ScriptedLLM()
    yield server
    server.stop()
