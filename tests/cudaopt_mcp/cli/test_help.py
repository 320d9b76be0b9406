"""Every cudaopt command's --help has a description, examples that name the command, and its exit codes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cudaopt_mcp.cli.help_texts import TEXTS


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_every_command_explains_itself(name):
    out = subprocess.run([sys.executable, "-m", "cudaopt_mcp.cli", name, "--help"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    description, examples, codes = TEXTS[name]
    assert " ".join(description.split())[:60] in text
    assert "examples:" in out.stdout and all(f"cudaopt {name}" in e for e in examples)
    assert "exit codes:" in out.stdout and all(c.split(":")[0] + ":" in out.stdout for c in codes)


def test_every_command_has_help_texts():
    import argparse

    from cudaopt_mcp.cli.main import _parser

    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == set(TEXTS)


def test_profile_and_sanitize_describe_their_own_case_option():
    helps = {n: subprocess.run([sys.executable, "-m", "cudaopt_mcp.cli", n, "--help"], capture_output=True, text=True,
                               timeout=120).stdout for n in ("profile", "sanitize")}
    assert "the performance case to profile" in helps["profile"] and "validation case" not in helps["profile"]
    assert "a validation case to check" in helps["sanitize"] and "performance case to profile" not in helps["sanitize"]
