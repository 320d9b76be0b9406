"""Inputs drawn once per key, reused from their files, bounded, and swept when their process died."""

from __future__ import annotations

import os
import shutil
import threading
import time

import numpy as np
import pytest

from harness_tools.run.scratch import PREFIX, InputFiles, sweep_dead_folders


def test_a_key_being_drawn_is_waited_for_not_drawn_again_and_other_keys_do_not_wait():
    cache = InputFiles()
    calls, started = [], threading.Event()

    def slow_draw(_allocate):
        calls.append("slow")
        started.set()
        time.sleep(0.5)
        return {"x": np.arange(10, dtype=np.float32)}

    first = threading.Thread(target=cache.get, args=(("k", 1), slow_draw))
    first.start()
    assert started.wait(10)
    t0 = time.perf_counter()
    cache.get(("k", 2), lambda _: calls.append("other") or {"x": np.zeros(3, np.float32)})
    assert time.perf_counter() - t0 < 0.4  # another key is not held up by the draw in flight
    arrays, _ = cache.get(("k", 1), lambda _: calls.append("again") or {"x": np.zeros(3, np.float32)})
    first.join()
    assert calls == ["slow", "other"] and np.array_equal(arrays["x"], np.arange(10, dtype=np.float32))


def test_inputs_are_drawn_once_per_key_and_redrawn_when_their_files_are_gone():
    cache = InputFiles()
    calls = []

    def draw(_allocate):
        calls.append(1)
        return {"x": np.arange(1000, dtype=np.float32)}

    arrays, files = cache.get(("task", "spec", "case", 7), draw)
    again, same_files = cache.get(("task", "spec", "case", 7), draw)
    assert len(calls) == 1 and files == same_files and np.array_equal(again["x"], arrays["x"])
    assert isinstance(again["x"], np.memmap)  # read from its file, not kept twice in memory
    shutil.rmtree(files["x"].parent)
    cache.get(("task", "spec", "case", 7), draw)
    assert len(calls) == 2


def test_the_cache_is_bounded_but_keeps_the_newest_entry():
    cache = InputFiles(max_bytes=6000)
    _, first = cache.get(("a",), lambda _: {"x": np.zeros(1000, dtype=np.float32)})  # 4000 bytes
    _, second = cache.get(("b",), lambda _: {"x": np.zeros(1000, dtype=np.float32)})
    assert not first["x"].exists() and second["x"].exists()
    _, big = cache.get(("c",), lambda _: {"x": np.zeros(4000, dtype=np.float32)})  # alone over the bound
    assert big["x"].exists() and not second["x"].exists()


def test_folders_of_dead_processes_are_swept_only_when_stale(tmp_path):
    dead_pid = 2**22 + 12345  # above pid_max on common systems
    old, recent, alive = (tmp_path / f"{PREFIX}{dead_pid}-old", tmp_path / f"{PREFIX}{dead_pid}-new",
                          tmp_path / f"{PREFIX}{os.getpid()}-mine")
    for folder in (old, recent, alive):
        folder.mkdir()
    hour_ago = time.time() - 7200
    os.utime(old, (hour_ago, hour_ago))
    os.utime(alive, (hour_ago, hour_ago))
    sweep_dead_folders(tmp_path)
    assert not old.exists() and recent.exists() and alive.exists()


def test_kept_inputs_are_read_back_only_when_an_array_is_asked_for(tmp_path):
    cache = InputFiles(max_bytes=1 << 20)
    drawn = cache.get(("k",), lambda _: {"a": np.arange(4.0), "b": np.ones(3)})[0]
    assert list(drawn) == ["a", "b"]

    kept = cache.cached(("k",))
    kept["b"].unlink()  # a file nobody reads is never opened: the hit still answers
    kept["b"].touch()
    arrays, files = cache.get(("k",), lambda _: pytest.fail("a kept entry is not drawn again"))
    assert len(arrays) == 2 and set(arrays) == {"a", "b"} and files == kept
    assert np.array_equal(arrays["a"], np.arange(4.0))
    with pytest.raises(KeyError):
        arrays["c"]


def test_a_buffer_drawn_into_its_file_is_written_once_and_read_back_whole(monkeypatch):
    """``allocate`` maps the entry's own file: the draw fills it, nothing writes it again (np.save of a
    3.2 GB input was a second full copy), and the kept entry reads back the same bytes."""
    cache = InputFiles()
    saved = []
    real_save = np.save
    monkeypatch.setattr(np, "save", lambda path, arr: saved.append(path.name) or real_save(path, arr))

    def draw(allocate):
        big = allocate("big", (300, 7), np.dtype(np.float32))
        big[:] = np.arange(2100, dtype=np.float32).reshape(300, 7)
        return {"big": big, "small": np.ones(3, np.int32)}

    arrays, files = cache.get(("mapped",), draw)
    assert saved == ["in_small.npy"]  # only the buffer drawn in memory is saved
    assert isinstance(arrays["big"], np.memmap) and os.path.samefile(arrays["big"].filename, files["big"])
    back = np.load(files["big"])
    assert back.dtype == np.float32 and back.shape == (300, 7) and np.array_equal(back, arrays["big"])
    again, _ = cache.get(("mapped",), lambda _: pytest.fail("a kept entry is not drawn again"))
    assert np.array_equal(again["big"], back) and np.array_equal(again["small"], np.ones(3, np.int32))


def test_a_draw_that_fails_leaves_no_half_written_file():
    cache = InputFiles()
    made = []

    def draw(allocate):
        made.append(allocate("x", (10,), np.dtype(np.float32)).filename)
        raise RuntimeError("reference module raised")

    with pytest.raises(RuntimeError):
        cache.get(("broken",), draw)
    assert made and not os.path.exists(made[0])
    assert cache.cached(("broken",)) is None
