"""The streaming chunk PUT (``webapp.edge.stream_upload``), driven as an ASGI app.

Each scenario runs ``webapp.edge.asgi.application`` (the streaming path in front of Django) through
``asgiref.testing.ApplicationCommunicator`` on a fresh event loop in another thread, like an
ASGI server would. The refusals are compared with what Django's own view answers for the same
request (``django_http_app``, the path the request took before), so the two cannot drift.
The database work happens in other threads: these tests commit (``transactional_db``).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from asgiref.testing import ApplicationCommunicator
from django.test import Client

from model_store.uploads import UploadStore, chunks
from tests.fixtures.users import make_user, signed_in, token_for

pytestmark = pytest.mark.usefixtures("transactional_db")

CHUNK = 64 * 1024
CSRF_SECRET = "abcdefghijklmnopqrstuvwxyzABCDEF"  # any 32 letters make a valid CSRF cookie


@pytest.fixture
def store(settings, tmp_path):
    settings.MODEL_STORE_ROOT = tmp_path / "store"
    settings.UPLOAD_CHUNK_BYTES = CHUNK
    settings.UPLOAD_MAX_BYTES = 16 << 20
    return tmp_path / "store"


@pytest.fixture
def apps():
    from webapp.edge.asgi import application, django_http_app

    return application, django_http_app


@pytest.fixture
def key(operator, store) -> str:
    return token_for(operator)


@pytest.fixture(autouse=True)
def no_silent_fallback(monkeypatch):
    """The streaming path must not hand requests to Django because its own checks failed."""
    from webapp.edge import stream_upload

    def fail(message: str, *args: Any, **kwargs: Any) -> None:
        raise AssertionError(message % args)

    monkeypatch.setattr(stream_upload.logger, "warning", fail)


def django_reads_no_body(monkeypatch) -> None:
    """Fails the test if Django's ASGIHandler spools a request body (the path we replace)."""
    from django.core.handlers.asgi import ASGIHandler

    async def refuse(self: Any, receive: Any) -> None:
        raise AssertionError("the chunk went through Django's ASGIHandler.read_body")

    monkeypatch.setattr(ASGIHandler, "read_body", refuse)


