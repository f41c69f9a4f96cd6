"""Chunk uploads streamed from the socket to the store: ``PUT /api/v1/uploads/<id>``.

Django's ``ASGIHandler`` reads a request's whole body into a ``SpooledTemporaryFile`` (a file
in ``/tmp`` past ``FILE_UPLOAD_MAX_MEMORY_SIZE``) before any middleware or view runs, so an
8 MiB chunk went through ``/tmp`` once before ``UploadStore.write_chunk`` copied it again.
:class:`StreamingUploads` sits in front of Django (``webapp/edge/asgi.py``) and takes only the
chunk ``PUT``; everything else, and this URL's ``GET``/``DELETE``, goes to Django unchanged.

For each chunk:

1. The checks, in one call on a database thread: the request phase of the same Django
   middleware the view runs behind (security, session, common, CSRF, authentication, API
   token, sign-in required), then ``versions.check_chunk_request`` (operator role, the
   upload's owner, ``Upload-Offset``, ``Content-Length``) and ``UploadStore.check_chunk``
   (state, offset, size). Meanwhile the first :data:`PIPE_BYTES` of the body are received
   into memory, so the checks' milliseconds overlap the transfer; nothing reaches the store
   before they pass. A refusal is answered at once; the server discards the rest of the body.
2. ``UploadStore.write_chunk`` runs in a writer thread, reading from a :class:`BodyPipe`
   that the event loop fills with the ``http.request`` messages as they arrive. At most
   :data:`PIPE_BYTES` wait in between: memory stays flat, and a client faster than the disk
   is held back by TCP. ``write_chunk`` takes the upload's lock, checks again, writes with
   ``O_DIRECT`` where it can (``model_store/uploads/direct_io.py``: no copy into the page
   cache, which was most of this path's CPU; :meth:`BodyPipe.wait_readable` tells it when the
   client pauses, so that it writes what it holds) and fsyncs before it returns. If the
   client goes away mid-body, the bytes that arrived are kept and flushed; the next ``GET``
   reports them as the resume point.
3. The response: the same JSON body, statuses, codes and ``Upload-Offset`` header as
   the chunk PUT's handler (``versions.upload_chunk``), through the same response
   middleware (security headers, session).

If the checks fail unexpectedly (a host not in ``ALLOWED_HOSTS``, a database outage), Django
gets the request, with the body bytes received so far, and answers it as it always has. The
view stays the fallback for other servers (where this path is merely not faster) and for
Django's test client. Differences from the view: an ``Expect: 100-continue`` client is told
to continue before the checks (Django, which reads the whole body first, did the same).
"""

from __future__ import annotations

import asyncio
import collections
import ctypes
import io
import logging
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.sessions.middleware import SessionMiddleware
from django.core.exceptions import SuspiciousOperation
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.common import CommonMiddleware
from django.middleware.csrf import CsrfViewMiddleware
from django.middleware.security import SecurityMiddleware
from django.urls import Resolver404, resolve
from django.utils import translation
from django.utils.cache import patch_vary_headers
from django.utils.log import log_response

from model_store.errors import ModelStoreError
from model_store.uploads import Upload, UploadStore
from webapp import request_limits
from webapp.accounts.auth import LoginRequiredMiddleware, TokenAuthenticationMiddleware
from webapp.accounts.language import from_accept_language
from webapp.api import versions
from webapp.api.app import django_view, store_error
from webapp.api.views import server_error
from webapp.edge.shared import Message, Receive, Scope, Send
from webapp.errors import HubError, error_json

logger = logging.getLogger(__name__)

AsgiApp = Callable[..., Awaitable[None]]

#: Body bytes that may wait between the event loop and the writer thread, per request. A few
#: MiB keep the writer busy while the loop parses the next packets; more buys nothing.
PIPE_BYTES = 4 << 20
#: The URL whose PUT this serves (declared in ``webapp.api.versions``).
CHUNK_URL_NAME = "api-upload"
#: Chunks written at the same time (each holds a thread while its body arrives); more wait.
WRITER_THREADS = 32
#: Threads for the checks' database work. Few and long-lived: each keeps its own database
#: connection between requests as CONN_MAX_AGE allows (a thread per request, as Django's
#: ASGIHandler makes, would open a new one every time).
DB_THREADS = 4


