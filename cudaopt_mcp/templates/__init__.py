"""Prompt templates (the ``*.md`` files beside this module, installed as package data).

Templates use ``$name`` placeholders (``string.Template``), so CUDA braces need no escaping. A folder named
by ``$CUDAOPT_PROMPTS_DIR`` replaces this one (to try edited prompts without reinstalling).
"""

from __future__ import annotations

import os
import string
from pathlib import Path

from cudaopt_mcp.errors import PromptMissing

TEMPLATES_DIR = Path(__file__).resolve().parent


def load_template(name: str) -> string.Template:
    folder = Path(os.environ.get("CUDAOPT_PROMPTS_DIR") or TEMPLATES_DIR)
    path = folder / f"{name}.md"
    if not path.is_file():
        raise PromptMissing(f"prompt template {name}.md not found in {folder}"
                            + (" (CUDAOPT_PROMPTS_DIR names that folder)" if folder != TEMPLATES_DIR else ""))
    return string.Template(path.read_text())
