"""The server's command-line options become its configuration."""

from __future__ import annotations

import argparse

from cudaopt_mcp.server.options import add_serve_arguments, config_from_args


def _config(*argv: str):
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    return config_from_args(parser.parse_args(list(argv)))


def test_early_stops_are_on_by_default_and_full_timing_turns_them_off():
    assert _config().stop_margin == 0.10
    assert _config("--full-timing").stop_margin is None


def test_workers_ray_and_task_roots_reach_the_configuration(tmp_path):
    config = _config("--workers", "2", "--ray", "local", "--task-root", str(tmp_path), "--backend", "cpu")
    assert (config.workers, config.ray_address, config.task_roots, config.backend) == (2, "local", (tmp_path,), "cpu")
