"""The compile cache on disk: a second process gets the first one's cubin; damaged entries, a bound, concurrent
writers, a folder others may write and 'off' all behave."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness_tools.compile import compile_candidate, disk_cache
from harness_tools.task.candidate import Candidate

ROOT = Path(__file__).resolve().parents[3]

COMPILE_ONCE = """
import hashlib, json, sys
from harness_tools.compile import compile_candidate
from harness_tools.task.candidate import Candidate
tags = sys.argv[1:] or ["1"]
for tag in tags:
    source = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = %s.0f; }\\n' % tag
    r = compile_candidate(Candidate(source=source, kernel_name="k", launch={"grid": [1], "block": [32]}), "sm_90")
    print(json.dumps({"ok": r.ok, "cached": r.cached, "cubin": hashlib.sha256(r.cubin or b"").hexdigest(),
                      "log": r.log, "registers": r.resources.registers if r.resources else None}))
"""


def compile_in_a_process(cache: Path | str, *tags: str, **env: str) -> list[dict]:
    out = subprocess.run([sys.executable, "-c", COMPILE_ONCE, *tags], capture_output=True, text=True, timeout=120,
                         cwd=ROOT, env={**os.environ, "CUDAOPT_CUBIN_CACHE": str(cache), **env})
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("??/*.json"))


def candidate(tag: str) -> Candidate:
    return Candidate(source=f'extern "C" __global__ void k(float* x) {{ x[0] = {tag}; }}\n', kernel_name="k",
                     launch={"grid": [1], "block": [1]})


def test_a_second_process_gets_the_first_ones_result(tmp_path):
    cache = tmp_path / "cache"
    (first,) = compile_in_a_process(cache, "7")
    (second,) = compile_in_a_process(cache, "7")
    assert first["ok"] and not first["cached"]
    assert second["cached"] and second["cubin"] == first["cubin"] and second["log"] == first["log"]
    assert second["registers"] == first["registers"] is not None
    assert len(entries(cache)) == 1 and oct(cache.stat().st_mode & 0o777) == "0o700"
    (other,) = compile_in_a_process(cache, "8")  # another source, another entry
    assert not other["cached"] and len(entries(cache)) == 2


def test_a_damaged_entry_is_a_miss_and_is_replaced(tmp_path):
    cache = tmp_path / "cache"
    compile_in_a_process(cache, "3")
    (entry,) = entries(cache)
    good = entry.read_text()
    for damage in ["{not json", json.dumps({**json.loads(good), "key": "0" * 64}),
                   good.replace('"cubin": "', '"cubin": "!!')]:
        entry.write_text(damage)
        (again,) = compile_in_a_process(cache, "3")
        assert again["ok"] and not again["cached"], damage[:40]
        assert json.loads(entry.read_text())["key"] == entry.stem  # rewritten whole


def test_the_folder_stays_within_its_bound_dropping_the_least_recently_used(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("CUDAOPT_CUBIN_CACHE", str(cache))
    monkeypatch.setattr(disk_cache, "EVICT_EVERY", 1)
    compile_candidate(candidate("1.5f"), "sm_90")
    size = entries(cache)[0].stat().st_size
    monkeypatch.setenv("CUDAOPT_CACHE_MB", str(2.5 * size / (1 << 20)))  # room for two entries
    first = entries(cache)[0]
    compile_candidate(candidate("2.5f"), "sm_90")
    os.utime(first)  # the oldest entry was just used: the other one is evicted first
    compile_candidate(candidate("3.5f"), "sm_90")
    kept = entries(cache)
    assert len(kept) == 2 and first in kept


def test_concurrent_processes_leave_only_whole_entries(tmp_path):
    cache = tmp_path / "cache"
    tags = [str(t) for t in range(6)]
    procs = [subprocess.Popen([sys.executable, "-c", COMPILE_ONCE, *tags], stdout=subprocess.PIPE, text=True,
                              cwd=ROOT, env={**os.environ, "CUDAOPT_CUBIN_CACHE": str(cache)}) for _ in range(4)]
    results = [[json.loads(line) for line in p.communicate(timeout=300)[0].splitlines()] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    for i in range(len(tags)):
        assert len({r[i]["cubin"] for r in results}) == 1 and all(r[i]["ok"] for r in results)
    assert len(entries(cache)) == len(tags) and not list(cache.glob("??/.tmp-*"))
    assert all(r["cached"] for r in compile_in_a_process(cache, *tags))


@pytest.mark.parametrize("setting", ["off", "shared"])
def test_off_or_a_folder_others_may_write_keeps_nothing(tmp_path, setting):
    cache = tmp_path / "cache"
    if setting == "shared":
        cache.mkdir(mode=0o777)
        cache.chmod(0o777)
    where = "off" if setting == "off" else cache
    compile_in_a_process(where, "5")
    (again,) = compile_in_a_process(where, "5")
    assert again["ok"] and not again["cached"]
    assert not entries(cache)
