"""Where the evidence of a failed evaluation points: a hint per pattern, said beside the failure.

- **An unguarded edge**: the failing cases are exactly the ones with a size that is not a multiple of the block's
  width (or of a warp), while cases at multiples pass: the last block or tile does not check its bounds.
- **A race, shown**: the first mismatching validation case, run again on the same inputs, wrote different bytes
  (``same_inputs_rerun``): the result depends on thread timing, and ``sanitize`` names the lines that race.
- **A race on shared memory, suspected**: wrong values from a kernel that uses ``__shared__`` (and no re-run that
  differed); a missing ``__syncthreads()`` gives exactly this.
- **Unwritten elements**: NaN where the reference is finite (outputs start poisoned): some elements are never
  written.
- **A fault**: an illegal address; ``sanitize`` (memcheck) names the line and the buffer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness_tools.errors import CandidateError
from harness_tools.task.candidate import Candidate
from harness_tools.task.spec import Case


@dataclass
class CaseFacts:
    name: str
    role: str
    sizes: dict[str, int]
    status: str
    nonfinite: int = 0
    message: str = ""
    rerun_differs: dict[str, int] | None = None


def hints_for(candidate: Candidate, results: Sequence[Any], cases: list[Case]) -> list[str]:
    """The hints for an evaluation's case results (harness_tools.evaluation.CaseResult)."""
    facts = [CaseFacts(name=c.name, role=c.role, sizes=c.sizes, status=c.status, message=c.message or "",
                       nonfinite=sum(o.nonfinite for o in c.outputs), rerun_differs=c.rerun_differs) for c in results]
    try:
        block = candidate.launch_dims(cases[0].sizes)[1][0] if cases else None
    except CandidateError:
        block = None
    return failure_hints(candidate.source, block, facts)


def failure_hints(source: str, block_width: int | None, cases: list[CaseFacts]) -> list[str]:
    failed = [c for c in cases if c.status in ("mismatch", "run_error", "corrupted")]
    if not failed:
        return []
    hints = []
    edge = _edge_hint(block_width, cases, failed)
    if edge:
        hints.append(edge)
    if any(c.nonfinite for c in failed):
        hints.append("NaN or Inf where the reference is finite: outputs start poisoned (NaN), so some elements are "
                     "never written — does every thread's element, the last block's included, get a value?")
    raced = _race_shown(failed)
    if raced:
        hints.append(raced)
    elif any(c.status == "mismatch" for c in failed) and re.search(r"\b__shared__\b", source):
        repeated = any(c.rerun_differs is not None for c in failed)  # re-run, and it wrote the same bytes
        hints.append("the kernel uses shared memory: a missing __syncthreads() gives wrong values like these; "
                     "`sanitize` (racecheck and synccheck on a GPU, the race check on cpu) names the lines that race"
                     + (" (a second run on the same inputs wrote the same values: a race is less likely than a "
                        "wrong index or formula)" if repeated else ""))
    if any("ILLEGAL_ADDRESS" in c.message or "illegal" in c.message.lower() for c in failed):
        hints.append("a fault: `sanitize` (memcheck) names the kernel.cu line and the buffer it left")
    return hints


def _race_shown(failed: list[CaseFacts]) -> str | None:
    for case in failed:
        differs = {name: n for name, n in (case.rerun_differs or {}).items() if n}
        if differs:
            where = ", ".join(f"{n} element{'s' if n != 1 else ''} of {name}" for name, n in differs.items())
            return (f"a race: case {case.name}, run twice on the same inputs, wrote different values ({where} "
                    "changed): the result depends on thread timing — a missing __syncthreads(), an unsynchronised "
                    "update of shared or global memory, or a read of memory not written in this run; `sanitize` "
                    "(racecheck and synccheck on a GPU, the race check on cpu) names the lines that race")
    return None


def _edge_hint(block_width: int | None, cases: list[CaseFacts], failed: list[CaseFacts]) -> str | None:
    passed = [c for c in cases if c.status == "passed"]
    if not passed:
        return None
    for width in sorted({w for w in (block_width, 32) if w and w > 1}, reverse=True):
        def aligned(case: CaseFacts) -> bool:
            return all(v % width == 0 for v in case.sizes.values())
        if all(not aligned(c) for c in failed) and all(aligned(c) for c in passed):
            names = ", ".join(c.name for c in failed[:4])
            return (f"an unguarded edge? the failing cases ({names}) are exactly those with a size that is not a "
                    f"multiple of {width}, and the cases at multiples of {width} pass: check the bounds of the last "
                    "block or tile")
    return None
