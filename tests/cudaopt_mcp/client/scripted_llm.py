"""A local OpenAI-compatible Chat Completions endpoint that plays back scripted replies, for tests."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def completion(content: str, usage: dict | None = None, finish_reason: str = "stop") -> tuple[int, dict, dict]:
    body = {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "gpt-5-mini",
            "choices": [{"index": 0, "finish_reason": finish_reason,
                         "message": {"role": "assistant", "content": content}}]}
    if usage:
        body["usage"] = usage
    return 200, body, {}


def error(status: int, message: str, headers: dict | None = None, code: str | None = None,
          param: str | None = None) -> tuple[int, dict, dict]:
    return status, {"error": {"message": message, "type": "test", "code": code, "param": param}}, headers or {}


class ScriptedLLM:
    """Serves POST /v1/chat/completions from a script; keeps every request it received."""

    def __init__(self):
        self.script: list[tuple[int, dict, dict] | float] = []
        self.received: list[dict] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request_headers = {k.lower(): v for k, v in self.headers.items()}  # httpx sends lower-case names
                owner.received.append({"path": self.path, "headers": request_headers, "body": json.loads(raw)})
                step = owner.script.pop(0) if owner.script else error(500, "script exhausted")
                if isinstance(step, float):  # a delay longer than the client's timeout, then the next step
                    time.sleep(step)
                    step = owner.script.pop(0)
                status, body, headers = step
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and left, as the timeout test intends

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
