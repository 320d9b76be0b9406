"""The messages between the engine and a worker process: JSON frames on a pipe, read with a deadline.

A worker runs candidate code (native code on the cpu backend), so whatever comes back on its pipe is
hostile: it is never unpickled. A frame is an 8-byte little-endian length, then that many bytes of JSON
(UTF-8). ``bytes`` travel as ``{"$bytes": "<base64>"}`` (a cubin, say); dict keys are strings, tuples
arrive as lists (the pydantic models on both sides accept that). Reading takes a deadline for the whole
frame and a size cap, so a worker that sends half a frame and stops, or announces a huge one, costs a
timeout or a protocol error, never a hang or the caller's memory.
"""

from __future__ import annotations

import base64
import json
import os
import select
import struct
import time
from typing import Any

from harness_tools.errors import BadFrame, FrameTimeout

_HEADER = struct.Struct("<Q")
MAX_FRAME_BYTES = 256 << 20  # answers are kilobytes, cubins megabytes; outputs travel as files


def _encode(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and "$bytes" in value and isinstance(value["$bytes"], str):
            return base64.b64decode(value["$bytes"], validate=True)
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def send(fd: int, message: Any) -> None:
    body = json.dumps(_encode(message), separators=(",", ":")).encode()
    data = memoryview(_HEADER.pack(len(body)) + body)
    while data:
        written = os.write(fd, data)
        data = data[written:]


def ready(fd: int, timeout_s: float | None) -> bool:
    """Whether something (a frame or EOF) can be read within ``timeout_s`` (None: wait forever)."""
    readable, _, _ = select.select([fd], [], [], timeout_s)
    return bool(readable)


def receive(fd: int, timeout_s: float | None = None, max_bytes: int = MAX_FRAME_BYTES) -> Any:
    """One message; EOFError when the peer closed before a frame began, FrameTimeout, BadFrame."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    header = _read(fd, _HEADER.size, deadline, at_start=True)
    (size,) = _HEADER.unpack(header)
    if size > max_bytes:
        raise BadFrame(f"the worker announced a {size}-byte answer (at most {max_bytes} are read)")
    body = _read(fd, size, deadline, at_start=False)
    try:
        return _decode(json.loads(body))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # nesting deep enough to exhaust the stack too
        raise BadFrame(f"the worker's answer is not valid JSON ({type(exc).__name__})") from None


def _read(fd: int, size: int, deadline: float | None, at_start: bool) -> bytes:
    chunks, missing = [], size
    while missing:
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not ready(fd, remaining):
            raise FrameTimeout("no complete answer before the deadline")
        chunk = os.read(fd, min(missing, 1 << 20))
        if not chunk:
            if at_start and missing == size:
                raise EOFError("the peer closed the pipe")
            raise BadFrame("the pipe closed in the middle of an answer")
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)
