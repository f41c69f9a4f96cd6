"""The web process SIGKILLed in the middle of a chunked upload.

A client sends an 8 MiB model in chunks (``POST /api/v1/uploads``, ``PUT`` at
``Upload-Offset``). In the middle of a large chunk the web process (uvicorn) is killed; the
launcher restarts it. The client asks the server where to resume (``GET
/api/v1/uploads/ID``), sends the rest from there, and the version it creates has the file's
SHA-256: the bytes that arrived before the kill were kept, and none twice.
"""

from __future__ import annotations

import hashlib
import socket
import time

import pytest

from tests.faults.conftest import Hub, moment_when, report
from tests.fixtures.triton import mlp_onnx_bytes

pytestmark = [pytest.mark.integration, pytest.mark.faults]

MIB = 1 << 20


def _send_until_cut(
    hub: Hub, upload_id: str, offset: int, body: bytes, kill_after: int
) -> tuple[int, dict[str, int], float]:
    """PUT ``body`` at ``offset`` slowly; SIGKILL the web process once ``kill_after`` bytes of
    it are sent; keep sending until the connection breaks. The bytes sent, the restart counts
    before the kill, and its moment."""
    with socket.create_connection((hub.host, hub.port), timeout=30) as sock:
        head = (
            f"PUT /api/v1/uploads/{upload_id} HTTP/1.1\r\nHost: {hub.host}:{hub.port}\r\n"
            f"Authorization: {hub.headers['Authorization']}\r\n"
            f"Upload-Offset: {offset}\r\nContent-Type: application/octet-stream\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        sock.sendall(head.encode())
        sent, before, killed = 0, {}, 0.0
        try:
            while sent < len(body):
                piece = body[sent : sent + 256 * 1024]
                sock.sendall(piece)
                sent += len(piece)
                if sent >= kill_after:
                    time.sleep(0.5)  # let the server write what it received
                    before, killed = hub.kill("web"), time.monotonic()
                    kill_after = len(body) + 1
                time.sleep(0.05)
        except OSError:
            pass
        return sent, before, killed


def test_web_restart_during_a_chunked_upload(healthy_hub: Hub) -> None:
    """Time budget: 45 s (an 8 MiB upload cut once, resumed, then built)."""
    hub = healthy_hub
    hub.ensure_model("upload-restart")
    payload = mlp_onnx_bytes(in_features=1024, out_features=2048, seed=61)
    assert len(payload) > 8 * MIB
    digest = hashlib.sha256(payload).hexdigest()
    created = hub.ok(
        "POST", "/api/v1/uploads",
        {"filename": "big.onnx", "size": len(payload), "sha256": digest},
    )  # fmt: skip
    upload_id = created["id"]
    first = hub.ok(
        "PUT", f"/api/v1/uploads/{upload_id}", raw=payload[:MIB],
        headers={"Upload-Offset": "0", "Content-Type": "application/octet-stream"},
    )  # fmt: skip
    assert first["offset"] == MIB

    # The second chunk is the rest of the file; the web process dies 3 MiB into it.
    sent, before, killed = _send_until_cut(hub, upload_id, MIB, payload[MIB:], 3 * MIB)
    assert before and sent < len(payload) - MIB, "the chunk went through before the kill"
    back = hub.wait_restarted("web", before)
    status = hub.ok("GET", f"/api/v1/uploads/{upload_id}")
    offset = status["offset"]
    # What arrived before the kill is kept (at least the first chunk, and part of the second).
    assert MIB < offset <= MIB + sent, (offset, sent)
    assert status["state"] == "receiving"

    # Resume from the server's offset, in 1 MiB chunks.
    while offset < len(payload):
        reply = hub.ok(
            "PUT", f"/api/v1/uploads/{upload_id}", raw=payload[offset : offset + MIB],
            headers={"Upload-Offset": str(offset), "Content-Type": "application/octet-stream"},
        )  # fmt: skip
        offset = reply["offset"]
    resumed = time.monotonic()
    version = hub.ok(
        "POST", "/api/v1/models/upload-restart/versions",
        {"upload_id": upload_id, "sha256": digest},
    )  # fmt: skip
    number = version["version"]
    assert hub.versions("upload-restart")[number]["source"]["sha256"] == digest
    assert hub.wait_job(version["job"])["state"] == "succeeded"
    report(
        f"web SIGKILLed {sent / MIB:.1f} MiB into a chunk: resumed at byte {status['offset']}, "
        "SHA-256 matched",
        [
            ("the web process back after the kill", back - killed),
            ("the upload complete after the kill", resumed - killed),
        ],
    )
    moment_when("the hub healthy", lambda: hub.health().get("status") == "ok", 60)
