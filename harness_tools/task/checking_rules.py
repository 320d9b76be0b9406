"""Load-time rules of a task's own checking parts: its input generator, its custom check, its mismatch budgets.

The fields themselves are in :mod:`harness_tools.task.spec` (``TaskSpec.inputs``, ``TaskSpec.check``,
``BufferParam.max_mismatches``, the ``torch`` reference); docs/tasks_format_checking.md describes them. The
rules that span several fields live here, called by :mod:`harness_tools.task.loading`:

* ``inputs`` cannot come with a stored reference (its inputs are the stored ones), and a buffer cannot have
  an ``init`` distribution when the generator builds it (the generator builds every input, so ``init`` would
  be silently ignored: it is refused instead);
* ``max_mismatches`` belongs to outputs (out/inout), and its expression names only size symbols; for every
  case it must evaluate to a whole number >= 0 (:func:`mismatch_budget`, also used by the comparison).

The Python functions are not imported at load time: the engine reads them on first use.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness_tools.errors import ExpressionError
from harness_tools.task import expressions
from harness_tools.task.spec import BufferParam, StoredReference, TaskSpec


def checking_files(spec: TaskSpec) -> list[tuple[str, str]]:
    """(field, file name) of each Python file the generator and the check name."""
    return [(f"{field}.file", part.file) for field, part in (("inputs", spec.inputs), ("check", spec.check))
            if part is not None]


def checking_problem(spec: TaskSpec) -> tuple[str, str] | None:
    """(field, problem) for the first rule of the checking parts that the spec breaks, or None."""
    if spec.inputs is not None:
        if isinstance(spec.reference, StoredReference):
            return "inputs", ("a stored reference brings its own inputs (reference.dir): remove 'inputs', or use a "
                              "numpy, torch or cuda reference")
        for i, p in enumerate(spec.params):
            if isinstance(p, BufferParam) and p.init is not None:
                return f"params.{i}.init", (f"buffer {p.name!r} has an 'init' distribution, but inputs come from "
                                            f"{spec.inputs.function}() in {spec.inputs.file} ('inputs'), which "
                                            "builds every input: remove one of them")
    for i, p in enumerate(spec.params):
        if not isinstance(p, BufferParam) or p.max_mismatches == 0:
            continue
        if p.role == "in":
            return f"params.{i}.max_mismatches", f"buffer {p.name!r} is an input: only outputs have a mismatch budget"
        try:
            unknown = expressions.names_in(p.max_mismatches) - set(spec.sizes)
        except ExpressionError as exc:
            return f"params.{i}.max_mismatches", str(exc)
        if unknown:
            return f"params.{i}.max_mismatches", f"uses unknown size symbols {sorted(unknown)} (sizes: {spec.sizes})"
    return None


def mismatch_budget(buffer: BufferParam, sizes: Mapping[str, int]) -> int:
    """How many elements of ``buffer`` may be outside tolerance for a case of these sizes."""
    if buffer.max_mismatches == 0:
        return 0
    try:
        budget = expressions.evaluate_int(buffer.max_mismatches, sizes)
    except ExpressionError as exc:
        raise ExpressionError(f"max_mismatches: {exc}") from None
    if budget < 0:
        raise ExpressionError(f"max_mismatches {buffer.max_mismatches!r} = {budget} is negative")
    return budget
