"""Shared helpers of the adapter tests.

Each test module skips itself (with the reason) when its framework's extra is not
installed; CI installs every extra (``constraints/adapters.txt``), so there they all run.
The tests drive the frameworks' real code, with no network: the OpenAI Agents SDK runs
with its own scripted model (``agents.testing.ScriptedModel``), and the one OpenAI API call
its compaction session makes goes to a local HTTP server (``openai_api``) started here.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Coroutine, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

import pytest

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Runs a coroutine in a fresh event loop (no pytest plugin needed)."""
    return asyncio.run(coro)


class FakeOpenAIAPI:
    """An HTTP server on 127.0.0.1 answering OpenAI API paths with canned JSON.

    ``routes`` maps a path (``/v1/responses/compact``) to a function of the request's JSON
    body returning the response's JSON; ``requests`` records every (path, body).
    """

    def __init__(self) -> None:
        self.routes: dict[str, Callable[[Any], Any]] = {}
        self.requests: list[tuple[str, Any]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"null")
                api.requests.append((self.path, body))
                route = api.routes.get(self.path)
                payload = json.dumps(route(body) if route else {"error": "no route"}).encode()
                self.send_response(200 if route else 404)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


@pytest.fixture
def openai_api() -> Iterator[FakeOpenAIAPI]:
    api = FakeOpenAIAPI()
    try:
        yield api
    finally:
        api.close()
