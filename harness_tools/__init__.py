"""cudaopt's evaluation engine: task specs, NVRTC compile, execution backends, compare and timing.

Nothing in this package imports MCP. The process that imports it never creates a CUDA context: only
the worker process started by the ``cuda`` backend does. The names below are the engine's public face,
imported on first use (so ``import harness_tools`` stays cheap and imports no driver)::

    task = resolve_task("sgemm")                       # a bundled task name or a task folder
    backend = create_backend("cpu")                    # or "cuda"; backend_traits(name) says what it offers
    result = evaluate(task, baseline(task), backend, EvaluationConfig(seed=1))
    result.correct, result.score_ms

The layers, lowest first: ``errors``; ``task`` (spec, expressions, candidate, include guard, tunable space)
and ``run`` (worker process, messages, timing, jail, scratch folders); ``compile``; ``backends``; ``check``
(inputs, the oracle, comparison, one case request); ``evaluation``; ``inspect`` (Nsight Compute,
compute-sanitizer). A module imports only from layers below its own (checked in CI by import-linter).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from harness_tools.version import __version__

_FACE = {
    "HarnessError": "harness_tools.errors",
    "Task": "harness_tools.task.spec",
    "load_task": "harness_tools.task.loading",
    "resolve_task": "harness_tools.task.loading",
    "bundled_task_names": "harness_tools.task.loading",
    "Candidate": "harness_tools.task.candidate",
    "baseline": "harness_tools.task.candidate",
    "TimingPlan": "harness_tools.run.timing",
    "compile_candidate": "harness_tools.compile",
    "CompileResult": "harness_tools.compile",
    "create_backend": "harness_tools.backends",
    "available_backends": "harness_tools.backends",
    "backend_traits": "harness_tools.backends",
    "evaluate": "harness_tools.evaluation",
    "EvaluationConfig": "harness_tools.evaluation",
    "EvaluationResult": "harness_tools.evaluation",
    "profile_candidate": "harness_tools.inspect.profile",
    "sanitize_candidate": "harness_tools.inspect.sanitize",
}
__all__ = [
    "__version__",
    "HarnessError",
    "Task",
    "load_task",
    "resolve_task",
    "bundled_task_names",
    "Candidate",
    "baseline",
    "TimingPlan",
    "compile_candidate",
    "CompileResult",
    "create_backend",
    "available_backends",
    "backend_traits",
    "evaluate",
    "EvaluationConfig",
    "EvaluationResult",
    "profile_candidate",
    "sanitize_candidate",
]

if TYPE_CHECKING:
    from harness_tools.backends import available_backends, backend_traits, create_backend
    from harness_tools.compile import CompileResult, compile_candidate
    from harness_tools.errors import HarnessError
    from harness_tools.evaluation import EvaluationConfig, EvaluationResult, evaluate
    from harness_tools.inspect.profile import profile_candidate
    from harness_tools.inspect.sanitize import sanitize_candidate
    from harness_tools.run.timing import TimingPlan
    from harness_tools.task.candidate import Candidate, baseline
    from harness_tools.task.loading import bundled_task_names, load_task, resolve_task
    from harness_tools.task.spec import Task


def __getattr__(name: str):
    if name not in _FACE:
        raise AttributeError(f"module 'harness_tools' has no attribute {name!r}")
    value = getattr(importlib.import_module(_FACE[name]), name)
    globals()[name] = value  # later look-ups skip this hook
    return value
