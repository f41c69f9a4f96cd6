"""The API contract is the code's: every served path and method is in the generated document,
and the suite's response check (``tests/fixtures/openapi.py``) refuses what it does not list."""

from __future__ import annotations

import pytest
from django.http import JsonResponse

from tests.fixtures.openapi import contract


@pytest.fixture
def document(api) -> dict:  # type: ignore[no-untyped-def]
    return api("get", "/api/v1/schema").json()


def test_every_served_path_and_method_is_documented(document) -> None:  # type: ignore[no-untyped-def]
    from webapp.api.app import api as ninja_api

    served = set()
    for bound in ninja_api._get_bound_routers():
        for route, path_view in bound.path_operations.items():
            template = "/api/v1" + route.replace("{int:", "{")
            for operation in path_view.operations:
                served |= {(template, m.lower()) for m in operation.methods}
    documented = {(p, m) for p, item in document["paths"].items() for m in item}
    assert served == documented
    assert len(document["paths"]) == 58  # + the five capture paths


def test_the_fast_paths_are_in_the_document(document) -> None:  # type: ignore[no-untyped-def]
    chunk = document["paths"]["/api/v1/uploads/{upload_id}"]["put"]
    assert {p["name"] for p in chunk["parameters"]} >= {"upload_id", "Upload-Offset"}
    assert "application/octet-stream" in chunk["requestBody"]["content"]
    assert "Upload-Offset" in chunk["responses"]["409"]["headers"]
    live = document["paths"]["/api/v1/health/live"]["get"]
    assert live["security"] == []


def test_serving_documents_202_wait_and_retry_after(document) -> None:  # type: ignore[no-untyped-def]
    serve = document["paths"]["/api/v1/models/{name}/serve"]["post"]
    assert {"200", "202", "409", "429", "503"} <= set(serve["responses"])
    assert "Location" in serve["responses"]["202"]["headers"]
    assert "Retry-After" in serve["responses"]["429"]["headers"]
    assert "wait" in {p["name"] for p in serve["parameters"]}
    assert serve["x-role"] == "operator"


def test_the_target_enum_comes_from_the_targets(document) -> None:  # type: ignore[no-untyped-def]
    from webapp.registry.catalogue.rules import Target

    model_in = document["components"]["schemas"]["ModelIn"]
    assert model_in["properties"]["target"]["enum"] == list(Target.values)


def test_an_undocumented_status_fails_the_check(db) -> None:  # type: ignore[no-untyped-def]
    teapot = JsonResponse({"error": "no", "code": "teapot"}, status=418)
    with pytest.raises(AssertionError, match="does not list"):
        contract().check("GET", "/api/v1/models", teapot)


def test_a_body_off_the_document_fails_the_check(db) -> None:  # type: ignore[no-untyped-def]
    wrong = JsonResponse({"models": [{"name": 5}]})
    with pytest.raises(pytest.fail.Exception, match="does not match the document"):
        contract().check("GET", "/api/v1/models", wrong)


def test_validation_errors_are_the_one_error_shape(api) -> None:  # type: ignore[no-untyped-def]
    response = api("post", "/api/v1/models/m/serve", {"version": "2"})
    assert response.status_code == 400
    assert response.json() == {
        "error": "The field 'version' must be a int.",
        "code": "invalid_field",
    }
    response = api("post", "/api/v1/uploads", {})
    assert response.json()["code"] == "missing_field" and "'filename'" in response.json()["error"]


def test_a_bad_query_value_names_the_parameter(api) -> None:  # type: ignore[no-untyped-def]
    response = api("get", "/api/v1/models/m/memory-estimate?instances=0")
    assert response.status_code == 400
    assert response.json() == {"error": "instances must be at least 1.", "code": "invalid_query"}
    response = api("get", "/api/v1/models/m/memory-estimate?max_batch=x")
    assert response.json()["error"] == "max_batch must be a whole number."


def test_there_is_no_docs_page(api) -> None:  # type: ignore[no-untyped-def]
    assert api("get", "/api/v1/docs").status_code == 404
