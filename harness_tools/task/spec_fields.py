"""The bounded field types every spec model is built from: limits, identifiers, expressions, ``Strict``.

Task folders, inline specs and candidates come from users and remote clients, so every name, list, string
and number has a cap (``MAX_*``) and names that become file names or C identifiers are ASCII identifiers.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from harness_tools.task import expressions

# ---- limits: what a task (or a candidate) may ask for ---------------------------------------------------
MAX_NAME_CHARS = 64
MAX_FILE_NAME_CHARS = 128
MAX_PARAMS = 64
MAX_SIZES = 32
MAX_CASES = 256
MAX_HIDDEN_CASES = 32
MAX_DIMS = 8
MAX_DEFINES = 64
MAX_TUNABLES = 32
MAX_TUNABLE_VALUES = 1024
MAX_CONSTRAINTS = 64
MAX_BACKENDS = 8
MAX_DESCRIPTION_CHARS = 20_000
MAX_TASK_FILE_BYTES = 4 << 20  # task.json
MAX_SOURCE_BYTES = 512 * 1024  # a kernel source: the task's own files and every candidate's
MAX_TASK_ENTRIES = 10_000  # files and folders in a task folder (stored references have one file per case and buffer)
MAX_CASE_BYTES = 1 << 40  # buffers of one case, on any machine
MAX_INT = 1 << 64
MAX_OPTIONS = 32
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


def _identifier(what: str):
    def check(value: str) -> str:
        if len(value) > MAX_NAME_CHARS or not IDENTIFIER.fullmatch(value):
            raise ValueError(f"{what} {value[:80]!r} must be an identifier: ASCII letters, digits and _, not starting "
                             f"with a digit, at most {MAX_NAME_CHARS} characters ({what}s name files and C symbols)")
        return value
    return AfterValidator(check)


ParamName = Annotated[str, _identifier("parameter name")]
SizeName = Annotated[str, _identifier("size name")]
CaseName = Annotated[str, _identifier("case name")]
DefineName = Annotated[str, _identifier("define name")]
FileName = Annotated[str, Field(min_length=1, max_length=MAX_FILE_NAME_CHARS)]
BoundedInt = Annotated[int, Field(ge=-MAX_INT, le=MAX_INT)]
BoundedFloat = Annotated[float, Field(allow_inf_nan=False)]  # floats cost the same at any size: finite is enough
SizeValue = Annotated[int, Field(ge=-(1 << 63), lt=1 << 63)]
ExprText = Annotated[str, Field(max_length=expressions.MAX_EXPRESSION_CHARS)]
BackendNames = list[Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")]] | None

Expr = BoundedInt | BoundedFloat | ExprText


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

# NVRTC options a candidate or a task's kernel may add. Everything that names files or the architecture is ours to set.
_ALLOWED_OPTIONS = re.compile(
    r"^(--use_fast_math|-use_fast_math|--ftz=(true|false)|--prec-div=(true|false)|--prec-sqrt=(true|false)"
    r"|--fmad=(true|false)|--extra-device-vectorization|-lineinfo|--generate-line-info"
    r"|--maxrregcount=\d{1,3}|-maxrregcount=\d{1,3}|-std=c\+\+(14|17|20)|--std=c\+\+(14|17|20)"
    r"|--restrict|--dopt=(on|off)|-default-device|--split-compile=\d"
    r"|--arch-specific)$"  # the engine's own: the device's arch-specific target (sm_90a), see compile.program
)


def _allowed_option(option: str) -> str:
    if not _ALLOWED_OPTIONS.match(option):
        raise ValueError(f"NVRTC option {option[:80]!r} is not accepted (architecture, include paths and pre-includes "
                         "are set by the engine; use 'defines' for macros)")
    return option


CompileOption = Annotated[str, AfterValidator(_allowed_option)]
CompileOptions = Annotated[list[CompileOption], Field(max_length=MAX_OPTIONS)]
