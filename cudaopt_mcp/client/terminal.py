"""What ``cudaopt optimize`` shows: a progress line on stderr while it works, a table on stdout at the end.

On a terminal the progress line is redrawn in place; otherwise (a log, CI) each event is one line.
``--json`` keeps stdout for the machine-readable summary, so progress stays on stderr either way.
"""

from __future__ import annotations

import sys
from typing import TextIO

from cudaopt_mcp.client.loop_models import LoopSummary
from cudaopt_mcp.client.proposal import Attempt

BAR = 20


class Terminal:
    def __init__(self, stream: TextIO = sys.stderr, quiet: bool = False):
        self.stream, self.quiet = stream, quiet
        self.live = stream.isatty()
        self.total = 0
        self.done = 0
        self.best_ms: float | None = None
        self.best_speedup: float | None = None  # the server's figure: for a crowned best, like for like
        self.baseline_ms: float | None = None
        self.unit = "ms"
        self._status = ""

    # ---- events from the loop -----------------------------------------------------------------------
    def start(self, run_id: str, task: str, backend: str, proposer: str, iterations: int, seed: int,
              resumed: bool) -> None:
        self.total = iterations
        if backend == "cpu":
            self.unit = "ms CPU"
        verb = "continuing" if resumed else "optimising"
        self._line(f"cudaopt: {verb} {task} in {run_id} on the {backend} backend; {proposer}; "
                   f"{iterations} iterations; input seed {seed}", bar=False)

    def proposing(self, iteration: int) -> None:
        self._show(f"iteration {iteration}: asking the proposer")

    def evaluating(self, iteration: int, label: str | None) -> None:
        self._show(f"{label or f'iteration {iteration}'}: evaluating")

    async def progress(self, done: float, total: float | None, message: str | None) -> None:
        if self.live and message:
            self._show(message)

    def attempt(self, attempt: Attempt, label: str | None = None) -> None:
        if attempt.proposal is None and label is None and attempt.iteration == 0 and attempt.correct:
            self.baseline_ms = attempt.score_ms
        elif label != "confirm":
            self.done += 1
        if attempt.correct and attempt.score_ms is not None and label != "confirm" and (attempt.new_best or self.best_ms is None):
            self.best_ms = attempt.score_ms  # the server's best: a lower number inside the noise is not progress
            self.best_speedup = attempt.speedup_vs_baseline
        if attempt.evaluation is not None and attempt.evaluation.best_score_ms and label != "confirm":
            self.best_ms = attempt.evaluation.best_score_ms  # as recorded: a crowned best's head-to-head score
        name = label or ("baseline" if attempt.iteration == 0 and attempt.proposal is None else f"iteration {attempt.iteration}")
        self._line(f"{name}: {describe(attempt, self.unit)}")

    def note(self, text: str) -> None:
        self._line(text, bar=False)

    # ---- drawing ------------------------------------------------------------------------------------
    def _bar(self) -> str:
        filled = int(BAR * self.done / self.total) if self.total else BAR
        best = f"best {self.best_ms:.4g} {self.unit}" if self.best_ms is not None else "no score yet"
        speedup = self.best_speedup or (self.baseline_ms / self.best_ms if self.best_ms and self.baseline_ms else None)
        if speedup:
            best += f" ({speedup:.2f}x the baseline)"
        return f"[{'#' * filled}{'.' * (BAR - filled)}] {self.done}/{self.total} · {best}"

    def _show(self, status: str) -> None:
        self._status = status
        if self.quiet or not self.live:
            return
        text = f"{self._bar()} · {status}"[:160]
        self.stream.write("\r\x1b[2K" + text)
        self.stream.flush()

    def _line(self, text: str, bar: bool = True) -> None:
        if self.quiet:
            return
        if self.live:
            self.stream.write("\r\x1b[2K")
        self.stream.write(text + (f"  {self._bar()}" if bar and self.total and not self.live else "") + "\n")
        self.stream.flush()


def describe(attempt: Attempt, unit: str = "ms") -> str:
    cid = f"{attempt.candidate_id} " if attempt.candidate_id else ""
    if attempt.correct and attempt.score_ms is not None:
        text = f"{cid}correct, {attempt.score_ms:.4g} {unit}"
        if attempt.speedup_vs_baseline and attempt.proposal is not None:
            text += _versus_baseline(attempt, unit)
        text += _timed_in_part(attempt)
        return text + (" — new best" if attempt.new_best and attempt.proposal is not None else _why_not_best(attempt))
    if attempt.correct:
        return f"{cid}correct (no timed case)"
    return f"{cid}{attempt.status}: {(attempt.failure or '').splitlines()[0][:140] if attempt.failure else ''}"


