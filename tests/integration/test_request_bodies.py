"""Security finding 3: a body from someone not signed in is refused before it is read.

Before, Django's CSRF middleware parsed an anonymous multipart POST (file parts over 2 MiB
spooled to temporary files) before the sign-in check, and nothing capped the body. Here a
real server (pytest-django's live server) gets the headers of a 200 MB multipart POST and
only the first 64 KiB of its body: the answer must arrive anyway, and nothing is written.
"""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlparse

import pytest

pytestmark = pytest.mark.integration

BOUNDARY = "----hub-test-boundary"
DECLARED = 200 * 1000 * 1000


def _post_headers_and_a_little(url: str, path: str, extra: str = "") -> tuple[int, bytes]:
    """Send the headers of a 200 MB POST and 64 KiB of body; return the status and answer."""
    parsed = urlparse(url)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {parsed.hostname}:{parsed.port}\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
        f"Content-Length: {DECLARED}\r\n{extra}\r\n"
    ).encode()
    part = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="m.onnx"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode() + b"\0" * (64 << 10)
    with socket.create_connection((parsed.hostname, parsed.port), timeout=10) as sock:
        sock.sendall(head + part)
        answer = b""
        while b"\r\n\r\n" not in answer:
            data = sock.recv(65536)  # a timeout here means the server waits for the body
            if not data:
                break
            answer += data
    status = int(answer.split(b" ", 2)[1])
    return status, answer


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/api/v1/models/anything/versions", 401),
        ("/api/v1/uploads/0123456789abcdef0123456789abcdef", 401),
        ("/models/new/", 403),
        ("/models/anything/versions/new/", 403),
    ],
)
def test_an_anonymous_200_mb_post_is_answered_before_its_body_and_writes_nothing(
    live_server, settings, tmp_path: Path, path: str, status: int
) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    settings.FILE_UPLOAD_TEMP_DIR = str(spool)
    got, answer = _post_headers_and_a_little(live_server.url, path)
    assert got == status, answer
    assert list(spool.iterdir()) == []


def test_a_signed_in_body_over_the_limit_is_refused_with_the_limit(
    live_server, operator, settings, tmp_path: Path
) -> None:
    from tests.fixtures.users import token_for

    spool = tmp_path / "spool"
    spool.mkdir()
    settings.FILE_UPLOAD_TEMP_DIR = str(spool)
    settings.UPLOAD_MAX_BYTES = 100 << 20
    token = token_for(operator)
    got, answer = _post_headers_and_a_little(
        live_server.url, "/api/v1/models/anything/versions", f"Authorization: Token {token}\r\n"
    )
    assert got == 413, answer
    assert b"X-Max-Body-Bytes: 104857600" in answer
    assert list(spool.iterdir()) == []
