"""docs/tasks.md's examples load: its complete task passes its validation cases, and every other json block,
merged into that task, loads too (so the page cannot drift from the loader)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness_tools.task.loading import load_task
from tests.harness_tools.check.checking_tasks import VALIDATION, run

DOC = Path(__file__).resolve().parents[3] / "docs" / "tasks.md"
BLOCK = re.compile(r"```(\w+)([^\n]*)\n(.*?)```", re.S)


def _blocks() -> tuple[dict[str, str], list[str]]:
    """(the complete task's files by name, the other json blocks)."""
    files, fragments = {}, []
    for lang, title, body in BLOCK.findall(DOC.read_text()):
        if title.strip():
            files[title.strip()] = body
        elif lang == "json":
            fragments.append(body)
    return files, fragments


def _write(folder: Path, files: dict[str, str], update: dict | None = None) -> Path:
    folder.mkdir(parents=True)
    for name, body in files.items():
        (folder / name).write_text(body)
    if update:
        raw = json.loads(files["task.json"])
        (folder / "task.json").write_text(json.dumps({**raw, **update}))
    return folder


def test_the_complete_task_loads_and_passes_its_validation_cases(cpu_backend, tmp_path):
    files, _ = _blocks()
    assert set(files) == {"task.json", "kernel.cu", "reference.py"}
    result = run(load_task(_write(tmp_path / "scale", files)), cpu_backend, config=VALIDATION)
    assert result.correct, result.failure


@pytest.mark.parametrize("index", range(len(_blocks()[1])))
def test_every_fragment_loads_merged_into_the_task(tmp_path, index):
    files, fragments = _blocks()
    update = json.loads(fragments[index])
    task = load_task(_write(tmp_path / "t", files, update))
    for key in update:
        assert getattr(task.spec, key) is not None
