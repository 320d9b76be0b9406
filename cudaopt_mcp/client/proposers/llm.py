"""A proposer that asks a model behind an OpenAI-compatible Chat Completions endpoint for each candidate.

One request per proposal: the system prompt (``templates/llm_system.md``, the reply format) and the
server's rendered ``optimize`` prompt (task, history, latest feedback). The SDK's own retries are off so
that every HTTP attempt is recorded and paced here: 429, 5xx, connection errors and timeouts back off
exponentially (a ``Retry-After`` header wins); anything else ends the proposal as ``unusable``.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cudaopt_mcp.client.proposal import Attempt, NoProposal, Proposal, ProposalContext, ProposerSettings
from cudaopt_mcp.client.proposers.llm_records import LLMUsage, RequestLog, RequestRecord, ResponseRecord, TokenUsage, cost_usd
from cudaopt_mcp.client.proposers.llm_reply import FENCED_FORMAT, JSON_FORMAT, parse_reply, response_format
from cudaopt_mcp.errors import ProposerUnavailable
from cudaopt_mcp.templates import load_template

MAX_WAIT_S = 60.0
PLACEHOLDER_KEY = "unused"  # local endpoints (vLLM, Ollama) ignore the key, but the SDK wants one
RETRY_STATUSES = {408, 409, 429}
# A 400/422 naming one of these means the endpoint does not support that request field: drop it, once.
_OPTIONAL_FIELDS = {"response_format": ("response_format", "json_schema", "structured output", "guided"),
                    "reasoning_effort": ("reasoning_effort", "reasoning effort")}


class LLMProposer:
    name = "llm"
    reads_prompt = True

    def __init__(self, settings: ProposerSettings):
        try:
            import openai
        except ImportError:
            raise ProposerUnavailable("the llm proposer needs the OpenAI SDK: pip install 'cudaopt[llm]'") from None
        key = os.environ.get("OPENAI_API_KEY") or None
        if key is None and not settings.base_url:
            raise ProposerUnavailable("the llm proposer needs an API key: set OPENAI_API_KEY in the environment "
                                      "(or use --proposer tuner, which needs none)")
        self._openai = openai
        self._settings = settings
        self._client = openai.OpenAI(api_key=key or PLACEHOLDER_KEY, base_url=settings.base_url or None,
                                     timeout=settings.request_timeout_s, max_retries=0)
        self._endpoint = str(self._client.base_url).rstrip("/")
        # Cost only at OpenAI's own endpoint: a local or third-party server has its own prices (or none).
        self._priced = not settings.base_url and urlsplit(self._endpoint).hostname == "api.openai.com"
        self._log = RequestLog(secret=key)
        self._usage = LLMUsage(model=settings.model)
        self._dropped: set[str] = set()
        self._system = load_template("llm_system")

    def describe(self) -> str:
        effort = f" (reasoning {self._settings.reasoning_effort})" if self._settings.reasoning_effort else ""
        return f"llm: {self._settings.model}{effort} at {self._endpoint}"

    def usage(self) -> LLMUsage:
        """Requests, tokens and cost so far (a copy)."""
        return self._usage.model_copy()

    def observe(self, attempt: Attempt) -> None:
        """Nothing to keep: the prompt the loop renders already carries the history and latest feedback."""

    def close(self) -> None:
        self._client.close()

    def propose(self, context: ProposalContext) -> Proposal | NoProposal:
        attempt, retries = 0, 0
        while True:
            attempt += 1
            body = self._body(context)
            outcome = self._send(context, attempt, body)
            if isinstance(outcome, _Reply):
                return outcome.proposal()
            dropped = self._unsupported_field(outcome, body)
            if dropped:
                self._dropped.add(dropped)  # remembered: later proposals do not ask again
                continue
            if not outcome.retryable() or retries >= self._settings.max_retries:
                return NoProposal(kind="unusable", reason=outcome.reason(retries))
            wait = outcome.retry_after if outcome.retry_after is not None else self._backoff(retries)
            retries += 1
            time.sleep(min(wait, MAX_WAIT_S))

    # ---- one HTTP attempt ---------------------------------------------------------------------------
    def _body(self, context: ProposalContext) -> dict[str, Any]:
        structured = "response_format" not in self._dropped
        system = self._system.safe_substitute(reply_format=JSON_FORMAT if structured else FENCED_FORMAT)
        body: dict[str, Any] = {"model": self._settings.model,
                                "messages": [{"role": "system", "content": system},
                                             {"role": "user", "content": context.prompt}]}
        if structured:
            body["response_format"] = response_format()
        if self._settings.reasoning_effort and "reasoning_effort" not in self._dropped:
            body["reasoning_effort"] = self._settings.reasoning_effort
        return body

    def _send(self, context: ProposalContext, attempt: int, body: dict[str, Any]) -> _Reply | _Failure:
        folder = context.requests_dir
        number = self._log.next_number(folder)
        ids = {"number": number, "iteration": context.iteration, "attempt": attempt}
        self._log.write(folder, RequestRecord(**ids, model=self._settings.model, body=body))
        started = time.monotonic()
        try:
            completion = self._client.chat.completions.create(**body, timeout=self._settings.request_timeout_s)
        except self._openai.APIStatusError as exc:
            failure = _Failure(exc.status_code, self._log.scrub(_error_message(exc)), _retry_after(exc.response.headers),
                               final=exc.code == "insufficient_quota")  # a 429 that waiting does not cure
            self._record_error(folder, ids, started, failure)
            return failure
        except (self._openai.OpenAIError, ValueError) as exc:  # APIConnectionError, APITimeoutError, ...
            # No usable HTTP response: connection refused or reset, timeout, or a body that is not JSON
            # (a misbehaving proxy); all worth a retry.
            failure = _Failure(None, self._log.scrub(f"{type(exc).__name__}: {exc}"), None)
            self._record_error(folder, ids, started, failure)
            return failure
        latency = round(time.monotonic() - started, 3)
        usage = TokenUsage.from_completion(getattr(completion, "usage", None))
        choice = completion.choices[0] if completion.choices else None
        message = choice.message if choice else None
        reply = _Reply(text=(message.content if message else None) or "",
                       finish_reason=choice.finish_reason if choice else None,
                       refusal=getattr(message, "refusal", None))
        record = ResponseRecord(**ids, status="ok", http_status=200, latency_s=latency, model=completion.model,
                                finish_reason=reply.finish_reason, text=reply.text or reply.refusal, usage=usage,
                                cost_usd=cost_usd(self._settings.model, usage) if usage and self._priced else None)
        self._usage.add(record)
        self._log.write(folder, record)
        return reply

    def _record_error(self, folder: Path | None, ids: dict[str, int], started: float, failure: _Failure) -> None:
        record = ResponseRecord(**ids, status="error", http_status=failure.status,
                                latency_s=round(time.monotonic() - started, 3), error=failure.message)
        self._usage.add(record)
        self._log.write(folder, record)

    def _unsupported_field(self, failure: _Failure, body: dict[str, Any]) -> str | None:
        """The optional request field a 400/422 complains about, if any."""
        if failure.status not in (400, 422):
            return None
        lowered = failure.message.lower()
        for field, words in _OPTIONAL_FIELDS.items():
            if field in body and any(w in lowered for w in words):
                return field
        return None

    def _backoff(self, retries: int) -> float:
        base = self._settings.retry_base_s * 2 ** retries
        return base + random.uniform(0, 0.1 * base)  # jitter: parallel runs should not retry in lockstep


@dataclass(frozen=True)
class _Reply:
    text: str
    finish_reason: str | None
    refusal: str | None = None

    def proposal(self) -> Proposal | NoProposal:
        """The parsed reply; a refusal or a cut-off reply says so, since that explains a failed parse."""
        if self.refusal and not self.text.strip():
            return NoProposal(kind="unusable", reason=f"the model refused: {self.refusal}")
        result = parse_reply(self.text)
        if isinstance(result, NoProposal) and self.finish_reason == "length":
            return NoProposal(kind="unusable", reason=result.reason + " (the reply was cut off at the token limit)")
        return result


@dataclass(frozen=True)
class _Failure:
    status: int | None  # None: no HTTP response (connection error, timeout)
    message: str
    retry_after: float | None
    final: bool = False

    def retryable(self) -> bool:
        return not self.final and (self.status is None or self.status in RETRY_STATUSES or self.status >= 500)

    def reason(self, retries: int) -> str:
        reason = f"{'HTTP ' + str(self.status) if self.status is not None else 'no response'}: {self.message}"
        if self.status == 401:
            return reason + " (check OPENAI_API_KEY)"
        if self.retryable():
            return f"gave up after {retries} retries; last error: {reason}"
        return reason


def _error_message(exc: Any) -> str:
    """The endpoint's own error message when its body has one (OpenAI: {"error": {"message": ...}})."""
    body = exc.body
    message = str(exc.message or exc)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            message = str(inner["message"])
        elif isinstance(inner, str):
            message = inner
    if exc.param and exc.param not in message:  # names the request field an unsupported-field 400 is about
        message += f" (param: {exc.param})"
    return message


def _retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (an HTTP date is ignored: back off instead)."""
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name) if headers is not None else None
        try:
            seconds = float(value) * scale
        except (TypeError, ValueError):
            continue
        if seconds >= 0:
            return seconds
    return None
