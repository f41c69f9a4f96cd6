"""Creating versions through the API and the pages (the worker side is an integration test)."""

from __future__ import annotations

import hashlib
import io
import json

import pytest
from django.test import Client

from model_store.targets import get_target
from tests.fixtures.hosts import worker_probes_host
from tests.fixtures.triton import mlp_onnx_bytes
from webapp.registry.build.option_forms import OptionsForm
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs.models import Event, Job


@pytest.fixture(autouse=True)
def store(settings, tmp_path):
    settings.MODEL_STORE_ROOT = tmp_path / "store"
    return tmp_path / "store"


@pytest.fixture(autouse=True)
def mlp(db, operator) -> Model:
    """The model every test here adds versions to (``api`` is ``operator``'s client)."""
    return Model.objects.create(name="mlp", target="onnxruntime", created_by=operator)


def chunked(api, payload: bytes, filename: str = "model.onnx") -> str:
    upload = api(
        "post", "/api/v1/uploads", data=json.dumps({"filename": filename, "size": len(payload)}),
        content_type="application/json",
    ).json()  # fmt: skip
    api(
        "put", f"/api/v1/uploads/{upload['id']}", data=payload,
        content_type="application/octet-stream", HTTP_UPLOAD_OFFSET="0",
    )  # fmt: skip
    return upload["id"]


def create(api, body: dict):
    return api(
        "post",
        "/api/v1/models/mlp/versions",
        data=json.dumps(body),
        content_type="application/json",
    )


def test_a_finished_upload_becomes_version_1_with_a_queued_job(api, store) -> None:
    payload = mlp_onnx_bytes()
    upload_id = chunked(api, payload)
    sha = hashlib.sha256(payload).hexdigest()
    response = create(api, {"upload_id": upload_id, "sha256": sha, "options": {"fp16": False}})
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["version"] == 1 and body["status"] == "queued"
    version = Version.objects.get(model__name="mlp", number=1)
    assert version.source_sha256 == sha
    assert Job.objects.get(uuid=body["job"]).steps[0]["name"] == "validate"
    assert Event.objects.filter(kind="version.uploaded", version=version).exists()
    stored = store / "sources" / "mlp" / "1" / "model.onnx"
    assert stored.read_bytes() == payload
    assert not any((store / "uploads").iterdir())  # the upload was spent


def test_a_sha256_that_does_not_match_is_refused(api, store) -> None:
    upload_id = chunked(api, mlp_onnx_bytes())
    response = create(api, {"upload_id": upload_id, "sha256": "0" * 64})
    assert response.status_code == 400
    assert response.json()["code"] == "upload_corrupt"
    assert not Version.objects.exists()


def test_an_unfinished_upload_says_how_much_is_missing(api) -> None:
    upload = api(
        "post", "/api/v1/uploads", data=json.dumps({"filename": "m.onnx", "size": 100}),
        content_type="application/json",
    ).json()  # fmt: skip
    response = create(api, {"upload_id": upload["id"]})
    assert response.status_code == 400
    assert "0 of 100 bytes" in response.json()["error"]


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"no_such_option": 1}, "no_such_option"),
        ({"max_batch_size": "lots"}, "max_batch_size"),
        ({"ort_optimization_level": "turbo"}, "ort_optimization_level"),
        ("not an object", "JSON object"),
    ],
)
def test_bad_options_are_refused_naming_the_field(api, options, needle: str) -> None:
    upload_id = chunked(api, mlp_onnx_bytes())
    response = create(api, {"upload_id": upload_id, "options": options})
    assert response.status_code == 400
    assert needle in response.json()["error"]
    assert not Version.objects.exists()


def test_the_same_file_again_is_offered_instead_of_stored_twice(api) -> None:
    payload = mlp_onnx_bytes()
    assert create(api, {"upload_id": chunked(api, payload)}).status_code == 201
    again = create(api, {"upload_id": chunked(api, payload)})
    assert again.status_code == 409
    assert again.json()["code"] == "duplicate"
    forced = create(api, {"upload_id": chunked(api, payload), "allow_duplicate": True})
    assert forced.status_code == 201 and forced.json()["version"] == 2


def test_multipart_upload_of_a_small_file_works_too(api) -> None:
    file = io.BytesIO(mlp_onnx_bytes())
    file.name = "my model.onnx"  # spaces are common; they become underscores
    response = api("post", "/api/v1/models/mlp/versions", data={"file": file})
    assert response.status_code == 201, response.content
    assert Version.objects.get().source_filename == "my_model.onnx"


def test_a_filename_with_path_parts_is_refused(api) -> None:
    file = io.BytesIO(mlp_onnx_bytes())
    file.name = "model.txt"
    response = api("post", "/api/v1/models/mlp/versions", data={"file": file})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_upload"