def run(scenario: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """A fresh loop in another thread (Playwright's session loop may own this one)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, scenario()).result(timeout=60)


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        import json

        return json.loads(self.body)


def scope(method: str, path: str, headers: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1")]
        + [(name.lower().encode(), value.encode()) for name, value in headers.items()],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8080),
    }


async def exchange(
    app: Any,
    method: str,
    path: str,
    headers: dict[str, str],
    parts: list[bytes],
    *,
    finished: bool = True,
) -> Reply:
    """Sends ``parts`` as ``http.request`` messages (the last ends the body if ``finished``)."""
    communicator = ApplicationCommunicator(app, scope(method, path, headers))
    for number, part in enumerate(parts, 1):
        more = number < len(parts) or not finished
        await communicator.send_input({"type": "http.request", "body": part, "more_body": more})
    if not parts:
        await communicator.send_input({"type": "http.request", "body": b"", "more_body": False})
    start = await communicator.receive_output(10)
    assert start["type"] == "http.response.start", start
    body = b""
    while True:
        message = await communicator.receive_output(10)
        body += message.get("body", b"")
        if not message.get("more_body", False):
            break
    await communicator.wait(10)
    names = {name.decode().lower(): value.decode() for name, value in start["headers"]}
    return Reply(start["status"], names, body)


def put(app: Any, upload_id: str, data: bytes, headers: dict[str, str], **kw: Any) -> Reply:
    path = f"/api/v1/uploads/{upload_id}"
    return run(lambda: exchange(app, "PUT", path, headers, [data], **kw))


def chunk_headers(key: str | None, offset: int | None, length: int | None) -> dict[str, str]:
    headers = {"Content-Type": "application/octet-stream"}
    if key is not None:
        headers["Authorization"] = f"Token {key}"
    if offset is not None:
        headers["Upload-Offset"] = str(offset)
    if length is not None:
        headers["Content-Length"] = str(length)
    return headers


def start_upload(key: str, size: int) -> str:
    import json

    response = Client().post(
        "/api/v1/uploads", data=json.dumps({"filename": "model.onnx", "size": size}),
        content_type="application/json", HTTP_AUTHORIZATION=f"Token {key}",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    return str(response.json()["id"])


def status_of(key: str, upload_id: str) -> dict[str, Any]:
    response = Client().get(f"/api/v1/uploads/{upload_id}", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 200, response.content
    return dict(response.json())


def part_file(store, upload_id: str) -> bytes:
    return (store / "uploads" / upload_id / "data.part").read_bytes()


# --------------------------------------------------------------------------- success


def test_three_chunks_with_a_token_and_no_session_arrive_intact(apps, key, store, monkeypatch):
    application, _ = apps
    payload = os.urandom(2 * CHUNK + 1234)
    upload_id = start_upload(key, len(payload))
    django_reads_no_body(monkeypatch)
    offset = 0
    for piece in (payload[:CHUNK], payload[CHUNK : 2 * CHUNK], payload[2 * CHUNK :]):
        reply = put(application, upload_id, piece, chunk_headers(key, offset, len(piece)))
        assert reply.status == 200, reply.body
        offset += len(piece)
        assert reply.json() == {"id": upload_id, "offset": offset, "size": len(payload)}
        assert reply.headers["content-type"] == "application/json"
        assert "set-cookie" not in reply.headers  # token calls get no session
    assert hashlib.sha256(part_file(store, upload_id)).digest() == hashlib.sha256(payload).digest()
    assert status_of(key, upload_id)["offset"] == len(payload)


def test_a_body_in_many_small_messages_is_written_in_order(apps, key, store) -> None:
    application, _ = apps
    payload = os.urandom(CHUNK)
    upload_id = start_upload(key, len(payload))
    parts = [payload[i : i + 1000] for i in range(0, len(payload), 1000)] + [b""]
    path = f"/api/v1/uploads/{upload_id}"
    reply = run(
        lambda: exchange(application, "PUT", path, chunk_headers(key, 0, len(payload)), parts)
    )
    assert reply.status == 200, reply.body
    assert reply.json()["offset"] == len(payload)
    assert part_file(store, upload_id) == payload


def test_a_signed_in_browser_uploads_with_the_csrf_header(apps, operator, store) -> None:
    application, _ = apps
    client = signed_in(operator)
    session = client.cookies["sessionid"].value
    key = token_for(operator)
    upload_id = start_upload(key, 10)
    cookies = f"sessionid={session}; csrftoken={CSRF_SECRET}"
    headers = {"Cookie": cookies, "Upload-Offset": "0", "Content-Length": "10"}
    refused = put(application, upload_id, b"x" * 10, headers)
    assert (refused.status, refused.json()["code"]) == (403, "csrf_failed")
    accepted = put(application, upload_id, b"x" * 10, {**headers, "X-CSRFToken": CSRF_SECRET})
    assert accepted.status == 200, accepted.body
    assert accepted.json()["offset"] == 10
    assert "Cookie" in accepted.headers.get("vary", "")  # the session decided


def test_get_and_delete_still_reach_django(apps, key, store) -> None:
    application, _ = apps
    upload_id = start_upload(key, 10)
    path = f"/api/v1/uploads/{upload_id}"
    auth = {"Authorization": f"Token {key}"}
    got = run(lambda: exchange(application, "GET", path, auth, []))
    assert (got.status, got.json()["offset"]) == (200, 0)
    deleted = run(lambda: exchange(application, "DELETE", path, auth, []))
    assert deleted.status == 204
    assert not (store / "uploads" / upload_id).exists()


# --------------------------------------------------------------------------- refusals


@dataclass
class Case:
    name: str
    status: int
    code: str
    headers: Callable[[str], dict[str, str]]  # from the operator's token
    upload: str = "own"  # own, someone else's, or a literal id
    before: int = 0  # bytes already received
    size: int = 100
    body: int = 10


CASES = [
    Case("bad token", 401, "not_authenticated", lambda k: chunk_headers("nope", 0, 10)),
    Case("not a token", 401, "not_authenticated",
         lambda k: {"Authorization": "Bearer x", "Upload-Offset": "0", "Content-Length": "10"}),
    Case("anonymous", 401, "not_authenticated", lambda k: chunk_headers(None, 0, 10)),
    Case("someone else's", 404, "upload_not_found", lambda k: chunk_headers(k, 0, 10),
         upload="other"),
    Case("unknown id", 404, "upload_not_found", lambda k: chunk_headers(k, 0, 10),
         upload="0" * 32),
    Case("malformed id", 404, "upload_not_found", lambda k: chunk_headers(k, 0, 10),
         upload="abc"),
    Case("no offset", 400, "invalid_offset", lambda k: chunk_headers(k, None, 10)),
    Case("offset not digits", 400, "invalid_offset",
         lambda k: {**chunk_headers(k, None, 10), "Upload-Offset": "-1"}),
    Case("no length", 400, "invalid_chunk", lambda k: chunk_headers(k, 0, None)),
    Case("chunk too long", 413, "too_large", lambda k: chunk_headers(k, 0, 2 * CHUNK + 1),
         size=4 * CHUNK, body=2 * CHUNK + 1),
    Case("wrong offset", 409, "upload_offset", lambda k: chunk_headers(k, 5, 10), before=20),
    Case("past the size", 413, "upload_too_large", lambda k: chunk_headers(k, 0, 20), size=10,
         body=20),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_refusals_match_the_django_view(apps, key, store, case: Case) -> None:
    application, django_app = apps
    other_key = token_for(make_user("olga", "operator"))
    results = []
    for app in (application, django_app):
        owner = other_key if case.upload == "other" else key
        upload_id = start_upload(owner, case.size) if case.upload in ("own", "other") else ""
        if case.before:
            first = put(application, upload_id, b"a" * case.before, chunk_headers(key, 0, 20))
            assert first.status == 200, first.body
        target = upload_id or case.upload
        reply = put(app, target, b"b" * case.body, case.headers(key))
        if upload_id:
            assert len(part_file(store, upload_id)) == case.before  # nothing was written
        results.append((reply.status, reply.json()["code"], reply.headers.get("upload-offset")))
    streamed, django = results
    assert streamed == django
    assert streamed[:2] == (case.status, case.code)
    if case.code == "upload_offset":
        assert streamed[2] == str(case.before)


def test_viewers_may_not_upload(apps, viewer, store) -> None:
    application, django_app = apps
    owner_key = token_for(make_user("olga", "operator"))
    upload_id = start_upload(owner_key, 10)
    headers = chunk_headers(token_for(viewer), 0, 10)
    for app in (application, django_app):
        reply = put(app, upload_id, b"x" * 10, headers)
        assert (reply.status, reply.json()["code"]) == (403, "forbidden")


def test_a_refusal_is_answered_before_the_body_is_sent(apps, key, store) -> None:
    application, _ = apps
    upload_id = start_upload(key, 10 * CHUNK)
    put(application, upload_id, b"a" * 100, chunk_headers(key, 0, 100))
    path = f"/api/v1/uploads/{upload_id}"
    headers = chunk_headers(key, 0, CHUNK)  # a retry of the first chunk
    # Only the first few bytes of the body are sent, and the body is not finished.
    reply = run(lambda: exchange(application, "PUT", path, headers, [b"b" * 1000], finished=False))
    assert (reply.status, reply.json()["code"]) == (409, "upload_offset")
    assert reply.headers["upload-offset"] == "100"
    assert part_file(store, upload_id) == b"a" * 100


def test_a_host_outside_allowed_hosts_gets_djangos_answer(apps, key, store) -> None:
    application, _ = apps
    upload_id = start_upload(key, 10)
    path = f"/api/v1/uploads/{upload_id}"
    the_scope = scope("PUT", path, chunk_headers(key, 0, 10))
    the_scope["headers"] = [(b"host", b"evil.example"), *the_scope["headers"][1:]]

    async def scenario() -> tuple[int, bytes]:
        communicator = ApplicationCommunicator(application, the_scope)
        await communicator.send_input({"type": "http.request", "body": b"x" * 10})
        start = await communicator.receive_output(10)
        body = await communicator.receive_output(10)
        await communicator.wait(10)
        return start["status"], body.get("body", b"")

    status, _ = run(scenario)
    assert status == 400
    assert part_file(store, upload_id) == b""


def test_if_the_checks_break_django_gets_the_whole_body(apps, key, store, monkeypatch) -> None:
    from webapp.edge import stream_upload

    application, _ = apps
    payload = os.urandom(10_000)
    upload_id = start_upload(key, len(payload))
    monkeypatch.setattr(stream_upload, "PIPE_BYTES", 1000)  # the feed waits after one message
    warnings: list[str] = []
    monkeypatch.setattr(stream_upload.logger, "warning", lambda msg, *a, **k: warnings.append(msg))

    def broken(scope: Any, upload_id: str) -> None:
        import time

        time.sleep(0.2)  # the body has arrived meanwhile, in part into the pipe
        raise RuntimeError("the database went away")

    monkeypatch.setattr(stream_upload, "_admit", broken)
    parts = [payload[i : i + 1000] for i in range(0, len(payload), 1000)]
    path = f"/api/v1/uploads/{upload_id}"
    reply = run(
        lambda: exchange(application, "PUT", path, chunk_headers(key, 0, len(payload)), parts)
    )
    assert reply.status == 200, reply.body  # answered by Django's view
    assert reply.json()["offset"] == len(payload)
    assert part_file(store, upload_id) == payload
    assert len(warnings) == 1


# --------------------------------------------------------------------------- disconnects


def test_a_client_that_leaves_mid_body_keeps_what_arrived(apps, key, store) -> None:
    application, _ = apps
    payload = os.urandom(CHUNK)
    upload_id = start_upload(key, 2 * CHUNK)
    path = f"/api/v1/uploads/{upload_id}"
    half = CHUNK // 2

    async def scenario() -> list[dict[str, Any]]:
        communicator = ApplicationCommunicator(
            application, scope("PUT", path, chunk_headers(key, 0, CHUNK))
        )
        for start in range(0, half, 4096):
            piece = payload[start : start + 4096]
            await communicator.send_input(
                {"type": "http.request", "body": piece, "more_body": True}
            )
        await communicator.send_input({"type": "http.disconnect"})
        await communicator.wait(10)
        sent = []
        while not communicator.output_queue.empty():
            sent.append(communicator.output_queue.get_nowait())
        return sent

    assert run(scenario) == []  # nobody to answer
    assert status_of(key, upload_id)["offset"] == half
    assert part_file(store, upload_id) == payload[:half]
    # The client resumes where the server says.
    rest = payload[half:] + os.urandom(CHUNK)
    reply = put(application, upload_id, rest, chunk_headers(key, half, len(rest)))
    assert reply.json()["offset"] == 2 * CHUNK
    assert part_file(store, upload_id) == payload + rest[half:]


def test_a_body_shorter_than_its_length_reports_what_arrived(apps, key, store) -> None:
    application, _ = apps
    upload_id = start_upload(key, CHUNK)
    reply = put(application, upload_id, b"z" * 100, chunk_headers(key, 0, 1000))
    assert reply.status == 200
    assert reply.json()["offset"] == 100


# --------------------------------------------------------------------------- the parts


def test_the_pipe_holds_back_the_sender_until_the_reader_reads() -> None:
    from webapp.edge.stream_upload import BodyPipe

    async def scenario() -> tuple[list[bytes], int]:
        pipe = BodyPipe(asyncio.get_running_loop(), limit=10)
        assert await pipe.put(b"0123456789")  # full now
        blocked = asyncio.create_task(pipe.put(b"abc"))
        await asyncio.sleep(0.05)
        assert not blocked.done()
        got: list[bytes] = []
        reader = threading.Thread(target=lambda: got.extend([pipe.read(4), pipe.read(100)]))
        reader.start()
        assert await asyncio.wait_for(blocked, 5)
        pipe.close()
        await asyncio.get_running_loop().run_in_executor(None, reader.join)
        got.append(pipe.read(100))
        got.append(pipe.read(100))
        pipe.abandon()
        return got, int(await pipe.put(b"late"))

    got, late = run(scenario)
    assert got == [b"0123", b"456789", b"abc", b""]
    assert late == 0  # nobody reads any more


def test_write_chunk_starts_writeback_as_it_goes(tmp_path, monkeypatch) -> None:
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(
        chunks, "_start_writeback", lambda fd, offset, count: calls.append((offset, count))
    )
    # The buffered path (where O_DIRECT is unavailable or turned off).
    store = UploadStore(tmp_path, max_bytes=1 << 30, direct_io=False)
    data = os.urandom(3 * chunks.WRITEBACK_BYTES + 10)
    upload = store.create("m.onnx", size=len(data))
    import io

    assert store.write_chunk(upload.id, 0, io.BytesIO(data), len(data)) == len(data)
    step = chunks.WRITEBACK_BYTES
    assert calls == [(0, step), (step, step), (2 * step, step)]
    monkeypatch.setattr(chunks, "_start_writeback", None)  # not Linux: still works
    upload = store.create("m.onnx", size=len(data))
    assert store.write_chunk(upload.id, 0, io.BytesIO(data), len(data)) == len(data)


def test_chunks_large_enough_for_direct_writes_arrive_intact(apps, key, store, settings):
    """Chunks past ``DIRECT_MIN_BYTES`` (written with O_DIRECT where the file system allows),
    in socket-sized messages, starting mid-block: the same bytes and answers as small ones."""
    from model_store.uploads.direct_io import DIRECT_MIN_BYTES

    settings.UPLOAD_CHUNK_BYTES = 4 * DIRECT_MIN_BYTES
    application, _ = apps
    payload = os.urandom(5 * DIRECT_MIN_BYTES + 4321)
    upload_id = start_upload(key, len(payload))
    path = f"/api/v1/uploads/{upload_id}"
    offset = 0
    for end in (DIRECT_MIN_BYTES + 99, 4 * DIRECT_MIN_BYTES, len(payload)):
        piece = payload[offset:end]
        messages = [piece[at : at + 262_144] for at in range(0, len(piece), 262_144)]
        headers = chunk_headers(key, offset, len(piece))
        reply = run(lambda: exchange(application, "PUT", path, headers, messages))  # noqa: B023
        assert reply.status == 200, reply.body
        offset = end
        assert reply.json() == {"id": upload_id, "offset": offset, "size": len(payload)}
    assert part_file(store, upload_id) == payload
    assert status_of(key, upload_id)["offset"] == len(payload)
