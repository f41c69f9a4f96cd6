"""A small HTTP server that answers as the hub's node API does (docs/nodes.md), for the node's
client tests: each test says what each path answers, and sees what the node sent."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

#: A route answers (status, headers, body).
Answer = tuple[int, dict[str, str], bytes]


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class ContractHub:
    url: str
    routes: dict[tuple[str, str], Callable[[Seen], Answer]] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)


@pytest.fixture
def contract_hub() -> Iterator[ContractHub]:
    hub = ContractHub(url="")

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            seen = Seen(self.command, self.path, dict(self.headers), self.rfile.read(length))
            hub.seen.append(seen)
            route = hub.routes.get((self.command, self.path))
            status, headers, body = route(seen) if route else (404, {}, b'{"code":"not_found"}')
            self.send_response(status)
            # A route may drop Content-Length ("" value): the body then ends when the
            # connection closes (HTTP/1.0), as a streamed answer of unknown size does.
            for key, value in {"Content-Length": str(len(body)), **headers}.items():
                if value:
                    self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
