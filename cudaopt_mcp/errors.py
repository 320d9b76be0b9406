"""The MCP side's exceptions, on the engine's base (:mod:`harness_tools.errors` draws the engine's part)::

    HarnessError
    ├── ... the engine's tree
    ├── RunError               an unknown or invalid run/candidate id or artifact name (service)
    ├── StepRefused            a request that is not allowed or not possible as asked (service)
    ├── PromptMissing          a prompt template file is missing (templates)
    ├── ServeError             the server cannot start as configured (server)
    ├── SessionError           the server refused a call or cannot be reached (client)
    └── ProposerUnavailable    a proposer cannot be created here: missing extra, API key (client)

The MCP adapter turns every one of them into a ``ToolError`` in one place
(:func:`cudaopt_mcp.server.tool_calls.tool_error`); other exceptions are bugs and stay hidden from the model.
"""

from __future__ import annotations

from harness_tools import HarnessError


class RunError(HarnessError):
    """An unknown or invalid run/candidate id or artifact name; the message says which."""


class StepRefused(HarnessError):
    """The request is not allowed or not possible as asked; the message says why and what to do."""


class PromptMissing(HarnessError):
    """A prompt template file is not where it should be."""


class ServeError(HarnessError):
    """The server cannot start as configured; the message says what to change."""


class SessionError(HarnessError):
    """The server refused a call (bad arguments, unknown id) or could not be reached; the message says why."""


class ProposerUnavailable(HarnessError):
    """A proposer cannot be created here (missing extra, missing API key); the message says what to do."""
