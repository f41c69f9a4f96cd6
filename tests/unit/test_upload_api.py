"""Chunked, resumable uploads through the API: resume points, refusals, cancel."""

from __future__ import annotations

import hashlib
import os

import pytest

from tests.fixtures.api import ApiClient
from tests.fixtures.users import make_user


@pytest.fixture(autouse=True)
def store(settings, tmp_path):
    settings.MODEL_STORE_ROOT = tmp_path / "store"
    settings.UPLOAD_CHUNK_BYTES = 64 * 1024
    settings.UPLOAD_MAX_BYTES = 1 << 20
    return tmp_path / "store"


def put(api, upload_id: str, chunk: bytes, offset: int | None = None):
    """PUT one chunk of ``upload_id``, at ``offset`` when given (the Upload-Offset header)."""
    headers = {} if offset is None else {"Upload-Offset": str(offset)}
    return api("put", f"/api/v1/uploads/{upload_id}", raw=chunk, headers=headers)


def start(api, size: int, filename: str = "model.onnx") -> str:
    response = api("post", "/api/v1/uploads", {"filename": filename, "size": size})
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["offset"] == 0 and body["chunk_bytes"] == 64 * 1024
    return body["id"]


def test_chunks_arrive_in_order_and_the_offset_is_the_resume_point(api, store) -> None:
    payload = os.urandom(150_000)
    upload_id = start(api, len(payload))
    first = put(api, upload_id, payload[:65536], 0)
    assert first.json()["offset"] == 65536
    # A client that lost its place asks, then continues from the server's offset.
    assert api("get", f"/api/v1/uploads/{upload_id}").json()["offset"] == 65536
    rest = put(api, upload_id, payload[65536:131072], 65536)
    assert rest.json()["offset"] == 131072
    last = put(api, upload_id, payload[131072:], 131072)
    assert last.json()["offset"] == len(payload)
    part = next((store / "uploads").rglob("data.part"))
    assert hashlib.sha256(part.read_bytes()).hexdigest() == hashlib.sha256(payload).hexdigest()


def test_a_chunk_at_the_wrong_offset_is_refused_with_the_right_one(api) -> None:
    upload_id = start(api, 100_000)
    put(api, upload_id, b"a" * 1000, 0)
    response = put(api, upload_id, b"b" * 1000, 5000)
    assert response.status_code == 409
    assert response["Upload-Offset"] == "1000"
    assert response.json()["code"] == "upload_offset"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"filename": "../evil.onnx", "size": 10}, "invalid_upload"),
        ({"filename": "a/b.onnx", "size": 10}, "invalid_upload"),
        ({"filename": "notes.txt", "size": 10}, "invalid_upload"),
        ({"filename": "model.onnx", "size": 0}, "invalid_upload"),
        ({"filename": "model.onnx", "size": 10 << 20}, "upload_too_large"),
        ({"filename": "model.onnx", "size": "10"}, "invalid_field"),
        ({"size": 10}, "missing_field"),
    ],
)
def test_bad_upload_requests_are_refused_with_a_reason(api, body: dict, code: str) -> None:
    response = api("post", "/api/v1/uploads", body)
    assert 400 <= response.status_code < 500
    assert response.json()["code"] == code
    assert response.json()["error"]


def test_a_chunk_without_an_offset_header_is_refused(api) -> None:
    upload_id = start(api, 10)
    response = put(api, upload_id, b"x" * 10)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_offset"


def test_a_chunk_beyond_the_declared_size_is_refused(api) -> None:
    upload_id = start(api, 10)
    response = put(api, upload_id, b"x" * 20, 0)
    assert response.status_code == 413
    assert response.json()["code"] == "upload_too_large"


def test_cancel_removes_everything_received(api, store) -> None:
    upload_id = start(api, 1000)
    put(api, upload_id, b"x" * 500, 0)
    assert api("delete", f"/api/v1/uploads/{upload_id}").status_code == 204
    assert api("get", f"/api/v1/uploads/{upload_id}").status_code == 404
    assert not any((store / "uploads").iterdir())


