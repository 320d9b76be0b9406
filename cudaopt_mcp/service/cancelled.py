"""What a cancelled step leaves behind: ``cancelled.json`` in the candidate folder and a history event.

The step's own record (evaluation.json, sanitize.json, ...) is not written: a cancelled step measured
nothing. The candidate reads as ``cancelled`` until a later step on it starts (which removes the file).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator

from cudaopt_mcp.service.runs import atomic_write
from cudaopt_mcp.service.state import ServerState
from harness_tools.errors import Cancelled

CANCELLED_RECORD = "cancelled.json"


@contextlib.contextmanager
def recorded_if_cancelled(state: ServerState, run_id: str, candidate_id: str, step: str,
                          marks_candidate: bool = True) -> Iterator[None]:
    """Run a step on a candidate; if it is cancelled, record that (then let :class:`Cancelled` go on). Steps that
    do not judge the candidate (profile, sanitize) leave its status alone: only the history says so."""
    folder = state.store.candidate_dir(run_id, candidate_id)
    if marks_candidate:
        (folder / CANCELLED_RECORD).unlink(missing_ok=True)
    try:
        yield
    except Cancelled as exc:
        if marks_candidate:
            atomic_write(folder / CANCELLED_RECORD, json.dumps({"step": step, "reason": str(exc), "at": time.time()}))
        state.store.append_history(run_id, {"event": "cancelled", "step": step, "candidate_id": candidate_id,
                                            "reason": str(exc)[:200]})
        raise


def cancelled_step(record: dict | None) -> str | None:
    """How a candidate's cancelled.json reads in a summary, or None."""
    if not record:
        return None
    return f"{record.get('step', 'a step')} cancelled: {record.get('reason', 'by the client')}"
