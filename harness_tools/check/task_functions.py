"""The Python functions a task folder brings: its NumPy or torch reference, its input generator, its custom check.

They live in a file of the task folder (``reference.py`` by default), named in task.json by ``file`` and
``function``. Loading a task only checks that the file is a plain file of the folder and that the name is an
identifier: the file is imported on first use, here, once per (path, modification time), so one file that
holds the reference, ``make_inputs`` and ``check`` is executed once, and an edited file is read again.

The file is Python and runs in this process: task folders are local (the MCP server accepts inline specs
only from a local client, cudaopt_mcp.service.run_creation). A function that raises is the task's bug, not
the candidate's: :func:`call_task_function` turns it into a :class:`~harness_tools.errors.TaskSpecError`
naming the file, the field and the exception.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable
from types import ModuleType

from harness_tools.errors import TaskSpecError
from harness_tools.run.host_blas import HOST_BLAS
from harness_tools.task.spec import Task

_MODULES: dict[tuple[str, int], ModuleType] = {}
_LOCK = threading.Lock()


def task_function(task: Task, file: str, function: str, field: str) -> Callable:
    """``function`` of the task's Python ``file``; ``field`` is the task.json field that names it
    (``reference.function``, ``inputs.function``, ``check.function``)."""
    path = task.path(file)
    key = (str(path), path.stat().st_mtime_ns)
    with _LOCK:
        module = _MODULES.get(key)
        if module is None:
            module_spec = importlib.util.spec_from_file_location(f"cudaopt_task_{task.name}_{path.stem}", path)
            module = importlib.util.module_from_spec(module_spec)
            try:
                module_spec.loader.exec_module(module)
            except Exception as exc:
                raise TaskSpecError(str(path), "-", f"cannot import: {type(exc).__name__}: {exc}") from exc
            for old in [k for k in _MODULES if k[0] == key[0]]:  # an older version of the file
                del _MODULES[old]
            _MODULES[key] = module
    fn = getattr(module, function, None)
    if not callable(fn):
        raise TaskSpecError(str(path), field, f"no function {function!r} in {file}")
    return fn


def call_task_function(task: Task, file: str, function: str, field: str, *args: object) -> object:
    """Call ``function`` of ``file`` with ``args``; an exception it raises becomes a TaskSpecError."""
    fn = task_function(task, file, function, field)
    try:
        with HOST_BLAS:  # task code multiplies matrices as it likes: one thread at a time (run.host_blas)
            return fn(*args)
    except Exception as exc:
        raise TaskSpecError(str(task.folder / file), field,
                            f"{function}() raised {type(exc).__name__}: {str(exc)[:2000]}") from exc
