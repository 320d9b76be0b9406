"""Everything a report shows, read once from a run folder into typed records (:class:`RunData`).

A run may have been driven by ``cudaopt optimize`` (its journal, ``optimize.jsonl``, numbers the iterations)
or by any MCP client (then the server's ``history.jsonl`` gives the order of evaluations). Records a run
does not have (no journal, no timing, an older record without a field) read as None: a report says what is
missing instead of failing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from cudaopt_mcp.service.runs import BestRecord, RunRecord, RunStore
from harness_tools import HarnessError
from harness_tools.task.tunable_space import TunableSpace

# Failure kinds, in the order a legend lists them.
FAILURE_KINDS = ("wrong output", "crashed", "timed out", "compile error", "refused", "unusable reply", "error")


class Point(BaseModel):
    """One evaluation, in the order the search made them."""

    index: int = Field(description="the loop's iteration (0: baseline), or the evaluation's position in the history")
    candidate_id: str | None = None
    correct: bool = False
    kind: str = Field("correct", description="'correct' or one of FAILURE_KINDS")
    score_ms: float | None = None
    new_best: bool = False
    note: str | None = None
    failure: str | None = None


class Resources(BaseModel):
    registers: int | None = None
    spill_bytes: int = 0
    static_shared_bytes: int | None = None
    stack_bytes: int | None = None


class CandidateData(BaseModel):
    candidate_id: str
    note: str | None = None
    baseline: bool = False
    tunables: dict[str, int] | None = None
    compile_status: str | None = None
    resources: Resources | None = None
    evaluation: dict[str, Any] | None = Field(None, description="the latest evaluation.json, as stored")
    profile: dict[str, Any] | None = Field(None, description="profile.json, as stored")

    def performance_cases(self) -> list[dict[str, Any]]:
        cases = (self.evaluation or {}).get("cases") or []
        return [c for c in cases if c.get("role") == "performance" and c.get("timing")]

    def failed_outputs(self) -> list[tuple[str, dict[str, Any]]]:
        """(case name, output comparison) of every output that did not pass in the latest evaluation."""
        found = []
        for case in (self.evaluation or {}).get("cases") or []:
            for output in case.get("outputs") or []:
                if not output.get("passed", True):
                    found.append((case.get("name", "?"), output))
        return found


class LLMUsage(BaseModel):
    model: str | None = None
    requests: int = 0
    failed_requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None


class RunData(BaseModel):
    run: RunRecord
    folder: Path
    points: list[Point]
    order: str = Field(description="where the order of points came from: 'the loop's journal' or 'the history'")
    candidates: dict[str, CandidateData]
    best: BestRecord | None = None
    baseline: BestRecord | None = None
    params: dict[str, list[int]] = Field(default_factory=dict, description="the task's tunables, if any")
    constraints: list[str] = Field(default_factory=list)
    proposer: str | None = Field(None, description="from the loop's summary, when cudaopt optimize ran it")
    stopped: str | None = None
    llm: LLMUsage | None = None
    events: dict[str, int] = Field(default_factory=dict, description="history events by kind")

    def space(self) -> TunableSpace | None:
        return TunableSpace(self.params, self.constraints) if self.params else None

    def environment(self) -> dict[str, Any]:
        """The environment of the best's evaluation, else of the latest one that has one."""
        order = [self.best.candidate_id] if self.best else []
        order += sorted(self.candidates, reverse=True)
        for candidate_id in order:
            candidate = self.candidates.get(candidate_id)
            env = (candidate.evaluation or {}).get("environment") if candidate else None
            if env:
                return env
        return {}


def read_run(store: RunStore, run_id: str) -> RunData:
    """The run's records; raises RunError for an unknown or malformed run id."""
    record = store.run(run_id)
    folder = store.run_dir(run_id)
    history = store.history(run_id)
    candidates = {cid: _candidate(store, run_id, cid) for cid in store.candidate_ids(run_id)}
    journal = _jsonl(folder / "optimize.jsonl")
    points = _points_from_journal(journal, candidates) if journal else _points_from_history(history, candidates)
    params, constraints = _tunables(store, run_id)
    summary = _json(folder / "optimize_summary.json") or {}
    events: dict[str, int] = {}
    for event in history:
        events[event.get("event", "?")] = events.get(event.get("event", "?"), 0) + 1
    return RunData(run=record, folder=folder, points=points, order="the loop's journal" if journal else "the history",
                   candidates=candidates, best=store.best(run_id), baseline=_record(folder / "baseline.json"),
                   params=params, constraints=constraints, proposer=summary.get("proposer_detail"),
                   stopped=summary.get("stopped"), llm=_llm_usage(folder / "requests"), events=events)


