"""Run state on disk: ``results/run-XXX/``, one folder per run, one per candidate.

Layout of a run (every JSON file written atomically: temporary file, fsync, rename)::

    run-007/
      run.json            RunRecord: task identity, backend, budget, created
      task/               a copy of the task folder, so the run is self-contained and reloadable
      history.jsonl       append-only events (one JSON object per line, fsync'ed)
      best.json           the current best candidate (absent until one is correct)
      candidates/c0003/   candidate.json, kernel.cu, compile.json, compile.log, evaluation.json

Ids index the filesystem, so they are validated (``run-\\d+``, ``c\\d+``) before any path is built.
Calls on one run are serialised by a per-run lock that also holds across processes (``fcntl``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from cudaopt_mcp.errors import RunError
from harness_tools import HarnessError, Task, load_task
from harness_tools.run.cancellation import POLL_S, acquired, checkpoint
from harness_tools.run.statistics import Interval
from harness_tools.task.folder_digest import folder_digest


class _Name:
    """A whole-string, ASCII-only pattern (``re.match`` with ``$`` would accept a trailing newline, and
    ``\\d`` non-ASCII digits); ``match`` keeps the call sites' spelling."""

    def __init__(self, pattern: str):
        self.pattern = re.compile(pattern, re.ASCII)

    def match(self, text: str) -> re.Match | None:
        return self.pattern.fullmatch(text) if isinstance(text, str) else None