#: Free memory glibc keeps at the top of its heap instead of returning it to the kernel at once
#: (``M_TOP_PAD``; glibc's default is 128 KiB). See :func:`tune_malloc`.
MALLOC_TOP_PAD = 8 << 20
_M_TOP_PAD = -2  # <malloc.h>


def tune_malloc() -> bool:
    """Stops glibc from giving the heap's top back to the kernel after every large free.

    A request body reaches the application as pieces of up to ~256 KiB, and each piece is
    allocated and freed a few times on its way (asyncio's receive buffer, the parser's bytes,
    uvicorn's buffer, the message's bytes). With glibc's defaults, the heap is trimmed after
    those frees and the next piece faults the same memory in again, zero-filled: page faults
    dominated the web process's time. Measured on the development VM, an ASGI app under
    uvicorn that only drains PUT bodies took 1 GiB at about 0.7 GB/s with the defaults and
    1.9 GB/s with this. The cost is at most ``MALLOC_TOP_PAD`` of idle memory per malloc
    arena. Called once by ``webapp/edge/asgi.py``.

    Returns:
        Whether it applied: False with a C library that has no ``mallopt`` (musl's ignores
        it, macOS has none).
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_TOP_PAD, MALLOC_TOP_PAD))


#: Bytes asyncio asks the kernel for per read of a socket (its default is 256 KiB). See
#: :func:`tune_socket_reads`.
SOCKET_READ_BYTES = 1 << 20


def tune_socket_reads() -> bool:
    """Lets asyncio read up to :data:`SOCKET_READ_BYTES` from a socket at once.

    Each read of a chunk's body costs the same Python work whatever its size: asyncio's
    callback, Uvicorn's parser and flow control, an ``http.request`` message, the pipe to the
    writer thread and a wake-up of that thread. With 1 MiB instead of 256 KiB there are a
    quarter as many; measured on the development VM, the web process spent 15-20% less CPU on
    a 1 GiB upload (O_DIRECT writes; interleaved runs). A read takes only what has arrived, so
    small requests are unaffected; the cost is a transient buffer of up to this size per read.
    Called once by ``webapp/edge/asgi.py``; asyncio's own default elsewhere (a private class
    attribute: if a Python version renames it, this does nothing and returns False).
    """
    from asyncio import selector_events

    transport = getattr(selector_events, "_SelectorSocketTransport", None)
    if transport is None or not isinstance(getattr(transport, "max_size", None), int):
        return False
    transport.max_size = max(transport.max_size, SOCKET_READ_BYTES)
    return True


class StreamingUploads:
    """ASGI app: chunk ``PUT``\\ s streamed here, every other HTTP request to ``app``."""

    def __init__(self, app: AsgiApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        upload_id = _chunk_upload_id(scope)
        if upload_id is None:
            await self.app(scope, receive, send)
            return
        await _handle_chunk(scope, receive, send, upload_id, self.app)


def _chunk_upload_id(scope: Scope) -> str | None:
    """The upload id if this is a ``PUT`` to the chunk URL (``api-upload``)."""
    if scope.get("type") != "http" or scope.get("method") != "PUT":
        return None
    path = str(scope.get("path", ""))
    root = str(scope.get("root_path", "") or "")
    if root and path.startswith(root):
        path = path[len(root) :]
    try:
        match = resolve(path)  # the project's own URLconf decides, not a copy of it
    except Resolver404:
        return None
    if match.url_name != CHUNK_URL_NAME:
        return None
    return str(match.kwargs["upload_id"])


# --------------------------------------------------------------------------- the body pipe


class BodyPipe:
    """Request body bytes handed from the event loop to one reader thread.

    The loop side :meth:`put`\\ s each message's bytes and waits (without blocking the loop)
    while ``limit`` bytes or more are queued; :meth:`close` is the end of the body. The
    thread side is a blocking, file-like :meth:`read` (what ``write_chunk`` expects): it
    returns the queued messages' bytes without copying them (slicing only a message longer
    than asked for) and ``b""`` at the end. When the reader is done it calls
    :meth:`abandon`, and any further :meth:`put` returns False.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, limit: int = PIPE_BYTES) -> None:
        self._loop = loop
        self._limit = limit
        self._pieces: collections.deque[bytes] = collections.deque()
        self._queued = 0
        self._closed = False  # no more bytes will come
        self._abandoned = False  # nobody reads any more
        self._lock = threading.Lock()
        self._readable = threading.Condition(self._lock)
        self._writable = asyncio.Event()  # touched only on the loop's thread
        self._writable.set()

    # -- loop side ------------------------------------------------------------------------
    async def put(self, data: bytes) -> bool:
        """Queues ``data`` for the reader; False if the reader has stopped reading."""
        while True:
            with self._lock:
                if self._abandoned:
                    return False
                if self._queued < self._limit:
                    self._pieces.append(data)
                    self._queued += len(data)
                    self._readable.notify()
                    return True
                # Cleared under the lock: a reader that frees room after this sets it again.
                self._writable.clear()
            await self._writable.wait()

    def close(self) -> None:
        """No more bytes: the reader gets what is queued, then ``b""``."""
        with self._lock:
            self._closed = True
            self._readable.notify_all()

    # -- reader side ------------------------------------------------------------------------
    def read(self, size: int = -1, /) -> bytes:
        with self._lock:
            while not self._pieces and not self._closed:
                self._readable.wait()
            if not self._pieces:
                return b""
            was_full = self._queued >= self._limit
            piece = self._pieces.popleft()
            if 0 <= size < len(piece):
                self._pieces.appendleft(piece[size:])
                piece = piece[:size]
            self._queued -= len(piece)
            room = was_full and self._queued < self._limit
        if room:
            self._loop.call_soon_threadsafe(self._writable.set)
        return piece

    def wait_readable(self, timeout: float) -> bool:
        """Waits up to ``timeout`` seconds until :meth:`read` would not block; whether it would
        not. The writer flushes what it holds when bytes are slow to come."""
        with self._lock:
            return bool(self._readable.wait_for(lambda: self._pieces or self._closed, timeout))

    def take_all(self) -> list[bytes]:
        """Everything queued and unread (for a reader that was never started)."""
        with self._lock:
            pieces = list(self._pieces)
            self._pieces.clear()
            self._queued = 0
        self._loop.call_soon_threadsafe(self._writable.set)
        return pieces

    def abandon(self) -> None:
        """The reader is done: drop what is queued and let :meth:`put` return False."""
        with self._lock:
            self._abandoned = True
            self._pieces.clear()
            self._queued = 0
        self._loop.call_soon_threadsafe(self._writable.set)