@pytest.mark.parametrize("upload_id", ["..%2F..%2Fetc", "abc", "0" * 31 + "g"])
def test_hostile_upload_ids_find_nothing(api, upload_id: str) -> None:
    assert api("get", f"/api/v1/uploads/{upload_id}").status_code == 404


def test_someone_elses_upload_is_invisible(api, store) -> None:
    upload_id = start(api, 1000)
    other = ApiClient(make_user("olga", "operator"))
    response = other("get", f"/api/v1/uploads/{upload_id}")
    assert response.status_code == 404


def test_viewers_cannot_upload(viewer_api, store) -> None:
    response = viewer_api("post", "/api/v1/uploads", {"filename": "m.onnx", "size": 10})
    assert response.status_code == 403


# --------------------------------------------------------------------------- the disk is finite


def test_open_uploads_are_capped_per_person_in_count_and_bytes(api, store, settings) -> None:
    settings.UPLOADS_OPEN_PER_USER = 2
    start(api, 1000)
    start(api, 1000)
    third = api("post", "/api/v1/uploads", {"filename": "m.onnx", "size": 1000})
    assert third.status_code == 409 and third.json()["code"] == "upload_quota"
    assert "limit is 2" in third.json()["error"]
    settings.UPLOADS_OPEN_PER_USER = 10
    settings.UPLOAD_OPEN_BYTES_PER_USER = 3000
    over = api("post", "/api/v1/uploads", {"filename": "m.onnx", "size": 1001})
    assert over.status_code == 409 and over.json()["code"] == "upload_quota"
    assert len(list((store / "uploads").iterdir())) == 2  # nothing half-made


def test_an_upload_that_would_leave_the_disk_under_its_floor_gets_507_with_the_numbers(
    api, store, settings
) -> None:
    import shutil

    start(api, 10)  # makes the store's folders
    free = shutil.disk_usage(store).free
    # Far above what is free: other processes on the machine may free space meanwhile.
    settings.STORE_MIN_FREE_BYTES = free + (1 << 30)
    refused = api("post", "/api/v1/uploads", {"filename": "m.onnx", "size": 1000})
    assert refused.status_code == 507, refused.content
    assert refused.json()["code"] == "insufficient_storage"
    assert "free" in refused.json()["error"] and "must stay free" in refused.json()["error"]
    assert len(list((store / "uploads").iterdir())) == 1


def test_a_chunk_that_would_fill_the_disk_is_refused_before_a_byte_lands(
    api, store, settings
) -> None:
    import shutil

    upload_id = start(api, 4096)
    # Any byte crosses it, even if other processes free space meanwhile.
    settings.STORE_MIN_FREE_BYTES = shutil.disk_usage(store).free + (1 << 30)
    refused = put(api, upload_id, b"x" * 4096, 0)
    assert refused.status_code == 507
    settings.STORE_MIN_FREE_BYTES = 0
    assert api("get", f"/api/v1/uploads/{upload_id}").json()["offset"] == 0


def test_abandoned_uploads_are_removed_by_the_scheduled_task(api, store, settings) -> None:
    from workers.tasks.uploads import remove_abandoned

    old_id = start(api, 100)
    fresh_id = start(api, 100)
    long_ago = (store / "uploads" / old_id).stat().st_mtime - 3 * 86400
    for path in (store / "uploads" / old_id).iterdir():
        os.utime(path, (long_ago, long_ago))
    os.utime(store / "uploads" / old_id, (long_ago, long_ago))
    assert "workers.tasks.uploads.remove_abandoned" in {
        entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()
    }
    assert remove_abandoned.apply().get() == {"removed": [old_id]}
    assert not (store / "uploads" / old_id).exists()
    assert (store / "uploads" / fresh_id).exists()
