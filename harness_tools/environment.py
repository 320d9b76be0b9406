"""What was measured on: recorded with every evaluation so timings can be judged and compared."""

from __future__ import annotations

import platform
import shutil
import subprocess

import numpy as np
from pydantic import BaseModel

from . import __version__
from .execution import DeviceInfo


class Clocks(BaseModel):
    sm_mhz: float | None = None
    memory_mhz: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None


class Environment(BaseModel):
    device: DeviceInfo
    nvrtc_version: str
    engine_version: str = __version__
    numpy_version: str = np.__version__
    python_version: str = platform.python_version()
    host: str = platform.node()
    clocks_before: Clocks | None = None
    clocks_after: Clocks | None = None


def read_clocks(device: int = 0) -> Clocks | None:
    """Current SM/memory clocks, temperature and power from nvidia-smi; None where it is absent."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    query = "clocks.sm,clocks.mem,temperature.gpu,power.draw"
    try:
        out = subprocess.run([smi, f"--query-gpu={query}", "--format=csv,noheader,nounits", "-i", str(device)],
                             capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    fields = [f.strip() for f in out.stdout.strip().splitlines()[0].split(",")] if out.stdout.strip() else []
    values = [_number(f) for f in fields] + [None] * 4
    return Clocks(sm_mhz=values[0], memory_mhz=values[1], temperature_c=values[2], power_w=values[3])


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None
