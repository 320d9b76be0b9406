"""Open a page in headless Chromium (the distribution's package): a screenshot, and what its console said."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# As root in a container: no sandbox; no GPU; nothing that would reach for the network on its own.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]
CONSOLE = re.compile(r":CONSOLE[:(]\d*\)?\]? (.*)")


def open_page(page: Path, screenshot: Path, width: int = 1280, height: int = 4000) -> list[str]:
    """Render ``page``, write ``screenshot``; returns the console messages the page produced (errors included)."""
    assert CHROMIUM, "chromium is not installed"
    with tempfile.TemporaryDirectory(prefix="cudaopt-chromium-") as profile:
        done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={screenshot}",
                               f"--window-size={width},{height}", page.resolve().as_uri()],
                              capture_output=True, text=True, timeout=120, check=False)
    assert screenshot.is_file(), done.stderr[-2000:]
    return [m.group(1) for line in done.stderr.splitlines() if (m := CONSOLE.search(line))]