def _versus_baseline(attempt: Attempt, unit: str) -> str:
    """The speed-up over the baseline. A best crowned head to head has the head-to-head's figure, with the baseline
    timed beside it: then say so, with the score it was crowned at (a noisy first baseline or first measurement
    would make the plain ratio disagree)."""
    speedup, out = attempt.speedup_vs_baseline, attempt.evaluation
    plain = out.baseline_score_ms / attempt.score_ms if out is not None and out.baseline_score_ms else None
    if not attempt.new_best or plain is None or abs(plain / speedup - 1) <= 0.01:
        return f", {speedup:.2f}x the baseline"
    crowned = f"{out.best_score_ms:.4g} {unit}, " if out.best_score_ms else ""
    return f"; head to head {crowned}{speedup:.2f}x the baseline timed beside it"


def _timed_in_part(attempt: Attempt) -> str:
    """A score from fewer launches than planned because clearly slower than the best (service.early_stop) says so;
    a slow kernel timed for the search's budget is the search's normal measure, not news."""
    cases = attempt.evaluation.cases if attempt.evaluation is not None else []
    launches = ", ".join(f"{c.reps} of {c.planned_reps}" for c in cases
                         if c.planned_reps and c.timing_cut != "budget")
    return f" (timed {launches} launches: clearly slower than the best)" if launches else ""


def _why_not_best(attempt: Attempt) -> str:
    """A score below the best's that did not become the best: the server's reason (noise, a lost head-to-head round,
    hidden shapes), so a faster-looking line is not read as a mistake."""
    out = attempt.evaluation
    if attempt.new_best or not attempt.speedup_vs_best or attempt.speedup_vs_best <= 1 or out is None:
        return ""
    return f" — {out.best_decision[:160]}" if out.best_decision else ""


def final_table(summary: LoopSummary) -> str:
    unit = "ms CPU" if summary.backend == "cpu" else "ms"
    rows = [f"{'iter':>4}  {'candidate':<9}  {'status':<14}  {'score (' + unit + ')':>14}  {'vs baseline':>11}  idea / failure"]
    for a in summary.attempts:
        score = f"{a.score_ms:.4g}" if a.score_ms is not None else "-"
        speed = f"{a.speedup_vs_baseline:.2f}x" if a.speedup_vs_baseline else "-"
        idea = ("baseline" if a.proposal is None and a.candidate_id else
                (a.proposal.note if a.proposal and a.correct else (a.failure or (a.proposal.note if a.proposal else ""))))
        idea = (idea or "").splitlines()[0][:70] if idea else ""
        rows.append(f"{a.iteration:>4}  {a.candidate_id or '-':<9}  {a.status:<14}  {score:>14}  {speed:>11}  {idea}")
    lines = ["", *rows, ""]
    if summary.best:
        lines += _best_lines(summary, unit)
        if summary.best_kernel:
            lines.append(f"best kernel: {summary.best_kernel}")
    else:
        lines.append("no scored correct candidate")
    lines.append(f"stopped: {summary.stopped}; {summary.elapsed_s:.1f} s")
    lines.append(f"run {summary.run_id}: continue with `cudaopt optimize --run {summary.run_id}` (same --results)")
    if summary.usage:
        u = summary.usage
        cost = f", ${u['cost_usd']:.4f}" if u.get("cost_usd") is not None else ""
        lines.append(f"model usage: {u.get('requests', 0)} requests, {u.get('prompt_tokens', 0)} prompt + "
                     f"{u.get('completion_tokens', 0)} completion tokens{cost}")
    return "\n".join(lines)


def _best_lines(summary: LoopSummary, unit: str) -> list[str]:
    """The best as confirmed: the confirmation's number when it ran, the search's beside it, and whether they agree."""
    b, c = summary.best, summary.confirmation
    assert b is not None
    cpu = " (CPU wall clock: it ranks CPU execution, not GPU speed)" if summary.backend == "cpu" else ""
    speed = f", {b.speedup_vs_baseline:.2f}x the baseline" if b.speedup_vs_baseline else ""
    if c is None or not c.correct or c.score_ms is None:
        lines = [f"best: {b.candidate_id} at {b.score_ms:.4g} {unit}{speed} (search measurement){cpu}"]
        if c is not None:
            lines.append(f"NOT confirmed on fresh inputs: {c.failure or 'no score'}")
        return lines
    seed = c.evaluation.seed if c.evaluation else None
    agrees = c.evaluation.agrees_with_best if c.evaluation else None
    verdict = {True: "agrees within the noise", False: "DISAGREES beyond the noise", None: "not compared"}[agrees]
    return [f"best: {b.candidate_id} at {c.score_ms:.4g} {unit}, confirmed on fresh inputs (seed {seed}){cpu}",
            f"search measured {b.score_ms:.4g} {unit}{speed}; the confirmation {verdict}"]
