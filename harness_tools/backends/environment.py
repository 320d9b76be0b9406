"""What was measured on: recorded with every evaluation so timings can be judged and compared."""

from __future__ import annotations

import ctypes
import platform
import shutil
import subprocess

import numpy as np
from pydantic import BaseModel

from harness_tools.backends.contract import DeviceInfo
from harness_tools.version import __version__


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
    """Current SM/memory clocks, temperature and power; None where no NVIDIA driver is present.

    NVML answers in microseconds; nvidia-smi (the fallback) takes tens of milliseconds, twice per evaluation.
    """
    clocks = _nvml_clocks(device)
    return clocks if clocks is not None else _smi_clocks(device)


_nvml_lib: ctypes.CDLL | None | bool = None


def _nvml() -> ctypes.CDLL | None:
    global _nvml_lib
    if _nvml_lib is None:
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            _nvml_lib = lib if lib.nvmlInit_v2() == 0 else False
        except (OSError, AttributeError):
            _nvml_lib = False
    return _nvml_lib or None


def _nvml_clocks(device: int) -> Clocks | None:
    lib = _nvml()
    handle = ctypes.c_void_p()
    if lib is None or lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(device), ctypes.byref(handle)) != 0:
        return None

    def read(call, *args) -> float | None:
        value = ctypes.c_uint()
        return float(value.value) if call(handle, *args, ctypes.byref(value)) == 0 else None

    sm = read(lib.nvmlDeviceGetClockInfo, ctypes.c_int(1))  # NVML_CLOCK_SM
    memory = read(lib.nvmlDeviceGetClockInfo, ctypes.c_int(2))  # NVML_CLOCK_MEM
    temperature = read(lib.nvmlDeviceGetTemperature, ctypes.c_int(0))  # NVML_TEMPERATURE_GPU
    milliwatts = read(lib.nvmlDeviceGetPowerUsage)
    return Clocks(sm_mhz=sm, memory_mhz=memory, temperature_c=temperature,
                  power_w=milliwatts / 1000 if milliwatts is not None else None)


def _smi_clocks(device: int) -> Clocks | None:
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
