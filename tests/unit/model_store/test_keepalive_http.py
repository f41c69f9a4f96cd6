"""The fast path's HTTP/1.1 client (model_store/runtime/keepalive_http.py) against a real
asyncio server on loopback: the three ways an answer is framed, keep-alive, a connection the
server closed while idle, and answers that are not HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from model_store.runtime.keepalive_http import AnswerError, KeepAliveClient
from tests.fixtures.loops import run_in_own_loop

Handler = Callable[[bytes, bytes], bytes]  # (head, body) -> the raw answer


async def _serve(answer: Handler, *, close_after: int = 0):  # type: ignore[no-untyped-def]
    """A server that reads each request and writes ``answer``; counts connections and
    requests; closes a connection after ``close_after`` requests (0: never)."""
    seen = {"connections": 0, "requests": 0}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen["connections"] += 1
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                body = await reader.readexactly(length)
                seen["requests"] += 1
                writer.write(answer(head, body))
                await writer.drain()
                served += 1
                if close_after and served >= close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], seen


def _run(test: Callable[[], Awaitable[None]]) -> None:
    run_in_own_loop(test)


def test_a_content_length_answer_and_the_connection_is_kept() -> None:
    async def test() -> None:
        server, port, seen = await _serve(
            lambda head, body: (
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Inference-Header-Content-Length: 2\r\nContent-Length: %d\r\n\r\n%s"
                % (len(body), body)
            )
        )
        client = KeepAliveClient()
        for n in range(3):
            answer = await client.post("127.0.0.1", port, "/v2/x", b"{}" * n, {}, timeout=5)
            assert answer.status == 200 and answer.body == b"{}" * n
            assert answer.headers["inference-header-content-length"] == "2"
        assert seen == {"connections": 1, "requests": 3}
        await client.aclose()
        server.close()

    _run(test)


def test_a_chunked_answer_and_one_framed_by_the_end_of_the_connection() -> None:
    async def test() -> None:
        chunked, port1, _ = await _serve(
            lambda head, body: (
                b"HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"5\r\nhello\r\n6;x=1\r\n world\r\n0\r\n\r\n"
            )
        )
        ended, port2, seen = await _serve(
            lambda head, body: b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it",
            close_after=1,
        )
        client = KeepAliveClient()
        answer = await client.post("127.0.0.1", port1, "/", b"", {}, timeout=5)
        assert (answer.status, answer.body) == (400, b"hello world")
        for _ in range(2):
            answer = await client.post("127.0.0.1", port2, "/", b"x", {}, timeout=5)
            assert answer.body == b"all of it"
        assert seen["connections"] == 2  # Connection: close is not kept
        await client.aclose()
        chunked.close()
        ended.close()

    _run(test)


def test_a_connection_closed_while_idle_is_replaced_once() -> None:
    async def test() -> None:
        server, port, seen = await _serve(
            lambda head, body: b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", close_after=1
        )
        client = KeepAliveClient()
        assert (await client.post("127.0.0.1", port, "/", b"", {}, timeout=5)).body == b"ok"
        await asyncio.sleep(0.05)  # the server has closed that kept connection by now
        assert (await client.post("127.0.0.1", port, "/", b"", {}, timeout=5)).body == b"ok"
        assert seen == {"connections": 2, "requests": 2}
        await client.aclose()
        server.close()

    _run(test)


@pytest.mark.parametrize(
    "raw",
    [
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
)
def test_answers_that_are_not_http_are_refused(raw: bytes) -> None:
    async def test() -> None:
        server, port, _ = await _serve(lambda head, body: raw)
        client = KeepAliveClient()
        with pytest.raises(AnswerError):
            await client.post("127.0.0.1", port, "/", b"", {}, timeout=5)
        await client.aclose()
        server.close()

    _run(test)


def test_nothing_listening_and_a_silent_server() -> None:
    async def test() -> None:
        client = KeepAliveClient()
        with pytest.raises(OSError):
            await client.post("127.0.0.1", 9, "/", b"", {}, timeout=5)
        silent = await asyncio.start_server(lambda r, w: asyncio.sleep(10), "127.0.0.1", 0)
        port = silent.sockets[0].getsockname()[1]
        with pytest.raises(TimeoutError):
            await client.post("127.0.0.1", port, "/", b"", {}, timeout=0.3)
        await client.aclose()
        silent.close()

    _run(test)