def _candidate(store: RunStore, run_id: str, candidate_id: str) -> CandidateData:
    folder = store.candidate_dir(run_id, candidate_id)
    meta = _json(folder / "candidate.json") or {}
    compiled = _json(folder / "compile.json") or {}
    res = compiled.get("resources") or {}
    resources = Resources(registers=res.get("registers"),
                          spill_bytes=(res.get("spill_store_bytes") or 0) + (res.get("spill_load_bytes") or 0),
                          static_shared_bytes=res.get("static_shared_bytes"),
                          stack_bytes=res.get("stack_bytes")) if res else None
    tunables = meta.get("tunables")
    return CandidateData(candidate_id=candidate_id, note=meta.get("note"), baseline=bool(meta.get("baseline")),
                         tunables=tunables if isinstance(tunables, dict) else None,
                         compile_status=compiled.get("status"), resources=resources,
                         evaluation=_json(folder / "evaluation.json"), profile=_json(folder / "profile.json"))


def _points_from_journal(journal: list[dict[str, Any]], candidates: dict[str, CandidateData]) -> list[Point]:
    points = []
    for line in journal:
        candidate = candidates.get(line.get("candidate_id") or "")
        kind = _kind(line.get("status", "error"), line.get("failure"), candidate)
        proposal = line.get("proposal") or {}
        points.append(Point(index=int(line.get("iteration", len(points))), candidate_id=line.get("candidate_id"),
                            correct=bool(line.get("correct")), kind=kind, score_ms=line.get("score_ms"),
                            new_best=bool(line.get("new_best")),
                            note=proposal.get("note") or (candidate.note if candidate else None),
                            failure=line.get("failure")))
    return points


def _points_from_history(history: list[dict[str, Any]], candidates: dict[str, CandidateData]) -> list[Point]:
    points: list[Point] = []
    evaluated: set[str] = set()
    for event in history:
        candidate_id = event.get("candidate_id") or ""
        candidate = candidates.get(candidate_id)
        if event.get("event") == "evaluate":
            evaluated.add(candidate_id)
            status = "correct" if event.get("correct") else "incorrect"
            points.append(Point(index=len(points), candidate_id=candidate_id, correct=bool(event.get("correct")),
                                kind=_kind(status, event.get("failure"), candidate),
                                score_ms=event.get("score_ms") if event.get("correct") else None,
                                new_best=bool(event.get("new_best")), note=candidate.note if candidate else None,
                                failure=event.get("failure")))
        elif event.get("event") == "compiled" and event.get("status") not in (None, "ok") and candidate_id not in evaluated:
            points.append(Point(index=len(points), candidate_id=candidate_id, kind="compile error",
                                note=candidate.note if candidate else None, failure=f"compile {event.get('status')}"))
    return points


def _kind(status: str, failure: str | None, candidate: CandidateData | None) -> str:
    """A failure's kind, refined from the loop's status by what the candidate's cases recorded."""
    if status == "correct":
        return "correct"
    named = {"compile_error": "compile error", "refused": "refused", "unusable_reply": "unusable reply", "error": "error"}
    if status in named:
        return named[status]
    text = (failure or "").upper()
    statuses = {c.get("status") for c in ((candidate.evaluation or {}).get("cases") or [])} if candidate else set()
    if "TIMEOUT" in text or "TIMED OUT" in text:
        return "timed out"
    if "run_error" in statuses or "CUDA_ERROR" in text or "CRASH" in text:
        return "crashed"
    if candidate and candidate.compile_status not in (None, "ok"):
        return "compile error"
    return "wrong output"


def _tunables(store: RunStore, run_id: str) -> tuple[dict[str, list[int]], list[str]]:
    try:
        spec = store.task(run_id).spec
    except HarnessError:
        return {}, []
    tunables = getattr(spec, "tunables", None)
    if tunables is None:
        return {}, []
    return {name: list(values) for name, values in tunables.params.items()}, list(tunables.constraints)


def _llm_usage(folder: Path) -> LLMUsage | None:
    if not folder.is_dir():
        return None
    usage = LLMUsage()
    for path in sorted(folder.glob("*-response.json")):
        record = _json(path) or {}
        usage.requests += 1
        usage.failed_requests += record.get("status") == "error"
        usage.model = record.get("model") or usage.model
        tokens = record.get("usage") or {}
        usage.prompt_tokens += tokens.get("prompt_tokens") or 0
        usage.completion_tokens += tokens.get("completion_tokens") or 0
        if record.get("cost_usd") is not None:
            usage.cost_usd = round((usage.cost_usd or 0.0) + record["cost_usd"], 6)
    return usage if usage.requests else None


def _record(path: Path) -> BestRecord | None:
    data = _json(path)
    try:
        return BestRecord.model_validate(data) if data else None
    except ValueError:
        return None


def _json(path: Path) -> Any | None:
    try:
        return json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError):
        return None  # a torn or unreadable record: the report says what it lacks


def _jsonl(path: Path) -> list[dict[str, Any]]:
    lines = []
    try:
        text = path.read_text() if path.is_file() else ""
    except OSError:
        return []
    for line in text.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue  # a line torn by a crash mid-append
        if isinstance(item, dict):
            lines.append(item)
    return lines
