"""The task format as a JSON Schema, generated from the pydantic models that load task.json.

The schema says what the models say about single fields (names, types, limits, allowed values); rules that span
fields (a launch expression naming a size, a tolerance for every output dtype, ...) are checked when the task
loads (``cudaopt eval`` names the field). The file ships beside this module, ``task.schema.json``, and every
bundled and example task.json points its ``$schema`` at it with a relative path, which editors such as VS Code
follow without a network.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness_tools.task.spec import TaskSpec

SCHEMA_FILE = Path(__file__).with_name("task.schema.json")
DIALECT = "https://json-schema.org/draft/2020-12/schema"  # a name, never fetched


def task_schema() -> dict[str, Any]:
    schema = TaskSpec.model_json_schema(by_alias=True, mode="validation")
    return {"$schema": DIALECT, "title": "cudaopt task (task.json)",
            "description": "A kernel optimisation task: the kernel's signature, cases, oracle, tolerances, baseline "
                           "and tunables. docs/tasks.md describes every field.", **schema}


def schema_text() -> str:
    return json.dumps(task_schema(), indent=1, sort_keys=True) + "\n"