def test_only_admins_override_a_verification(api, admin_api, store) -> None:
    create(api, {"upload_id": chunked(api, mlp_onnx_bytes())})
    version = Version.objects.get()
    version.status = Version.Status.READY
    version.verification = {"status": "failed"}
    version.save()
    body = json.dumps({"reason": "checked by hand on 500 images"})
    denied = api(
        "post", "/api/v1/models/mlp/versions/1/override", data=body, content_type="application/json"
    )
    assert denied.status_code == 403
    ok = admin_api(
        "post", "/api/v1/models/mlp/versions/1/override", data=body, content_type="application/json"
    )
    assert ok.status_code == 200, ok.content
    assert ok.json()["publishable"] is True
    assert Event.objects.filter(kind="verification.override").get().actor.username == "ada"


def test_cancel_marks_the_job_and_is_recorded(api) -> None:
    job_id = create(api, {"upload_id": chunked(api, mlp_onnx_bytes())}).json()["job"]
    response = api("post", f"/api/v1/jobs/{job_id}/cancel")
    assert response.status_code == 200
    assert response.json()["cancel_requested"] is True
    assert api("get", "/api/v1/jobs/not-a-uuid").status_code == 404


def test_targets_describe_their_options_and_availability(api) -> None:
    worker_probes_host()
    targets = {t["name"]: t for t in api("get", "/api/v1/targets").json()["targets"]}
    assert set(targets) == {"onnxruntime", "npu_ge", "acl"}
    assert targets["acl"]["needs_cann"] and not targets["acl"]["hardware_verified"]
    assert targets["acl"]["status"]["available"] is False
    assert "ATC_PATH" in targets["acl"]["status"]["reason"]
    assert "max_batch_size" in targets["onnxruntime"]["options_schema"]["properties"]


def test_the_options_form_keeps_automatic_choices_automatic() -> None:
    form = OptionsForm(
        get_target("onnxruntime"), {"opt_simplify": "on", "opt_ort_optimization_level": "basic"}
    )
    assert form.is_valid(), form.errors
    options = form.options()
    assert "dynamic_batching" not in options and "max_batch_size" not in options
    assert options["simplify"] is True and options["fp16"] is False


def test_pages_show_versions_jobs_and_the_upload_form(api, operator) -> None:
    job_id = create(api, {"upload_id": chunked(api, mlp_onnx_bytes())}).json()["job"]
    client = Client()
    client.force_login(operator)
    model_page = client.get("/models/mlp/").content.decode()
    assert 'id="upload-form"' in model_page and "v1" in model_page
    assert "Compile options for onnxruntime" in model_page
    assert "Validate the ONNX model" in client.get(f"/jobs/{job_id}/").content.decode()
    assert "mlp" in client.get("/jobs/").content.decode()
    version_page = client.get("/models/mlp/versions/1/").content.decode()
    assert "model.onnx" in version_page
    assert client.get("/models/mlp/versions/1/download/source/").status_code == 200
    assert client.get("/models/mlp/versions/1/download/artifact/").status_code == 404
    assert client.get("/jobs/nope/").status_code == 404


def _page_create(client: Client, body: dict):
    """The upload form's last step, as upload.js posts it (the form's default options)."""
    return client.post("/models/mlp/versions/new/", body)


def test_the_upload_form_and_the_api_make_a_version_the_same_way(api, operator) -> None:
    client = Client()
    client.force_login(operator)
    payload = mlp_onnx_bytes()
    sha = hashlib.sha256(payload).hexdigest()
    page = _page_create(client, {"upload_id": chunked(api, payload), "sha256": sha})
    assert page.status_code == 201, page.content
    assert page.json()["version"] == 1 and page.json()["job_url"].startswith("/jobs/")
    assert Event.objects.filter(kind="version.uploaded", version__number=1).exists()
    again = _page_create(client, {"upload_id": chunked(api, payload)})
    assert again.status_code == 409 and again.json()["code"] == "duplicate"
    forced = _page_create(client, {"upload_id": chunked(api, payload), "allow_duplicate": "1"})
    assert forced.status_code == 201 and forced.json()["version"] == 2


def test_the_upload_form_refuses_what_the_api_refuses(api, operator, admin_user) -> None:
    client = Client()
    client.force_login(operator)
    corrupt = _page_create(
        client, {"upload_id": chunked(api, mlp_onnx_bytes()), "sha256": "0" * 64}
    )
    assert corrupt.status_code == 400
    assert corrupt.json()["code"] == "upload_corrupt" and corrupt.json()["upload_spent"] is True
    # Another person's upload is not there for you, on the page as in the API.
    other = Client()
    other.force_login(admin_user)
    theirs = other.post("/models/mlp/versions/new/", {"upload_id": chunked(api, b"x" * 10)})
    assert theirs.status_code == 404 and theirs.json()["code"] == "upload_not_found"
    assert (
        create(api, {"upload_id": "0" * 32}).json()["code"]
        == _page_create(client, {"upload_id": "0" * 32}).json()["code"]
    )
    assert not Version.objects.exists()
