"""A task folder's digest names its content, wherever it lies: a copy shares it, an edit changes it."""

from __future__ import annotations

import os
import shutil

from harness_tools.task.folder_digest import folder_digest
from harness_tools.task.loading import resolve_task


def test_a_copy_has_the_digest_of_its_original_and_an_edit_changes_it(tmp_path):
    original = resolve_task("reduce_sum").folder
    copy = tmp_path / "task"
    shutil.copytree(original, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    assert folder_digest(copy) == folder_digest(original)

    (copy / "__pycache__").mkdir(exist_ok=True)
    (copy / "__pycache__" / "reference.cpython-311.pyc").write_bytes(b"compiled")
    assert folder_digest(copy) == folder_digest(original)  # what a run's copy leaves out does not count

    task_json = copy / "task.json"
    text = task_json.read_text()
    task_json.write_text(text + " ")  # one byte more
    assert folder_digest(copy) != folder_digest(original)
    task_json.write_text(text)
    stat = (original / "task.json").stat()
    os.utime(task_json, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # same bytes, touched later
    assert folder_digest(copy) == folder_digest(original)



def test_an_edit_that_keeps_the_size_is_seen(tmp_path):
    folder = tmp_path / "t"
    folder.mkdir()
    path = folder / "reference.py"
    path.write_text("a = 1\n")
    before = folder_digest(folder)
    stat = path.stat()
    path.write_text("a = 2\n")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert folder_digest(folder) != before


def test_nested_files_and_links_count_and_a_linked_folder_is_not_entered(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big.npy").write_bytes(b"x" * 10)
    folder = tmp_path / "t"
    (folder / "data" / "deep").mkdir(parents=True)
    (folder / "data" / "deep" / "table.txt").write_text("1 2 3\n")
    os.symlink(outside, folder / "linked")
    before = folder_digest(folder)

    (outside / "big.npy").write_bytes(b"y" * 10)  # behind a link to a folder: the link's text counts, not this
    assert folder_digest(folder) == before
    (folder / "data" / "deep" / "__pycache__").mkdir()
    (folder / "data" / "deep" / "stale.pyc").write_bytes(b"compiled")
    assert folder_digest(folder) == before

    (folder / "data" / "deep" / "table.txt").write_text("1 2 4\n")  # a nested file's content
    assert folder_digest(folder) != before
    (folder / "data" / "deep" / "table.txt").write_text("1 2 3\n")
    assert folder_digest(folder) == before
    (folder / "linked").unlink()
    os.symlink(tmp_path, folder / "linked")  # the link's target changes
    assert folder_digest(folder) != before
