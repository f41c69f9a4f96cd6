"""The catalogue (issue 18): edit, tag, own, filter, sort, page and retire models.

API and pages; the retire job runs here without a broker (``serving.run_job``, as the worker
calls it) on models that are not served, so Triton is not needed. Retiring a serving model
(unload from a real Triton) is in the browser journey and tests/integration.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client

from tests.fixtures.users import make_user, signed_in
from webapp.registry.catalogue.models import Model, ModelTag, Version
from webapp.registry.catalogue.storage import get_store
from webapp.registry.jobs.models import Event, Job
from webapp.registry.serving import switch as serving


@pytest.fixture(autouse=True)
def _no_triton(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    settings.MODEL_STORE_ROOT = tmp_path / "store"
    settings.TRITON_URL = settings.TRITON_GRPC_URL = "127.0.0.1:9"


def _model(name: str, owner=None, **fields) -> Model:  # type: ignore[no-untyped-def]
    return Model.objects.create(name=name, created_by=owner, owner=owner, **fields)


def _tag(model: Model, *labels: str) -> None:
    ModelTag.objects.bulk_create(ModelTag(model=model, label=t) for t in labels)


# --------------------------------------------------------------------------- edit


def test_an_operator_edits_description_tags_and_owner(api, operator) -> None:
    _model("resnet", operator)
    make_user("vera", "viewer")
    response = api(
        "patch",
        "/api/v1/models/resnet",
        {"description": "ImageNet", "tags": ["Team:Vision", "stage:prod", "team:vision"],
         "owner": "vera"},
    )  # fmt: skip
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["tags"] == ["stage:prod", "team:vision"]
    assert body["owner"] == "vera" and body["description"] == "ImageNet"
    event = Event.objects.get(kind="model.edited")
    assert event.data["tags"]["added"] == ["team:vision", "stage:prod"]
    # A key left out stays; null clears the owner; [] clears the tags.
    body = api("patch", "/api/v1/models/resnet", {"owner": None, "tags": []}).json()
    assert body["owner"] is None and body["tags"] == [] and body["description"] == "ImageNet"


@pytest.mark.parametrize(
    ("body", "code"),
    [({"tags": ["bad tag"]}, "invalid_tag"), ({"tags": ["x" * 41]}, "invalid_tag"),
     ({"tags": ["-lead"]}, "invalid_tag"),
     ({"tags": [f"t{i}" for i in range(21)]}, "too_many_tags"),
     ({"tags": "team:vision"}, "invalid_field"), ({"tags": [5]}, "invalid_field"),
     ({"owner": "nobody-here"}, "unknown_owner"), ({"description": "d" * 2001}, "invalid_field"),
     ({"owner": 7}, "invalid_field")],
)  # fmt: skip
def test_bad_edits_are_a_clear_400(api, operator, body: dict, code: str) -> None:
    _model("resnet", operator)
    response = api("patch", "/api/v1/models/resnet", body)
    assert response.status_code == 400, response.content
    assert response.json()["code"] == code
    assert response.json()["error"]


def test_viewers_cannot_edit_or_retire(viewer_api, viewer, operator) -> None:
    _model("resnet", operator)
    assert viewer_api("patch", "/api/v1/models/resnet", {"tags": ["a"]}).status_code == 403
    assert viewer_api("delete", "/api/v1/models/resnet").status_code == 403
    page = signed_in(viewer)
    assert page.get("/models/resnet/edit/").status_code == 403
    assert page.post("/models/resnet/retire/").status_code == 403


def test_editing_an_unknown_model_is_a_404(api) -> None:
    assert api("patch", "/api/v1/models/ghost", {"tags": []}).status_code == 404


def test_the_edit_page_saves_and_shows_errors_in_place(operator) -> None:
    _model("resnet", operator)
    page = signed_in(operator)
    response = page.post(
        "/models/resnet/edit/", {"description": "d", "tags": "a, b!", "owner": "otto"}
    )
    assert response.status_code == 400
    assert "is not allowed" in response.content.decode()
    response = page.post(
        "/models/resnet/edit/", {"description": "d", "tags": "team:vision stage:dev", "owner": ""}
    )
    assert response.status_code == 302
    model = Model.objects.get(name="resnet")
    assert model.tag_labels == ["stage:dev", "team:vision"] and model.owner is None
    detail = page.get("/models/resnet/").content.decode()
    assert "team:vision" in detail and "Retire…" in detail


# --------------------------------------------------------------------------- filter, sort, page


@pytest.fixture
def catalogue(operator) -> None:  # type: ignore[no-untyped-def]
    vera = make_user("vera", "operator")
    a = _model("alpha", operator, target="npu_ge", serving_version=1)
    b = _model("beta", vera, description="vision backbone")
    c = _model("gamma", operator, serving_version=2)
    _tag(a, "team:vision", "stage:prod")
    _tag(b, "team:vision")
    _tag(c, "team:nlp")


def _names(api, query: str = "") -> list[str]:  # type: ignore[no-untyped-def]
    response = api("get", f"/api/v1/models{query}")
    assert response.status_code == 200, response.content
    return [m["name"] for m in response.json()["models"]]


def test_the_list_filters_by_tag_owner_target_state_and_text(api, catalogue) -> None:
    assert _names(api) == ["alpha", "beta", "gamma"]
    assert _names(api, "?tag=team:vision") == ["alpha", "beta"]
    assert _names(api, "?tag=TEAM:VISION&owner=otto") == ["alpha"]
    assert _names(api, "?target=npu_ge") == ["alpha"]
    assert _names(api, "?state=serving") == ["alpha", "gamma"]
    assert _names(api, "?state=not_served") == ["beta"]
    # Triton does not answer here: every served model fails its clients.
    assert _names(api, "?state=failing") == ["alpha", "gamma"]
    assert _names(api, "?q=backbone") == ["beta"]
    assert _names(api, "?sort=-name") == ["gamma", "beta", "alpha"]
    assert _names(api, "?sort=-created") == ["gamma", "beta", "alpha"]


@pytest.mark.parametrize(
    ("query", "code"),
    [("sort=size", "invalid_sort"), ("state=broken", "invalid_state"),
     ("target=gpu", "invalid_target"), ("page=0", "invalid_query"),
     ("per_page=5000", "invalid_query"), ("page=x", "invalid_query")],
)  # fmt: skip
def test_bad_list_parameters_are_a_clear_400(api, query: str, code: str) -> None:
    response = api("get", f"/api/v1/models?{query}")
    assert response.status_code == 400, response.content
    assert response.json()["code"] == code


def test_the_list_pages_with_link_headers_and_a_total(api, operator) -> None:
    Model.objects.bulk_create(Model(name=f"m{i:03d}") for i in range(7))
    first = api("get", "/api/v1/models?per_page=3&tag=&sort=name")
    assert first["X-Total-Count"] == "7"
    assert [m["name"] for m in first.json()["models"]] == ["m000", "m001", "m002"]
    assert first["Link"] == ('<http://testserver/api/v1/models?page=2&per_page=3>; rel="next"')
    last = api("get", "/api/v1/models?per_page=3&page=3")
    assert [m["name"] for m in last.json()["models"]] == ["m006"]
    assert last["Link"] == '<http://testserver/api/v1/models?page=2&per_page=3>; rel="prev"'
    # The default page holds 500: today's scripts read the whole list in one answer.
    whole = api("get", "/api/v1/models")
    assert len(whole.json()["models"]) == 7 and "Link" not in whole


def test_the_page_filters_and_pages(operator, catalogue) -> None:
    page = signed_in(operator)
    html = page.get("/models/?tag=team:vision").content.decode()
    assert "alpha" in html and "beta" in html and ">gamma<" not in html
    assert "2 models" in html.split('class="pager"')[1]
    rows = page.get("/models/?owner=vera&sort=-name", headers={"HX-Request": "true"})
    assert rows.status_code == 200 and "beta" in rows.content.decode()
    assert "alpha" not in rows.content.decode()
    Model.objects.bulk_create(Model(name=f"m{i:03d}") for i in range(60))
    html = page.get("/models/").content.decode()
    assert "Page 1 of 2" in html and "?page=2" in html
    assert "m059" in page.get("/models/?page=2").content.decode()
    # A hand-edited URL: the bad filter is said and dropped, the page still answers.
    assert page.get("/models/?sort=size&state=x").status_code == 200


# --------------------------------------------------------------------------- retire


def _run(job_id: str) -> Job:
    job = Job.objects.get(uuid=job_id)
    serving.run_job(job.pk)  # what the worker's task does
    job.refresh_from_db()
    return job


def _with_files(model: Model) -> Path:
    """A version with its source and repository directory, as a compile leaves them."""
    Version.objects.create(model=model, number=1, status="ready", source_filename="m.onnx",
                           source_sha256="0" * 64, source_size=1)  # fmt: skip
    store = get_store()
    store.ensure_layout()
    source = store.source_dir(model.name, 1)
    source.mkdir(parents=True)
    (source / "model.onnx").write_bytes(b"onnx")
    store.version_dir(model.name, 1).mkdir(parents=True)
    store.write_config(model.name, 'name: "x"\n')
    return source


def test_retiring_keeps_the_record_and_sources_and_frees_the_name(api, operator) -> None:
    model = _model("resnet", operator)
    _tag(model, "team:vision")
    source = _with_files(model)
    api("patch", "/api/v1/models/resnet", {"description": "old one"})
    response = api("delete", "/api/v1/models/resnet?reason=replaced")
    assert response.status_code == 202, response.content
    assert response["Location"] == response.json()["url"]
    job = _run(response.json()["job"])
    assert job.state == Job.State.SUCCEEDED, job.error
    store = get_store()
    assert not store.model_dir("resnet").exists() and not source.exists()
    assert (store.root / "retired" / f"resnet.{model.pk}" / "1" / "model.onnx").exists()
    retired = Model.all_objects.get(pk=model.pk)
    assert retired.retired_by == operator and retired.retired_at is not None
    # Soft delete: versions, jobs and every event stay with the row.
    assert retired.versions.count() == 1 and retired.jobs.count() == 1
    kinds = set(Event.objects.filter(model=retired).values_list("kind", flat=True))
    assert {"model.edited", "retire.requested", "retire"} <= kinds
    # Hidden from the list and from name lookups; listed with ?retired=true.
    assert _names(api) == []
    gone = api("get", "/api/v1/models/resnet")
    assert gone.status_code == 404 and "retired" in gone.json()["error"]
    listed = api("get", "/api/v1/models?retired=true").json()["models"]
    assert listed[0]["retired_by"] == "otto" and listed[0]["tags"] == ["team:vision"]
    # The name is free: a new model is a new row with its own history.
    assert api("post", "/api/v1/models", {"name": "resnet"}).status_code == 201
    assert api("get", "/api/v1/models/resnet").json()["versions"] == []
    assert api("get", "/api/v1/models/resnet/versions/1").status_code == 404
    page = signed_in(operator).get(f"/models/retired/{model.pk}/").content.decode()
    assert "Retired on" in page and "by otto" in page and "replaced" in page
    assert "A new model now has the name" in page


def test_purging_sources_needs_an_admin(api, admin_api, operator) -> None:
    model = _model("resnet", operator)
    source = _with_files(model)
    refused = api("delete", "/api/v1/models/resnet?purge_sources=true")
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    job = _run(admin_api("delete", "/api/v1/models/resnet?purge_sources=true").json()["job"])
    assert job.state == Job.State.SUCCEEDED, job.error
    assert not source.exists() and not (get_store().root / "retired").exists()
    assert Model.all_objects.get(pk=model.pk).retired_by.username == "ada"  # type: ignore[union-attr]


def test_a_serving_model_needs_the_extra_confirmation(api, operator) -> None:
    _model("resnet", operator, serving_version=1)
    refused = api("delete", "/api/v1/models/resnet")
    assert refused.status_code == 409 and refused.json()["code"] == "serving"
    assert "every client request" in refused.json()["error"]
    accepted = api("delete", "/api/v1/models/resnet?confirm_serving=true")
    assert accepted.status_code == 202
    # The lock is held by the queued job: a second request is refused, not doubled.
    again = api("delete", "/api/v1/models/resnet?confirm_serving=true")
    assert again.status_code == 409 and again.json()["code"] == "switch_in_progress"


def test_a_model_with_a_running_compile_is_not_retired(api, operator) -> None:
    model = _model("resnet", operator)
    Job.objects.create(kind=Job.Kind.COMPILE, model=model, state=Job.State.RUNNING)
    response = api("delete", "/api/v1/models/resnet")
    assert response.status_code == 409 and response.json()["code"] == "busy"


def test_the_retire_page_says_what_happens_and_asks_to_confirm_a_serving_model(
    operator,
) -> None:
    _model("resnet", operator, serving_version=3)
    page = signed_in(operator)
    html = page.get("/models/resnet/retire/").content.decode()
    assert "serves v3" in html and "every client request" in html
    assert "remove its directory from Triton" in html and "Only an admin" in html
    refused = page.post("/models/resnet/retire/", {"reason": "old"})
    assert refused.status_code == 400 and "Tick this" in refused.content.decode()
    done = page.post("/models/resnet/retire/", {"reason": "old", "confirm_serving": "on"})
    assert done.status_code == 302 and done["Location"].startswith("/jobs/")


def test_events_never_cascade_away_with_a_model(operator) -> None:
    from django.db.models import ProtectedError

    model = _model("resnet", operator)
    Event.objects.create(model=model, kind="x", message="kept")
    with pytest.raises(ProtectedError):
        model.delete()


def test_the_audit_links_a_retired_model_to_its_retired_page(operator) -> None:
    model = _model("resnet", operator)
    Event.objects.create(model=model, kind="x", message="kept")
    Model.objects.filter(pk=model.pk).update(retired_at="2026-01-01T00:00:00Z")
    html = signed_in(operator).get("/audit/").content.decode()
    assert f"/models/retired/{model.pk}/" in html
    assert isinstance(Client, type)
