"""Fixtures of the ctxgc Python suite: data paths, and a fake model provider on loopback
that speaks the OpenAI Chat Completions and Anthropic Messages wire formats (JSON and
server-sent events) and records every request it receives."""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]


def services_required() -> bool:
    return bool(os.environ.get("CI") or os.environ.get("CTXGC_REQUIRE_SERVICES"))


def skip_or_fail(why: str) -> None:
    if services_required():
        pytest.fail(f"{why} (required under CI)")
    pytest.skip(why)


@pytest.fixture(scope="session")
def examples() -> Path:
    return Path(os.environ.get("CTXGC_EXAMPLES", REPO / "examples"))


@pytest.fixture(scope="session")
def fixtures() -> Path:
    return REPO / "crates" / "ctxgc-core" / "tests" / "fixtures"


@pytest.fixture(scope="session")
def corpus() -> Path:
    path = Path(os.environ.get("CTXGC_CORPUS", REPO.parent / "shared" / "corpus"))
    if not path.is_dir():
        skip_or_fail(f"corpus not found at {path}; set CTXGC_CORPUS")
    return path


@pytest.fixture()
def postgres_url() -> str:
    url = os.environ.get("CTXGC_TEST_PG_URL")
    if not url:
        skip_or_fail("no PostgreSQL: CTXGC_TEST_PG_URL is not set")
    return url


REPLY = "The value of x is 20."


def _openai_completion(body: dict) -> dict:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "m"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": REPLY},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def _openai_chunks(body: dict) -> list[dict]:
    pieces = [REPLY[:10], REPLY[10:]]
    chunks = []
    for i, piece in enumerate(pieces):
        delta = {"content": piece}
        if i == 0:
            delta["role"] = "assistant"
        chunks.append(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": body.get("model", "m"),
                "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
            }
        )
    chunks.append(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": body.get("model", "m"),
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        }
    )
    return chunks


def _anthropic_message(body: dict) -> dict:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "m"),
        "content": [{"type": "text", "text": REPLY}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 11, "output_tokens": 7},
    }


def _openai_response(body: dict) -> dict:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": body.get("model", "m"),
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": REPLY, "annotations": []}],
            }
        ],
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
    }


def _anthropic_events(body: dict) -> list[tuple[str, dict]]:
    message = _anthropic_message(body)
    message["content"] = []
    message["stop_reason"] = None
    message["usage"] = {"input_tokens": 11, "output_tokens": 0}
    events = [("message_start", {"type": "message_start", "message": message})]
    events.append(
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        )
    )
    for piece in (REPLY[:10], REPLY[10:]):
        events.append(
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}},
            )
        )
    events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 7},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


class FakeProvider:
    """A model provider on 127.0.0.1 that answers every request with the same reply."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                provider.requests.append({"path": self.path, "body": body})
                if self.path.endswith("/chat/completions"):
                    if body.get("stream"):
                        self._sse([(None, c) for c in _openai_chunks(body)], done=True)
                    else:
                        self._json(_openai_completion(body))
                elif self.path.endswith("/responses"):
                    self._json(_openai_response(body))
                elif self.path.endswith("/messages"):
                    if body.get("stream"):
                        self._sse(_anthropic_events(body), done=False)
                    else:
                        self._json(_anthropic_message(body))
                else:
                    self.send_error(404)

            def _json(self, value: dict) -> None:
                data = json.dumps(value).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, events: list, done: bool) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.end_headers()
                for name, data in events:
                    if name:
                        self.wfile.write(f"event: {name}\n".encode())
                    self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()
                if done:
                    self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def provider():
    fake = FakeProvider()
    try:
        yield fake
    finally:
        fake.close()