RUN_ID = _Name(r"run-[0-9]{3,9}")
CANDIDATE_ID = _Name(r"c[0-9]{4,9}")
ARTIFACT = _Name(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


class RunRecord(BaseModel):
    run_id: str
    task: str
    task_origin: str = Field(description="bundled name, folder path, or 'inline'")
    backend: str
    created: float
    max_candidates: int | None = None


class BestRecord(BaseModel):
    """best.json (and baseline.json): a score, and for a best crowned head-to-head, what it was measured against."""

    candidate_id: str
    score_ms: float
    backend: str
    seed: int
    score_ci: Interval | None = None
    confirmed_against: str | None = Field(None, description="the best it beat, timed beside it on the same seed and plan")
    incumbent_score_ms: float | None = None
    incumbent_ci: Interval | None = None
    baseline_score_ms: float | None = Field(None, description="the baseline, timed in the same head-to-head")
    baseline_reps: int | None = Field(None, description="timed launches per case behind baseline_score_ms (its one "
                                      "round; fewer than reps for a slow baseline: baseline_round_plan)")
    warmup: int | None = Field(None, description="the plan's warm-up launches per round (a slow kernel's, under the "
                               "search's budget, are fewer: its case timings say how many)")
    reps: int | None = Field(None, description="timed launches per case behind score_ms (pooled; the fewest of its cases)")
    rounds: int | None = Field(None, description="head-to-head rounds (the order reversed each round)")
    rounds_won: int | None = Field(None, description="rounds in which the challenger's score beat the incumbent's")


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class RunStore:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._tasks: dict[tuple[str, str], Task] = {}  # (run id, the task folder's content digest) -> loaded task
        self._digests: dict[str, tuple[float, dict[str, str]]] = {}  # run id -> (created, {candidate id: hash})

    # ---- runs -----------------------------------------------------------------------------------
    def create_run(self, task: Task, origin: str, backend: str, max_candidates: int | None = None) -> RunRecord:
        with self._store_lock():
            number = max((int(p.name[4:]) for p in self.root.glob("run-*") if RUN_ID.match(p.name)), default=0) + 1
            run_id = f"run-{number:03d}"
            folder = self.root / run_id
            (folder / "candidates").mkdir(parents=True)
            # links are copied as links, never followed, and the copy is checked like any task folder: a link
            # swapped in after the task was loaded cannot pull a file from elsewhere into the run
            try:
                shutil.copytree(task.folder, folder / "task", symlinks=True,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
                load_task(folder / "task")
            except (OSError, shutil.Error, HarnessError) as exc:
                shutil.rmtree(folder, ignore_errors=True)
                if isinstance(exc, HarnessError):
                    raise
                raise RunError(f"cannot copy the task folder {task.folder} into the run: {str(exc)[:300]}") from None
            record = RunRecord(run_id=run_id, task=task.name, task_origin=origin, backend=backend,
                               created=time.time(), max_candidates=max_candidates)
            atomic_write(folder / "run.json", record.model_dump_json(indent=2))
        self.append_history(run_id, {"event": "created", "task": task.name, "backend": backend})
        return record

    def run(self, run_id: str) -> RunRecord:
        return RunRecord.model_validate_json(self._run_dir(run_id).joinpath("run.json").read_text())

    def task(self, run_id: str) -> Task:
        """The run's copy of its task, loaded once per content of the folder (loading checks every file and
        expression: milliseconds, asked for by every call on the run)."""
        folder = self._run_dir(run_id) / "task"
        key = (run_id, folder_digest(folder))
        task = self._tasks.get(key)
        if task is None:
            task = load_task(folder)
            if len(self._tasks) >= 16:
                self._tasks.pop(next(iter(self._tasks)))
            self._tasks[key] = task
        return task

    def list_runs(self) -> list[RunRecord]:
        runs = []
        for p in sorted(self.root.glob("run-*")):
            if RUN_ID.match(p.name) and (p / "run.json").is_file():
                runs.append(self.run(p.name))
        return runs

    @contextlib.contextmanager
    def locked(self, run_id: str) -> Iterator[None]:
        """Serialise work on one run, within this process and across processes."""
        folder = self._run_dir(run_id)
        with self._locks_guard:
            lock = self._locks.setdefault(run_id, threading.Lock())
        with acquired(lock), open(folder / ".lock", "a") as handle:
            _flock_cancellable(handle)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # ---- candidates -----------------------------------------------------------------------------
    def new_candidate(self, run_id: str) -> tuple[str, Path]:
        """Reserve the next candidate id (call under ``locked``)."""
        folder = self._run_dir(run_id) / "candidates"
        number = max((int(p.name[1:]) for p in folder.iterdir() if CANDIDATE_ID.match(p.name)), default=0) + 1
        candidate_id = f"c{number:04d}"
        path = folder / candidate_id
        path.mkdir()
        return candidate_id, path

    def candidate_dir(self, run_id: str, candidate_id: str) -> Path:
        if not CANDIDATE_ID.match(candidate_id or ""):
            raise RunError(f"invalid candidate id {candidate_id!r} (expected like c0001)")
        path = self._run_dir(run_id) / "candidates" / candidate_id
        if not path.is_dir():
            raise RunError(f"run {run_id} has no candidate {candidate_id}")
        return path

    def candidate_ids(self, run_id: str) -> list[str]:
        folder = self._run_dir(run_id) / "candidates"
        return sorted(p.name for p in folder.iterdir() if CANDIDATE_ID.match(p.name))

    def write_artifact(self, run_id: str, candidate_id: str, name: str, text: str) -> Path:
        path = self.artifact_path(run_id, candidate_id, name, must_exist=False)
        atomic_write(path, text)
        return path

    def read_json(self, run_id: str, candidate_id: str, name: str) -> Any | None:
        path = self.artifact_path(run_id, candidate_id, name, must_exist=False)
        return json.loads(path.read_text()) if path.is_file() else None

    def artifact_path(self, run_id: str, candidate_id: str, name: str, must_exist: bool = True) -> Path:
        if not ARTIFACT.match(name or "") or ".." in name:
            raise RunError(f"invalid artifact name {name!r}")
        path = self.candidate_dir(run_id, candidate_id) / name
        if must_exist and not path.is_file():
            raise RunError(f"candidate {candidate_id} of {run_id} has no artifact {name!r}")
        return path

    # ---- history and best -----------------------------------------------------------------------
    def append_history(self, run_id: str, event: dict[str, Any]) -> None:
        line = json.dumps({"time": time.time(), **event}, separators=(",", ":"))
        with open(self._run_dir(run_id) / "history.jsonl", "a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    def history(self, run_id: str, limit: int | None = None) -> list[dict[str, Any]]:
        path = self._run_dir(run_id) / "history.jsonl"
        events = []
        for line in path.read_text().splitlines() if path.is_file() else []:
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line torn by a crash mid-append: everything before it stands
        return events[-limit:] if limit else events

    def find_candidate(self, run_id: str, digest: str) -> str | None:
        """The id of the candidate whose ``candidate.json`` records this content hash, if any. Each record is read
        once per run (a candidate's content never changes): reading them all on every registration made a long
        run's registrations quadratic. Candidates another process added are read when first listed; a run removed
        and made anew under the same id (its creation time differs) is read afresh."""
        created = self.run(run_id).created
        if self._digests.get(run_id, (None, {}))[0] != created:
            self._digests[run_id] = (created, {})
        known = self._digests[run_id][1]
        for candidate_id in self.candidate_ids(run_id):
            if candidate_id not in known:
                meta = self.read_json(run_id, candidate_id, "candidate.json")
                if not meta:  # being written by another process: read again next time
                    continue
                known[candidate_id] = meta.get("digest")
            if known[candidate_id] == digest:
                return candidate_id
        return None

    def run_dir(self, run_id: str) -> Path:
        """The folder of a known run (the id is validated)."""
        return self._run_dir(run_id)

    def run_file(self, run_id: str, name: str) -> Path:
        """A file directly in the run folder (``baseline.json``, ...); the name is validated."""
        if not ARTIFACT.match(name or "") or ".." in name:
            raise RunError(f"invalid file name {name!r}")
        return self._run_dir(run_id) / name

    def best(self, run_id: str) -> BestRecord | None:
        path = self._run_dir(run_id) / "best.json"
        return BestRecord.model_validate_json(path.read_text()) if path.is_file() else None

    def clear_best(self, run_id: str, why: str) -> None:
        """The best stops being the best (it failed a check it passed before); say why in the history."""
        current = self.best(run_id)
        (self._run_dir(run_id) / "best.json").unlink(missing_ok=True)
        if current is not None:
            self.append_history(run_id, {"event": "best_withdrawn", "candidate_id": current.candidate_id, "why": why[:300]})

    def offer_best(self, run_id: str, record: BestRecord) -> bool:
        """Make ``record`` the best if it is faster than the current one (call under ``locked``)."""
        current = self.best(run_id)
        if current is not None and current.score_ms <= record.score_ms:
            return False
        atomic_write(self._run_dir(run_id) / "best.json", record.model_dump_json(indent=2))
        self.append_history(run_id, {"event": "best", "candidate_id": record.candidate_id, "score_ms": record.score_ms})
        return True

    # ---- internals ------------------------------------------------------------------------------
    def _run_dir(self, run_id: str) -> Path:
        if not RUN_ID.match(run_id or ""):
            raise RunError(f"invalid run id {run_id!r} (expected like run-001)")
        path = self.root / run_id
        if not (path / "run.json").is_file():
            raise RunError(f"unknown run {run_id!r}")
        return path

    @contextlib.contextmanager
    def _store_lock(self) -> Iterator[None]:
        with open(self.root / ".store.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _flock_cancellable(handle) -> None:
    """An exclusive flock (another server process may hold the run) that gives up when the work is cancelled."""
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            checkpoint()
            time.sleep(POLL_S)
