"""The ``cuda`` backend, parent side: forwards cases to a worker process that owns the GPU context.

This module must not import the CUDA driver: the process that uses it never creates a context.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import shutil
import subprocess

from harness_tools.backends.protocols import BackendTraits
from harness_tools.backends.worker_backend import WorkerBackend
from harness_tools.errors import BackendUnavailable
from harness_tools.run.jail import JailSpec, Limits
from harness_tools.run.scratch import inputs_root, scratch_root

EXECUTOR = "harness_tools.backends.cuda.executor:CudaExecutor"


def gpu_present() -> bool:
    """Whether an NVIDIA GPU looks usable, judged without touching the driver API."""
    if glob.glob("/dev/nvidia[0-9]*"):
        return True
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def visible_gpus() -> list[str]:
    """One ``CUDA_VISIBLE_DEVICES`` entry per GPU this process may use: the entries it was given, else one per
    ``/dev/nvidiaN`` device (indices as the driver numbers them), else ``nvidia-smi -L``'s count."""
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        return [entry.strip() for entry in given.split(",") if entry.strip() and entry.strip() != "-1"]
    numbers = sorted(int(m.group(1)) for path in glob.glob("/dev/nvidia[0-9]*")
                     if (m := re.fullmatch(r"/dev/nvidia(\d+)", path)))
    if numbers:
        return [str(i) for i in range(len(numbers))]
    smi = shutil.which("nvidia-smi")
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20) if smi else None
    except (OSError, subprocess.TimeoutExpired):
        out = None
    lines = [line for line in out.stdout.splitlines() if line.startswith("GPU ")] if out and out.returncode == 0 else []
    return [str(i) for i in range(len(lines))]


# Identical code drifts 2.5-3.5 % between evaluations on the H200 (docs/benchmarks.md, false progress): a gain of
# a quarter is seven times that, and re-timing a slow incumbent in three rounds cost seconds per new best.
SURE_GAIN = 0.25


class CudaBackend(WorkerBackend):
    name = "cuda"
    traits = BackendTraits(clock="CUDA events", default_warmup=10, default_reps=100, profiler=True, min_gain=0.01,
                           sure_gain=SURE_GAIN, buffers_in_host_memory=False, sanitizer="compute-sanitizer",
                           compares_on_device=True)

    def __init__(self, device: int = 0, pin: str | None = None):
        """``pin``: the one GPU the worker may see (a ``CUDA_VISIBLE_DEVICES`` entry; it is then device 0)."""
        if not gpu_present():
            raise BackendUnavailable(
                "no NVIDIA GPU found on this machine (no /dev/nvidia* device, nvidia-smi lists none); "
                "run on a GPU host or use --backend cpu"
            )
        spec = worker_jail()
        if pin is not None:
            spec = dataclasses.replace(spec, env={**spec.env, "CUDA_VISIBLE_DEVICES": pin})
            device = 0
        super().__init__(EXECUTOR, device, spec=spec)
        self._info.pinned_to = pin


def worker_jail() -> JailSpec:
    """The cuda worker: /dev/nvidia* and /sys for the driver, the inputs read-only, scratch writable. No
    address-space limit: the driver's unified memory reserves far more virtual space than it uses. It starts no
    other process (the driver's own threads still start): on the GPU host, root without a cgroup, the process
    limit cannot bound a fork bomb, the seccomp filter can (seen on an H200: the examples evaluate under it)."""
    return JailSpec(purpose="cuda worker", gpu=True, read_only=(str(inputs_root()),), writable=(str(scratch_root()),),
                    limits=Limits(processes=256), spawns=False)
