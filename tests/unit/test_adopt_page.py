"""The admin page that adopts an existing Triton repository (/server/adopt/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.pipeline import upload
from tests.fixtures.team_repository import build_team_repository
from tests.fixtures.triton import mlp_onnx_bytes
from tests.fixtures.users import signed_in
from webapp.registry.catalogue.models import Model
from webapp.registry.jobs.models import Job

pytestmark = pytest.mark.django_db


@pytest.fixture
def repo(tmp_path: Path, settings) -> Path:  # type: ignore[no-untyped-def]
    settings.MODEL_STORE_ROOT = tmp_path / "store"
    return build_team_repository(tmp_path / "team")


def test_only_admins_may_adopt(operator_client, repo: Path) -> None:  # type: ignore[no-untyped-def]
    assert operator_client.get("/server/adopt/", {"path": str(repo)}).status_code == 403
    response = operator_client.post("/server/adopt/", {"path": str(repo), "adopt": "1"})
    assert response.status_code == 403 and Model.objects.count() == 0


def test_the_page_shows_the_scan_and_adopts_the_ticked_models(admin_user, repo: Path) -> None:  # type: ignore[no-untyped-def]
    client = signed_in(admin_user)
    page = client.get("/server/adopt/", {"path": str(repo)}).content.decode()
    assert 'data-model="doubler" data-action="adopt"' in page
    assert 'data-model="broken" data-action="not_adoptable"' in page
    assert "config.pbtxt cannot be read at line 4" in page
    assert "Triton&#x27;s environment" in page or "Triton's environment" in page
    assert Model.objects.count() == 0  # the dry run changed nothing

    Model.objects.create(name="classifier", target="onnxruntime")
    page = client.get("/server/adopt/", {"path": str(repo)}).content.decode()
    assert 'data-model="classifier" data-action="clash"' in page

    chosen = {"path": str(repo), "chosen": ["classifier", "doubler"],
              "name-classifier": "team_classifier", "name-doubler": "doubler"}  # fmt: skip
    preview = client.post("/server/adopt/", {**chosen, "preview": "1"}).content.decode()
    assert "as team_classifier" in preview and Model.objects.count() == 1

    response = client.post("/server/adopt/", {**chosen, "adopt": "1"})
    assert response.status_code == 302 and response["Location"] == "/jobs/"
    assert sorted(Model.objects.values_list("name", flat=True)) == [
        "classifier", "doubler", "team_classifier"]  # fmt: skip
    assert Job.objects.filter(kind="adopt").count() == 3  # team_classifier v1, v2; doubler v1


@pytest.mark.parametrize("path", ["", "relative", "/no/such/dir", "/" + "x" * 5000])
def test_bad_paths_are_messages_not_errors(admin_user, path: str) -> None:  # type: ignore[no-untyped-def]
    response = signed_in(admin_user).get("/server/adopt/", {"path": path})
    assert response.status_code == 200


def test_adopted_models_have_working_pages(admin_user, repo: Path, admin_api) -> None:  # type: ignore[no-untyped-def]
    from django.core.management import call_command

    call_command("adopt", str(repo), "--only", "pipeline", "--only", "ge_one_file",
                 "--only", "bare_onnx", stdout=__import__("io").StringIO())  # fmt: skip
    client = signed_in(admin_user)
    for name in ("doubler", "pipeline", "classifier", "ge_one_file", "bare_onnx"):
        for url in (f"/models/{name}/", f"/models/{name}/versions/1/", f"/models/{name}/try/",
                    f"/models/{name}/metrics/", f"/models/{name}/perf/"):  # fmt: skip
            response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)
        for url in (f"/api/v1/models/{name}", f"/api/v1/models/{name}/versions/1",
                    f"/api/v1/models/{name}/versions/1/memory"):  # fmt: skip
            response = admin_api("get", url)
            assert response.status_code in (200, 404), (url, response.status_code)
    assert client.get("/models/").status_code == 200
    assert client.get("/jobs/").status_code == 200
    for job in Job.objects.filter(kind="adopt"):
        assert client.get(f"/jobs/{job.uuid}/").status_code == 200
        assert admin_api("get", f"/api/v1/jobs/{job.uuid}").json()["kind"] == "adopt"
    listed = {m["name"]: m["target"] for m in admin_api("get", "/api/v1/models").json()["models"]}
    assert listed["doubler"] == "external" and listed["classifier"] == "onnxruntime"
    refused = upload(admin_api, "doubler", mlp_onnx_bytes())
    assert refused.status_code == 409 and refused.json()["code"] == "external_model"
    page = client.get("/models/doubler/").content.decode()
    assert 'badge-idle" title="Adopted from an existing repository' in page
