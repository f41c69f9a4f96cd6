"""A small HTTP/1.1 client for asyncio: kept-alive connections per address, one request each.

The hub's ``/v2`` fast path passes each inference to a Triton and its answer back. aiohttp did
that at about 0.17 ms per call on the 2-core VM where a request written to a kept-alive stream
took 0.05 ms; at hundreds of calls a second the difference is the fast path's own cost. This
client does only what that needs: ``POST`` with a ``Content-Length`` body, answers framed by
``Content-Length``, ``Transfer-Encoding: chunked`` or the connection's end, keep-alive unless the
server says ``Connection: close``. Plain HTTP only (Triton inside the trusted network).

A connection that sat idle may have been closed by the server; a request that fails on a
reused connection before any answer arrived is sent once more on a new one (the callers'
requests are inferences of stateless models, so a repeat is harmless).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

#: The longest status line plus headers an answer may have.
MAX_HEAD_BYTES = 64 * 1024
#: Idle connections kept per address; more than this are closed when returned.
MAX_IDLE = 32


class AnswerError(Exception):
    """The server's answer could not be read as HTTP/1.1."""


@dataclass
class Answer:
    status: int
    headers: dict[str, str]  # names lower-cased; a repeated header keeps its last value
    body: bytes


_Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class KeepAliveClient:
    """Kept-alive connections for one event loop; ``aclose()`` closes them."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int], list[_Stream]] = {}

    async def post(
        self,
        host: str,
        port: int,
        path: str,
        body: bytes,
        headers: dict[str, str],
        timeout: float,
    ) -> Answer:
        """``POST path`` with ``body``; the whole answer within ``timeout`` seconds.

        Raises:
            OSError: The connection failed (refused, reset, closed early).
            TimeoutError: No whole answer within ``timeout``.
            AnswerError: The answer was not HTTP/1.1.
        """
        head = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
        head += [f"{name}: {value}" for name, value in headers.items()]
        request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
        key = (host, port)
        async with asyncio.timeout(timeout):
            while True:
                idle = self._idle.get(key)
                reused = bool(idle)
                reader, writer = idle.pop() if idle else await asyncio.open_connection(host, port)
                try:
                    writer.write(request)
                    writer.write(body)
                    answer, keep = await _read_answer(reader)
                except (OSError, asyncio.IncompleteReadError) as exc:
                    writer.close()
                    if reused:
                        continue  # closed while idle: once more on a new connection
                    raise OSError(f"the connection failed: {exc}") from exc
                except BaseException:
                    writer.close()
                    raise
                if keep and len(self._idle.setdefault(key, [])) < MAX_IDLE:
                    self._idle[key].append((reader, writer))
                else:
                    writer.close()
                return answer

    async def aclose(self) -> None:
        for streams in self._idle.values():
            for _, writer in streams:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
        self._idle = {}


async def _read_answer(reader: asyncio.StreamReader) -> tuple[Answer, bool]:
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError as exc:
        raise AnswerError("the answer's headers are too long") from exc
    if len(raw) > MAX_HEAD_BYTES:
        raise AnswerError("the answer's headers are too long")
    lines = raw.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise AnswerError(f"not an HTTP/1.1 answer: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, sep, value = line.partition(":")
            if not sep:
                raise AnswerError(f"a malformed header line: {line[:80]!r}")
            headers[name.strip().lower()] = value.strip()
    keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _read_chunked(reader)
    elif "content-length" in headers:
        length = headers["content-length"]
        if not length.isdigit():
            raise AnswerError(f"a malformed Content-Length: {length[:40]!r}")
        body = await reader.readexactly(int(length))
    else:
        body, keep = await reader.read(), False  # framed by the connection's end
    return Answer(int(code), headers, body), keep


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    pieces: list[bytes] = []
    while True:
        size_line = (await reader.readuntil(b"\r\n")).split(b";")[0].strip()
        try:
            size = int(size_line, 16)
        except ValueError as exc:
            raise AnswerError(f"a malformed chunk size: {size_line[:40]!r}") from exc
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers, if any
                pass
            return b"".join(pieces)
        pieces.append(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
            raise AnswerError("a chunk did not end with CRLF")