_pools: dict[str, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool(name: str, size: int) -> ThreadPoolExecutor:
    with _pools_lock:
        if name not in _pools:
            _pools[name] = ThreadPoolExecutor(size, thread_name_prefix=name)
        return _pools[name]


def _writers() -> ThreadPoolExecutor:
    return _pool("upload-writer", WRITER_THREADS)


_R = TypeVar("_R")


async def _in_db_thread(func: Callable[..., _R], *args: Any) -> _R:
    """``func(*args)`` in one of the checks' threads, with Django's connection hygiene
    (``close_old_connections`` before and after, as around a request)."""
    call = database_sync_to_async(
        func, thread_sensitive=False, executor=_pool("upload-db", DB_THREADS)
    )
    return await call(*args)


def _write(uploads: UploadStore, upload_id: str, offset: int, pipe: BodyPipe, length: int) -> int:
    try:
        return uploads.write_chunk(upload_id, offset, pipe, length)  # type: ignore[arg-type]
    finally:
        pipe.abandon()


# --------------------------------------------------------------------------- the request


def _through(request: HttpRequest) -> HttpResponse:
    return _PASSED


_PASSED = HttpResponse()  # what the middleware below returns when it lets a request through


@dataclass(frozen=True)
class _Middleware:
    """The project's middleware whose hooks this path runs, in ``settings.MIDDLEWARE`` order.

    Not run: WhiteNoise (static files only), messages and htmx (pages only).
    """

    security: SecurityMiddleware
    session: SessionMiddleware
    common: CommonMiddleware
    csrf: CsrfViewMiddleware
    auth: AuthenticationMiddleware
    token: TokenAuthenticationMiddleware
    login: LoginRequiredMiddleware
    xframe: XFrameOptionsMiddleware

    @classmethod
    def build(cls) -> _Middleware:
        return cls(
            SecurityMiddleware(_through),
            SessionMiddleware(_through),
            CommonMiddleware(_through),
            CsrfViewMiddleware(_through),
            AuthenticationMiddleware(_through),
            TokenAuthenticationMiddleware(_through),
            LoginRequiredMiddleware(_through),
            XFrameOptionsMiddleware(_through),
        )


@dataclass
class _Admission:
    """The outcome of the checks: a response to send now, or a chunk to receive."""

    request: HttpRequest
    response: HttpResponseBase | None = None
    uploads: UploadStore | None = None
    upload: Upload | None = None
    offset: int = 0
    length: int = 0


def _admit(scope: Scope, upload_id: str) -> _Admission:
    """Everything the chunk PUT (and the middleware before it) checks, from the headers; a
    refusal in the request's ``Accept-Language``, as the API answers (LocaleMiddleware's part)."""
    request = ASGIRequest(scope, io.BytesIO())  # the body is never read through it
    language = from_accept_language(request)
    with translation.override(language):
        admission = _check(request, upload_id)
    if admission.response is not None:
        patch_vary_headers(admission.response, ("Accept-Language",))
        admission.response.headers.setdefault("Content-Language", language)
    return admission


def _check(request: HttpRequest, upload_id: str) -> _Admission:
    mw = _Middleware.build()
    early: HttpResponseBase | None
    for process_request in (
        mw.security.process_request,
        mw.session.process_request,
        mw.common.process_request,  # get_host(): DisallowedHost goes to Django
        mw.csrf.process_request,
        mw.auth.process_request,
    ):
        early = process_request(request)
        if early is not None:
            return _Admission(request, early)
    answer = mw.token(request)
    if answer is not _PASSED:
        return _Admission(request, answer)
    refused = request_limits.refusal(request)
    if refused is not None:
        return _Admission(request, refused)
    view = django_view(CHUNK_URL_NAME)
    for process_view in (mw.csrf.process_view, mw.login.process_view):
        early = process_view(request, view, (), {"upload_id": upload_id})
        if early is not None:
            return _Admission(request, early)
    # The checks of the chunk PUT's handler (role, owner, Upload-Offset, Content-Length).
    try:
        uploads, upload, offset, length = versions.check_chunk_request(request, upload_id)
        uploads.check_chunk(upload_id, offset, length)
    except HubError as exc:
        return _Admission(request, error_json(exc))
    except ModelStoreError as exc:
        return _Admission(request, _store_error(exc))
    return _Admission(request, None, uploads, upload, offset, length)


def _store_error(exc: ModelStoreError) -> HttpResponse:
    """A store error as the API answers it (409 carries the expected offset)."""
    return error_json(store_error(exc))


def _session_to_save(request: HttpRequest) -> bool:
    """Whether the session middleware's response phase will write the session."""
    session = getattr(request, "session", None)
    return session is not None and bool(session.modified or settings.SESSION_SAVE_EVERY_REQUEST)


def _finish(request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
    """The response phase of the same middleware (reverse order), and Django's 4xx/5xx log."""
    mw = _Middleware.build()
    result: Any = response  # the stubs disagree on HttpResponse vs HttpResponseBase
    result = mw.xframe.process_response(request, result)
    result = mw.csrf.process_response(request, result)
    result = mw.common.process_response(request, result)  # Content-Length
    if hasattr(request, "session"):  # not if the security middleware answered first
        result = mw.session.process_response(request, result)  # Vary: Cookie; saves
    result = mw.security.process_response(request, result)
    if result.status_code >= 400:
        log_response("%s: %s", result.reason_phrase, request.path, response=result, request=request)
    return result


async def _handle_chunk(
    scope: Scope, receive: Receive, send: Send, upload_id: str, fallback: AsgiApp
) -> None:
    # The body starts to arrive into the pipe while the checks run (at most PIPE_BYTES wait
    # there), so the checks' few milliseconds overlap the transfer; no byte reaches the store
    # before they pass.
    feed = _BodyFeed(receive, BodyPipe(asyncio.get_running_loop(), PIPE_BYTES))
    feeding = asyncio.create_task(feed.run())
    try:
        admission = await _in_db_thread(_admit, scope, upload_id)
    except BaseException as exc:
        await _cancel(feeding)
        if not isinstance(exc, Exception):
            raise
        # Django answers exactly as it always has (DisallowedHost: its 400; a database outage:
        # its 500 and log), given the body bytes read so far first.
        if not isinstance(exc, SuspiciousOperation):
            logger.warning("Upload checks failed; Django takes the request.", exc_info=True)
        await fallback(scope, feed.replay(), send)
        return
    response = admission.response
    if response is not None:
        await _cancel(feeding)  # the server discards the rest of the body
    else:
        try:
            response = await _receive_chunk(admission, upload_id, feed.pipe, feeding)
        except BaseException:
            await _cancel(feeding)
            raise
    if _session_to_save(admission.request):
        response = await _in_db_thread(_finish, admission.request, response)
    else:
        response = _finish(admission.request, response)  # no database work: not worth a thread
    if not feed.disconnected:
        await _send_response(response, send)


class _BodyFeed:
    """Moves the ``http.request`` messages into a :class:`BodyPipe` until the body ends."""

    def __init__(self, receive: Receive, pipe: BodyPipe) -> None:
        self.receive = receive
        self.pipe = pipe
        self.ended = False  # the last body message has arrived
        self.disconnected = False
        self._waiting: bytes | None = None  # received, waiting for room in the pipe

    async def run(self) -> None:
        try:
            while not self.ended:
                message = await self.receive()
                if message["type"] == "http.disconnect":
                    self.disconnected = True
                    return
                if message["type"] != "http.request":
                    continue
                self.ended = not message.get("more_body", False)
                body = message.get("body", b"")
                if body:
                    self._waiting = body  # kept for replay() if cancelled while waiting
                    if not await self.pipe.put(body):
                        return  # the writer stopped (all bytes taken, or an error)
                    self._waiting = None
        finally:
            self.pipe.close()  # the end of the body; early if the client left

    def replay(self) -> Receive:
        """``receive`` for another app: the bytes taken so far first, then the rest."""
        taken = self.pipe.take_all()
        if self._waiting is not None:
            taken.append(self._waiting)
        first: Message | None = {
            "type": "http.request",
            "body": b"".join(taken),
            "more_body": not self.ended,
        }
        if self.disconnected and not taken:
            first = None

        async def receive() -> Message:
            nonlocal first
            if first is not None:
                message, first = first, None
                return message
            return await self.receive()

        return receive


async def _cancel(task: asyncio.Task[None]) -> None:
    """Stops the feed (safe while it waits in ``receive()``) and waits for it to end."""
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # we are being cancelled ourselves, not only the feed


async def _receive_chunk(
    admission: _Admission, upload_id: str, pipe: BodyPipe, feeding: asyncio.Task[None]
) -> HttpResponseBase:
    """``write_chunk`` in a writer thread, reading the body from ``pipe`` as it arrives."""
    assert admission.uploads is not None and admission.upload is not None
    writer = asyncio.get_running_loop().run_in_executor(
        _writers(), _write, admission.uploads, upload_id, admission.offset, pipe, admission.length
    )
    await feeding  # ends with the body, or once the writer stops reading
    try:
        received = await writer
    except ModelStoreError as exc:
        return _store_error(exc)
    except Exception as exc:  # e.g. the disk is full: what Django does with a view's error
        request = admission.request
        response = server_error(request)
        log_response(
            "%s: %s", response.reason_phrase, request.path,
            response=response, request=request, exception=exc,
        )  # fmt: skip
        return response
    body = {"id": upload_id, "offset": received, "size": admission.upload.size}
    return JsonResponse(body)


async def _send_response(response: HttpResponseBase, send: Send) -> None:
    """A non-streaming Django response as ASGI messages (as ``ASGIHandler.send_response``)."""
    assert isinstance(response, HttpResponse)
    headers = [(name.encode("ascii"), value.encode("latin1")) for name, value in response.items()]
    for cookie in response.cookies.values():
        headers.append((b"Set-Cookie", cookie.output(header="").encode("ascii").strip()))
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": response.content, "more_body": False})
