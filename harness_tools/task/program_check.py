"""Load-time checks of a task's kernel programs: launch sequences, scratch buffers, __constant__ inputs and
per-case defines agree with the task's params and sizes (each problem names its field)."""

from __future__ import annotations

from harness_tools.errors import ExpressionError
from harness_tools.task import expressions
from harness_tools.task.launches import KernelProgram, ScalarValue
from harness_tools.task.spec import BufferParam, TaskSpec


def program_inconsistency(spec: TaskSpec) -> tuple[str, str] | None:
    """(field, problem) for the first disagreement, or None."""
    symbols = [p.constant for p in spec.constants]
    twice = sorted({s for s in symbols if symbols.count(s) > 1})
    if twice:
        return "params", f"__constant__ symbols {twice} are filled by more than one buffer"
    if not spec.arguments:
        return "params", "every param fills a __constant__ symbol: the kernel needs at least one argument"
    for name, expr in spec.size_defines.items():
        try:
            unknown = expressions.names_in(expr) - set(spec.sizes)
        except ExpressionError as exc:
            return f"size_defines.{name}", str(exc)
        if unknown:
            return f"size_defines.{name}", f"uses {sorted(unknown)}, which are not sizes of the task ({spec.sizes})"
    programs = [("baseline", spec.baseline, set(spec.baseline.defines))]
    if spec.tunables is not None:
        programs.append(("tunables", spec.tunables, set(spec.tunables.params)))
    for field, program, defines in programs:
        clash = sorted(defines & set(spec.size_defines))
        if clash:
            kind = "tunables.params" if field == "tunables" else "baseline.defines"
            return kind, f"{clash} are also size_defines (set per case by the task); rename one of them"
        problem = _program_problem(spec, program) or _unknown_names(program, set(spec.sizes) | defines
                                                                     | set(spec.size_defines))
        if problem:
            return f"{field}.{problem[0]}", problem[1]
    return None


def _unknown_names(program: KernelProgram, visible: set[str]) -> tuple[str, str] | None:
    """A launch, scratch or scalar expression naming something that is neither a size nor a define of the program:
    found here, when the task loads, rather than as a failure of every case."""
    exprs: list[tuple[str, object]] = []
    steps = [("launch", program.launch)] if program.launch is not None else [
        (f"launches.{i}", step) for i, step in enumerate(program.launches or [])]
    for where, step in steps:
        exprs += [(f"{where}.grid.{k}", e) for k, e in enumerate(step.grid)]
        exprs += [(f"{where}.block.{k}", e) for k, e in enumerate(step.block)] + [(f"{where}.shared_mem", step.shared_mem)]
        exprs += [(f"{where}.args.{j}", a.value) for j, a in enumerate(getattr(step, "args", None) or [])
                  if isinstance(a, ScalarValue)]
    exprs += [(f"scratch.{i}.count", b.count) for i, b in enumerate(program.scratch)]
    for where, expr in exprs:
        try:
            unknown = expressions.names_in(expr) - visible
        except ExpressionError as exc:
            return where, str(exc)
        if unknown:
            return where, (f"{expr!r} names {sorted(unknown)}, which is neither a size of the task nor a define of "
                           f"this program; known: {sorted(visible)}")
    return None


def _program_problem(spec: TaskSpec, program: KernelProgram) -> tuple[str, str] | None:
    params = {p.name: p for p in spec.params}
    for i, buf in enumerate(program.scratch):
        if buf.name in params:
            return f"scratch.{i}.name", f"scratch buffer {buf.name!r} has the name of a task param; rename it"
    scratch = {b.name for b in program.scratch}
    for i, step in enumerate(program.launches or []):
        for j, arg in enumerate(step.args or []):
            if isinstance(arg, ScalarValue):
                continue
            param = params.get(arg)
            if param is None and arg not in scratch:
                return (f"launches.{i}.args.{j}", (f"{arg!r} is neither a param of the task ({sorted(params)}) nor a "
                                                    f"scratch buffer of this program ({sorted(scratch)})"))
            if isinstance(param, BufferParam) and param.constant:
                return (f"launches.{i}.args.{j}", (f"{arg!r} fills __constant__ symbol {param.constant!r}; it is not a "
                                                    "kernel argument (kernels read it by the symbol's name)"))
    return None
