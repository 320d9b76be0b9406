"""Evaluations made before a step asks for them: ``cudaopt optimize``'s baseline and its hidden check, run while the
command's MCP side is still importing and starting (its worker and the first seed's inputs are ready earlier).

An evaluation made ahead is an ordinary engine evaluation of the same task content, candidate, seed, roles, timing
plan and thresholds; it is kept under a key of all of those. The step whose evaluation has that key takes it (waiting
while it still runs) instead of evaluating again. Only a clean result is handed over: a correct one, not retried on
another worker. Anything else is dropped and the step evaluates for itself, so a failure a client sees is always
one its own call measured. A key that a step asked for before its evaluation ahead began is not begun at all (the
step made it itself).

Nothing is looked up unless evaluations are being made ahead (:meth:`EvaluationsAhead.arm`): an ordinary server's
steps never compute a key. Timed results are made ahead only where the clock is the GPU's (the caller's choice:
``cudaopt optimize`` on cuda); on the cpu backend the clock is the host's, which the start's imports share.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cudaopt_mcp.service.hidden_seeds import task_key
from harness_tools.evaluation import EvaluationConfig, EvaluationResult
from harness_tools.run import cancellation
from harness_tools.run.scratch import scratch_root
from harness_tools.task.candidate import Candidate
from harness_tools.task.spec import Task

log = logging.getLogger("cudaopt.mcp")


def evaluation_key(task: Task, candidate: Candidate, config: EvaluationConfig) -> str:
    """What decides an evaluation's result: the task's content (a run's copy of the folder shares it), the candidate,
    and the config but where outputs go and the time allowed (a clean result did not run out of it)."""
    what = config.model_dump_json(exclude={"outputs_dir", "timeout_s"})
    return hashlib.sha256("\n".join([task_key(task), candidate.digest(), what]).encode()).hexdigest()


@dataclass(frozen=True)
class Planned:
    """One evaluation to make ahead: its key, what it is (for the log), how to run it into an outputs folder, and
    whether a result is clean enough to hand over."""

    key: str
    what: str
    evaluate: Callable[[str], EvaluationResult]
    clean: Callable[[EvaluationResult], bool]


@dataclass
class _Entry:
    what: str
    done: threading.Event = field(default_factory=threading.Event)
    result: EvaluationResult | None = None  # None once done: dropped (not clean, or it raised)
    folder: Path | None = None  # the outputs it wrote


class EvaluationsAhead:
    """Results of evaluations made ahead, by :func:`evaluation_key`, until a step takes them."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        self._missed: set[str] = set()  # asked for before begun: never begun
        self._planning = 0  # makers that may still begin entries

    def arm(self) -> None:
        """A maker will begin evaluations ahead: from now on steps look them up (until :meth:`disarm`)."""
        with self._guard:
            self._planning += 1

    def disarm(self) -> None:
        """That maker begins no more; once every entry is taken, steps stop looking."""
        with self._guard:
            self._planning = max(0, self._planning - 1)
            self._forget_misses()

    def make(self, first: Planned, then: Callable[[], Planned | None] | None = None) -> int:
        """Begin ``first`` (a step that asks for it from now on waits for it) and run it in this thread, kept if clean;
        then, only when it was kept, the evaluation ``then`` plans (a hidden check follows a clean baseline). That one
        is begun before ``first`` is handed over, so the step that asks for it next finds it begun. Nothing is begun
        when a step asked for ``first`` before (it evaluated it itself) or another maker has it. Returns how many
        were kept."""
        entry = self._begin(first)
        if entry is None:
            return 0
        following: tuple[Planned, _Entry] | None = None
        try:
            kept = self._evaluate(first, entry)
            if kept and then is not None:
                planned = _planned(then)
                begun = self._begin(planned)
                following = (planned, begun) if planned is not None and begun is not None else None
        finally:
            entry.done.set()
        if following is None:
            return int(kept)
        try:
            return 1 + self._evaluate(*following)
        finally:
            following[1].done.set()

    def _begin(self, planned: Planned | None) -> _Entry | None:
        with self._guard:
            if planned is None or planned.key in self._missed or planned.key in self._entries:
                return None
            entry = self._entries[planned.key] = _Entry(planned.what)
            return entry

    @staticmethod
    def _evaluate(planned: Planned, entry: _Entry) -> bool:
        """Run ``planned`` into a folder of its own; keep the result if clean (the caller marks the entry done)."""
        try:
            entry.folder = Path(tempfile.mkdtemp(prefix="cudaopt-ahead-", dir=scratch_root()))
            result = planned.evaluate(str(entry.folder))
            entry.result = result if planned.clean(result) else None
            log.debug("%s made ahead: %s", planned.what,
                      "kept" if entry.result else f"dropped ({result.failure or 'retried'})")
        except Exception as exc:  # noqa: BLE001 - the step evaluates for itself, and meets this again
            log.debug("%s was not made ahead: %s", planned.what, exc)
        if entry.result is None and entry.folder is not None:
            shutil.rmtree(entry.folder, ignore_errors=True)
        return entry.result is not None

    def take(self, task: Task, candidate: Candidate, config: EvaluationConfig) -> EvaluationResult | None:
        """The result made ahead for this evaluation, its outputs moved into ``config.outputs_dir``; or None."""
        with self._guard:
            if not self._planning and not self._entries:
                return None
        key = evaluation_key(task, candidate, config)
        with self._guard:
            entry = self._entries.pop(key, None)
            if entry is None:
                if self._planning:
                    self._missed.add(key)
                return None
            self._forget_misses()
        while not entry.done.wait(cancellation.POLL_S):
            cancellation.checkpoint()  # a cancelled step stops waiting; the evaluation ahead finishes and is dropped
        if entry.result is None or entry.folder is None:
            return None
        try:
            result = _handed_over(entry.result, entry.folder, config.outputs_dir)
        except OSError as exc:  # its outputs could not be moved: the step evaluates for itself
            shutil.rmtree(entry.folder, ignore_errors=True)
            log.debug("%s was made ahead but not handed over: %s", entry.what, exc)
            return None
        log.debug("%s: taken as made ahead", entry.what)
        return result

    def close(self) -> None:
        """Drop whatever was made ahead and never taken (its outputs' folders)."""
        with self._guard:
            left, self._entries = list(self._entries.values()), {}
        for entry in left:
            if entry.done.is_set() and entry.folder is not None:
                shutil.rmtree(entry.folder, ignore_errors=True)

    def _forget_misses(self) -> None:
        if not self._planning and not self._entries:
            self._missed.clear()


def _planned(plan: Callable[[], Planned | None]) -> Planned | None:
    try:
        return plan()
    except Exception as exc:  # noqa: BLE001 - nothing follows; the step evaluates it for itself
        log.debug("the evaluation to follow was not planned: %s", exc)
        return None


def _handed_over(result: EvaluationResult, folder: Path, outputs_dir: str | None) -> EvaluationResult:
    """``result`` with its outputs moved from ``folder`` into ``outputs_dir`` (the step's scratch folder, empty),
    their paths with them; without an ``outputs_dir`` they are removed, as the step's own scratch folder would be."""
    if outputs_dir is None:
        shutil.rmtree(folder, ignore_errors=True)
        return result
    target = Path(outputs_dir)
    for child in folder.iterdir():
        os.replace(child, target / child.name)
    shutil.rmtree(folder, ignore_errors=True)
    old, new = f"{folder}{os.sep}", f"{target}{os.sep}"
    for case in result.cases:
        if case.run is not None:
            case.run.outputs = {name: new + path[len(old):] if path.startswith(old) else path
                                for name, path in case.run.outputs.items()}
    return result
