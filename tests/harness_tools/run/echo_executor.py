"""A device-free executor for testing the worker process machinery (loaded inside the child)."""

from __future__ import annotations

import os
import time


class EchoExecutor:
    def __init__(self, device: int):
        if device < 0:
            raise RuntimeError("no such device")
        self.device = device
        self.instance = os.urandom(8).hex()
        self.dead = False

    def info(self) -> dict:
        # a pid says nothing in a jail (each worker is pid 2 of its own namespace): a random id names the process
        return {"pid": os.getpid(), "instance": self.instance, "device": self.device}

    def echo(self, payload):
        return payload

    def sleep(self, seconds: float):
        time.sleep(seconds)
        return "slept"

    def crash(self, _):
        os._exit(7)

    def poison(self, _):
        self.dead = True  # like a sticky CUDA error: answer, then the process ends
        return "poisoned"

    def bug(self, _):
        raise KeyError("a bug in the executor")

    def shout(self, text: str):
        print(text, flush=True)  # must not reach the parent's stdout
        return "ok"
