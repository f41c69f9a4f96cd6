"""The models endpoints: create, list, detail, and every bad input as a clear 4xx."""

import pytest

from tests.fixtures.hosts import worker_probes_host


def test_create_list_and_detail(api) -> None:
    created = api(
        "post", "/api/v1/models", {"name": "resnet50", "target": "npu_ge", "description": "d"}
    )
    assert created.status_code == 201
    assert created.json()["target"] == "npu_ge"
    assert [m["name"] for m in api("get", "/api/v1/models").json()["models"]] == ["resnet50"]
    detail = api("get", "/api/v1/models/resnet50").json()
    assert detail["created_by"] == "otto" and detail["serving_version"] is None


HOSTILE = [
    "../x",
    "a/b",
    "a\\b",
    'q"uote',
    "new\nline",
    "x" * 300,
    "",
    ".",
    "..",
    "-lead",
    "ü",
    "a\x00b",
]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_are_refused_with_a_reason(api, name: str) -> None:
    response = api("post", "/api/v1/models", {"name": name})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] in {"invalid_name", "invalid_field"}
    assert body["error"]


def test_duplicate_names_are_a_conflict(api) -> None:
    api("post", "/api/v1/models", {"name": "m1"})
    response = api("post", "/api/v1/models", {"name": "m1"})
    assert response.status_code == 409
    assert response.json()["code"] == "name_taken"


@pytest.mark.parametrize(
    ("raw", "code"),
    [("not json", "invalid_json"), ("[1, 2]", "invalid_json"), ('{"name": 5}', "invalid_field"),
     ("{}", "missing_field"), ('{"name": "ok", "target": "gpu"}', "invalid_target")],
)  # fmt: skip
def test_malformed_bodies_get_a_clear_400(api, raw: str, code: str) -> None:
    response = api("post", "/api/v1/models", raw=raw, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == code


def test_unknown_model_is_a_json_404(api) -> None:
    response = api("get", "/api/v1/models/nope")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_unknown_endpoint_is_a_json_404(api) -> None:
    response = api("get", "/api/v1/nothing-here")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_wrong_method_is_a_405_that_says_what_is_allowed(api) -> None:
    response = api("delete", "/api/v1/models")
    assert response.status_code == 405
    assert response["Allow"] == "GET, POST"


def test_schema_documents_the_endpoints(api) -> None:
    schema = api("get", "/api/v1/schema").json()
    assert schema["openapi"].startswith("3.")
    assert {"/api/v1/health", "/api/v1/server", "/api/v1/models"} <= set(schema["paths"])


def test_server_endpoint_reports_an_unreachable_triton_without_failing(api, settings) -> None:
    settings.TRITON_URL = "127.0.0.1:9"  # discard port: nothing listens
    worker_probes_host()
    body = api("get", "/api/v1/server").json()
    assert body["triton"]["live"] is False
    assert "not reachable" in body["triton"]["error"]
    assert "no Ascend NPU" in body["devices"]["reason"]


def test_health_names_each_failing_part(api, settings) -> None:
    settings.TRITON_URL = "127.0.0.1:9"
    settings.REDIS_URL = ""
    response = api("get", "/api/v1/health")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["database"]["ok"] is True
    assert checks["triton"]["ok"] is False and "not reachable" in checks["triton"]["detail"]
    assert checks["broker"]["ok"] is False and "REDIS_URL" in checks["broker"]["detail"]


def test_schema_documents_try_it(api) -> None:
    paths = api("get", "/api/v1/schema").json()["paths"]
    infer = paths["/api/v1/models/{name}/infer"]["post"]
    assert {"413", "415", "422", "429"} <= set(infer["responses"])
    assert {"/api/v1/models/{name}/sweeps", "/api/v1/demo"} <= set(paths)
