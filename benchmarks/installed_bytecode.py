"""Bytecode as an installed package has it, before a benchmark times whole processes.

``pip install`` compiles every module it installs. A source checkout run with ``PYTHONDONTWRITEBYTECODE=1`` (the
GPU host sets it, and so does the development machine) keeps no bytecode, so every process compiles each module it
imports again, in memory: ``cudaopt``, its jailed workers and compile children, and Kernel Tuner's process alike
(on the H200, ``import numpy, cudaopt_mcp.cli.main, mcp`` took 1.2-1.56 s that way against 0.99 s with bytecode).
The benchmarks that time whole processes call :func:`compile_installed` first, for both sides' packages, so they
measure what a user who installed them runs. Only folders this user can write are compiled; the rest are the
system's, compiled at their own install.
"""

from __future__ import annotations

import compileall
import importlib.util
import os
import time

PACKAGES = ("cudaopt_mcp", "harness_tools", "benchmarks", "mcp", "mcp_types", "pydantic", "pydantic_core", "anyio",
            "httpx2", "jsonschema", "optuna", "numpy", "kernel_tuner", "constraint", "cupy", "cuda")


def compile_installed(packages: tuple[str, ...] = PACKAGES) -> str:
    """Compile the bytecode of ``packages`` (those importable here, in folders this user can write); say which."""
    started, compiled = time.perf_counter(), []
    for name in packages:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        folders = [f for f in (spec.submodule_search_locations or []) if os.access(f, os.W_OK)] if spec else []
        for folder in folders:
            compileall.compile_dir(folder, quiet=1, workers=0)
        if folders:
            compiled.append(name)
    return f"bytecode compiled as an install would, for {', '.join(compiled) or 'nothing'} in " \
           f"{time.perf_counter() - started:.1f} s"
