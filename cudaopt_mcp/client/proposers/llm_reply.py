"""The reply format asked of a model, and turning whatever it replied into a :class:`Proposal`.

Two forms are asked for: a JSON object under a strict JSON schema (structured output), or, where an
endpoint refuses schemas, a fenced ```cuda block plus an optional ```json block. Either form is accepted
whichever was asked, since models drift. Anything unusable becomes ``NoProposal(kind="unusable")`` with a
reason the next prompt (and the person reading the run) can act on; parsing never raises.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from cudaopt_mcp.api import LaunchSpec, LaunchStep, ScratchBuffer
from cudaopt_mcp.client.proposal import NoProposal, Proposal

SCHEMA_NAME = "cuda_candidate"

# Strict structured output wants every property required and no extra keys, so "optional" is nullable.
# Expressions are strings ("ceil_div(n, BLOCK)", "256"): one item type keeps the schema within what
# every strict implementation (OpenAI, vLLM/xgrammar) accepts; integer-looking strings become ints below.
_EXPRS = {"type": "array", "items": {"type": "string"}, "description": "1 to 3 expressions (x, y, z)"}
REPLY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["note", "source", "launch", "launches", "scratch", "defines", "options"],
    "properties": {
        "note": {"type": "string", "description": "one line: the idea behind this candidate"},
        "source": {"type": "string", "description": "the complete CUDA C++ source of the candidate"},
        "launch": {
            "description": "launch configuration, or null to keep the baseline's",
            "anyOf": [
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["grid", "block", "shared_mem"],
                    "properties": {
                        "grid": _EXPRS,
                        "block": _EXPRS,
                        "shared_mem": {"type": "string", "description": "dynamic shared memory bytes expression"},
                    },
                },
                {"type": "null"},
            ],
        },
        "launches": {
            "description": "instead of launch: a sequence of kernel launches run in order and timed as one unit "
                           "(tasks whose baseline is a sequence), or null to keep the baseline's",
            "anyOf": [{"type": "array", "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["kernel", "grid", "block", "shared_mem", "args"],
                "properties": {
                    "kernel": {"type": "string", "description": "kernel name or name expression (gemm<128, 64>)"},
                    "grid": _EXPRS,
                    "block": _EXPRS,
                    "shared_mem": {"type": "string", "description": "dynamic shared memory bytes expression"},
                    "args": {"type": "array", "description": "in order: task params and scratch buffers by name, or "
                                                             "{value, dtype} for a computed scalar",
                             "items": {"anyOf": [{"type": "string"}, {
                                 "type": "object", "additionalProperties": False, "required": ["value", "dtype"],
                                 "properties": {"value": {"type": "string"}, "dtype": {"type": "string"}}}]}},
                }}}, {"type": "null"}],
        },
        "scratch": {
            "description": "device buffers the launches share (name, dtype, count expression), or null",
            "anyOf": [{"type": "array", "items": {
                "type": "object", "additionalProperties": False, "required": ["name", "dtype", "count"],
                "properties": {"name": {"type": "string"}, "dtype": {"type": "string"},
                               "count": {"type": "string", "description": "elements, an expression"}}}},
                {"type": "null"}],
        },
        "defines": {
            "type": "array",
            "description": "preprocessor macros passed as -DNAME=VALUE; numeric ones are usable in launch",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "value"],
                "properties": {"name": {"type": "string"}, "value": {"type": "string"}},
            },
        },
        "options": {"type": "array", "items": {"type": "string"}, "description": "extra NVRTC options"},
    },
}


def response_format() -> dict[str, Any]:
    """The Chat Completions ``response_format`` that enforces :data:`REPLY_SCHEMA`."""
    return {"type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "strict": True, "schema": REPLY_SCHEMA}}


# Substituted for $reply_format in templates/llm_system.md; kept next to the parser so the two agree.
JSON_FORMAT = """Reply with one JSON object and nothing else:

{"note": "<one line: the idea>", "source": "<complete CUDA C++ source>",
 "launch": {"grid": ["<expr>", ...], "block": ["<expr>", ...], "shared_mem": "<expr>"} or null,
 "defines": [{"name": "<NAME>", "value": "<value>"}, ...], "options": ["<nvrtc option>", ...]}

`launch: null` keeps the baseline's launch configuration; use empty lists for no defines or options. Where the
task's baseline is a launch sequence, give "launches" (each {"kernel", "grid", "block", "shared_mem", "args"})
and "scratch" instead of "launch", or null for both to keep the baseline's."""

FENCED_FORMAT = """Reply with exactly two fenced blocks and nothing else. First the complete source:

```cuda
<complete CUDA C++ source>
```

then its settings (omit keys you do not need; a missing launch keeps the baseline's):

```json
{"note": "<one line: the idea>", "launch": {"grid": ["<expr>"], "block": ["<expr>"], "shared_mem": "<expr>"},
 "defines": {"<NAME>": "<value>"}, "options": ["<nvrtc option>"]}
```

(a task whose baseline is a launch sequence takes "launches" and "scratch" in place of "launch")"""

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+#.-]*)[^\n]*\n(.*?)(?:\n[ \t]*```|\Z)", re.DOTALL)
_CODE_LANGS = {"", "cuda", "cu", "cpp", "c++", "cxx", "c", "cc", "h", "hpp"}
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")
_MAX_NOTE = 500


