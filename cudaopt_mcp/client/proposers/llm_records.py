"""What the LLM proposer sent and got back: one pair of JSON files per HTTP attempt, token usage and cost.

Records hold the request body (messages, response format, reasoning effort), never headers: the API key
travels only in the ``Authorization`` header, and any text written here is scrubbed of it as well, in
case an endpoint echoes it back in an error message.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field


class Price(BaseModel):
    """US dollars per 1M tokens."""

    input: float
    cached_input: float
    output: float


# OpenAI list prices; dated snapshots ("gpt-5-mini-2025-08-07") cost what their family costs.
PRICES: dict[str, Price] = {
    "gpt-5": Price(input=1.25, cached_input=0.125, output=10.00),
    "gpt-5-mini": Price(input=0.25, cached_input=0.025, output=2.00),
    "gpt-5-nano": Price(input=0.05, cached_input=0.005, output=0.40),
}
_SNAPSHOT = re.compile(r"(?P<family>.+?)(-\d{4}-\d{2}-\d{2})?")


class TokenUsage(BaseModel):
    """As the endpoint reported it; reasoning tokens are part of completion tokens, cached of prompt tokens."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0

    @classmethod
    def from_completion(cls, usage: Any) -> TokenUsage | None:
        if usage is None:
            return None
        prompt_details = getattr(usage, "prompt_tokens_details", None)
        completion_details = getattr(usage, "completion_tokens_details", None)
        return cls(prompt_tokens=getattr(usage, "prompt_tokens", None) or 0,
                   completion_tokens=getattr(usage, "completion_tokens", None) or 0,
                   reasoning_tokens=getattr(completion_details, "reasoning_tokens", None) or 0,
                   cached_tokens=getattr(prompt_details, "cached_tokens", None) or 0)


def price_of(model: str) -> Price | None:
    match = _SNAPSHOT.fullmatch(model)
    return PRICES.get(match["family"]) if match else None


def cost_usd(model: str, usage: TokenUsage) -> float | None:
    """What a request cost at OpenAI's list price, or None when the model's price is not known here."""
    price = price_of(model)
    if price is None:
        return None
    cached = min(usage.cached_tokens, usage.prompt_tokens)
    dollars = ((usage.prompt_tokens - cached) * price.input + cached * price.cached_input
               + usage.completion_tokens * price.output) / 1e6
    return round(dollars, 8)


class RequestRecord(BaseModel):
    number: int
    iteration: int
    attempt: int = Field(description="1 for the first HTTP attempt of this proposal, then 2, 3, ...")
    model: str
    body: dict[str, Any] = Field(description="the request body as sent (no headers, no key)")


class ResponseRecord(BaseModel):
    number: int
    iteration: int
    attempt: int
    status: Literal["ok", "error"]
    http_status: int | None = None
    latency_s: float
    model: str | None = Field(None, description="the model the endpoint says answered")
    finish_reason: str | None = None
    text: str | None = Field(None, description="the reply text (ok)")
    error: str | None = Field(None, description="what went wrong (error)")
    usage: TokenUsage | None = None
    cost_usd: float | None = None


class LLMUsage(BaseModel):
    """Running totals of one proposer, for the run's final summary."""

    model: str
    requests: int = Field(0, description="HTTP attempts, retries included")
    failed_requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = Field(None, description="None when no request had a known price")
    latency_s: float = 0.0

    def add(self, record: ResponseRecord) -> None:
        self.requests += 1
        self.failed_requests += record.status == "error"
        self.latency_s = round(self.latency_s + record.latency_s, 3)
        if record.usage:
            self.prompt_tokens += record.usage.prompt_tokens
            self.completion_tokens += record.usage.completion_tokens
            self.reasoning_tokens += record.usage.reasoning_tokens
            self.cached_tokens += record.usage.cached_tokens
        if record.cost_usd is not None:
            self.cost_usd = round((self.cost_usd or 0.0) + record.cost_usd, 8)


_RECORD = re.compile(r"(\d{4,})-(request|response)\.json")


class RequestLog:
    """Numbers HTTP attempts and writes their records; numbering continues after files already there."""

    def __init__(self, secret: str | None):
        self._secret = secret or None
        self._last = 0

    def next_number(self, folder: Path | None) -> int:
        if folder is not None and folder.is_dir():
            found = [int(m[1]) for p in folder.iterdir() if (m := _RECORD.fullmatch(p.name))]
            self._last = max([self._last, *found])
        self._last += 1
        return self._last

    def write(self, folder: Path | None, record: RequestRecord | ResponseRecord) -> None:
        if folder is None:
            return
        folder.mkdir(parents=True, exist_ok=True)
        kind = "request" if isinstance(record, RequestRecord) else "response"
        text = json.dumps(record.model_dump(mode="json"), indent=1, ensure_ascii=False)
        (folder / f"{record.number:04d}-{kind}.json").write_text(self.scrub(text) + "\n")

    def scrub(self, text: str) -> str:
        return text.replace(self._secret, "[redacted]") if self._secret else text
