"""A stub OpenAI-compatible Chat Completions server on 127.0.0.1, for the
model summarizer's tests (no network beyond the loopback)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ChatStub:
    """A Chat Completions endpoint on 127.0.0.1: answers `answer`, or
    `status` when it is not 200; keeps the request bodies it got."""

    def __init__(self, answer: Any, status: int = 200) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[str | None] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                stub.bodies.append(json.loads(self.rfile.read(length)))
                stub.headers.append(self.headers.get("Authorization"))
                payload = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def chat_answer(text: str) -> dict[str, Any]:
    return {"choices": [{"message": {"role": "assistant", "content": text}}]}