def parse_reply(text: str | None) -> Proposal | NoProposal:
    """A proposal from a model's reply (JSON object, fenced JSON, or fenced code plus settings)."""
    text = (text or "").strip()
    if not text:
        return _unusable("the reply is empty")
    whole = _json_object(text)
    if isinstance(whole, dict):
        return _from_fields(whole, source=None)
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(text)]
    settings: dict[str, Any] | None = None
    codes: list[str] = []
    json_error = whole if isinstance(whole, str) else None
    for lang, body in blocks:
        if lang in ("json", "jsonc") or (lang == "" and body.lstrip().startswith("{")):
            parsed = _json_object(body)
            if isinstance(parsed, dict):
                if "source" in parsed:
                    return _from_fields(parsed, source=None)
                settings = settings or parsed
            else:
                json_error = json_error or parsed
        elif lang in _CODE_LANGS:
            codes.append(body)
    if not codes:
        if json_error:
            return _unusable(f"the reply's JSON is invalid: {json_error}")
        if settings is not None:
            return _unusable("the reply's JSON has no 'source'")
        return _unusable("the reply has neither a JSON object nor a fenced ```cuda code block")
    # The kernel block is the one that defines a __global__ function; helpers or snippets may precede it.
    source = next((c for c in codes if "__global__" in c), codes[0])
    return _from_fields(settings or {}, source=source)


def _json_object(text: str) -> dict[str, Any] | str | None:
    """The parsed object; a string saying what is wrong when it looks like JSON but is not; else None."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(stripped)  # text after a complete object is ignored
    except json.JSONDecodeError as exc:
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    return value if isinstance(value, dict) else "the JSON value is not an object"


def _from_fields(fields: dict[str, Any], source: str | None) -> Proposal | NoProposal:
    source = fields.get("source") if source is None else source
    if not isinstance(source, str) or not source.strip():
        return _unusable("the reply has no kernel source")
    if "__global__" not in source:
        return _unusable("the source defines no __global__ kernel")
    note = fields.get("note") or ""
    note = " ".join(str(note).split())[:_MAX_NOTE]  # one line, within Proposal's limit rather than refused
    try:
        launch = _launch(fields.get("launch"))
        launches = _launches(fields.get("launches"))
        scratch = _scratch(fields.get("scratch"))
        if launch is not None and launches is not None:
            raise ValueError("give either launch or launches, not both")
        defines = _defines(fields.get("defines"))
        options = fields.get("options") or None
        return Proposal(source=source.strip("\n") + "\n", launch=launch, launches=launches, scratch=scratch,
                        defines=defines, options=options, note=note)
    except (ValidationError, ValueError, TypeError) as exc:
        return _unusable(_describe(exc))


def _launch(value: Any) -> LaunchSpec | None:
    if value in (None, {}, ""):
        return None
    if not isinstance(value, dict):
        raise ValueError(f"launch must be an object with grid/block/shared_mem, not {type(value).__name__}")
    fields = {k: v for k, v in value.items() if v is not None}  # shared_mem: null means the default 0
    for key in ("grid", "block"):
        if isinstance(fields.get(key), (str, int)):
            fields[key] = [fields[key]]
        if isinstance(fields.get(key), list):
            fields[key] = [_expr(v) for v in fields[key]]
    if "shared_mem" in fields:
        fields["shared_mem"] = _expr(fields["shared_mem"]) if fields["shared_mem"] != "" else 0
    try:
        return LaunchSpec.model_validate(fields)
    except ValidationError as exc:
        raise ValueError("invalid launch: " + _describe(exc)) from None


def _launches(value: Any) -> list[LaunchStep] | None:
    if value in (None, [], ""):
        return None
    if not isinstance(value, list) or not all(isinstance(step, dict) for step in value):
        raise ValueError("launches must be a list of objects with kernel/grid/block/shared_mem/args")
    steps = []
    for index, step in enumerate(value):
        base = _launch({k: step.get(k) for k in ("grid", "block", "shared_mem")})
        args = step.get("args")
        if isinstance(args, list):
            args = [{"value": _expr(a.get("value")), "dtype": a.get("dtype")} if isinstance(a, dict) else a for a in args]
        try:
            steps.append(LaunchStep.model_validate({**(base.model_dump() if base else {}), "kernel": step.get("kernel"),
                                                    "args": args or None}))
        except ValidationError as exc:
            raise ValueError(f"invalid launches.{index}: " + _describe(exc)) from None
    return steps


def _scratch(value: Any) -> list[ScratchBuffer] | None:
    if value in (None, [], ""):
        return None
    if not isinstance(value, list):
        raise ValueError("scratch must be a list of {name, dtype, count}")
    try:
        return [ScratchBuffer.model_validate({**b, "count": _expr(b.get("count"))} if isinstance(b, dict) else b)
                for b in value]
    except ValidationError as exc:
        raise ValueError("invalid scratch: " + _describe(exc)) from None


def _defines(value: Any) -> dict[str, Any] | None:
    if not value:
        return None
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, list) and all(isinstance(d, dict) and "name" in d for d in value):
        pairs = [(d["name"], d.get("value", "")) for d in value]
    else:
        raise ValueError("defines must be an object {NAME: value} or a list of {name, value}")
    defines: dict[str, Any] = {}
    for name, raw in pairs:
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"define name {name!r} is not a C identifier")
        defines[name] = _expr(raw)
    return defines


def _expr(value: Any) -> Any:
    """Numbers stay numbers and numeric strings become numbers; other strings are expressions."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        s = value.strip()
        if _INT.fullmatch(s):
            return int(s)
        if _FLOAT.fullmatch(s):
            return float(s)
        return s
    return value


def _describe(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'reply'}: {e['msg']}" for e in exc.errors())
    return str(exc)


def _unusable(reason: str) -> NoProposal:
    return NoProposal(kind="unusable", reason=reason)
