"""Server-rendered pages: empty states, forms, and errors in plain words."""

import pytest
from django.test import Client

from webapp.registry.catalogue.models import Model


def test_models_page_explains_the_first_step_when_empty(operator_client: Client) -> None:
    body = operator_client.get("/models/").content.decode()
    assert "No models yet" in body
    assert "Create your first model" in body


def test_new_model_form_creates_and_redirects(operator_client: Client) -> None:
    response = operator_client.post(
        "/models/new/", {"name": "digits", "target": "onnxruntime", "description": "MNIST MLP"}
    )
    assert response.status_code == 302
    assert response["Location"] == "/models/digits/"
    assert Model.objects.get(name="digits").created_by.username == "otto"
    page = operator_client.get("/models/digits/").content.decode()
    assert "digits" in page and "MNIST MLP" in page


def test_new_model_form_shows_the_name_rule_on_a_bad_name(operator_client: Client) -> None:
    response = operator_client.post("/models/new/", {"name": "../etc", "target": "onnxruntime"})
    assert response.status_code == 400
    assert "not allowed" in response.content.decode()
    assert not Model.objects.exists()


def test_new_model_form_reports_a_taken_name(operator_client: Client) -> None:
    operator_client.post("/models/new/", {"name": "dup", "target": "onnxruntime"})
    response = operator_client.post("/models/new/", {"name": "dup", "target": "onnxruntime"})
    assert response.status_code == 400
    assert "exists already" in response.content.decode()


def test_models_search_filters_rows_as_an_htmx_partial(operator_client: Client) -> None:
    for name in ("alpha", "beta"):
        operator_client.post("/models/new/", {"name": name, "target": "onnxruntime"})
    response = operator_client.get("/models/?q=alp", HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert "alpha" in body and "beta" not in body
    assert "<html" not in body  # a partial, not the full page


def test_server_page_says_plainly_when_triton_is_unreachable(
    viewer_client: Client, settings
) -> None:
    settings.TRITON_URL = "127.0.0.1:9"
    response = viewer_client.get("/server/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "NOT LIVE" in body and "not reachable" in body


def test_ascend_target_pages_say_what_has_not_run_on_hardware(operator_client: Client) -> None:
    operator_client.post("/models/new/", {"name": "npu", "target": "npu_ge"})
    assert "not been run on Ascend hardware" in operator_client.get("/models/npu/").content.decode()


@pytest.mark.django_db
def test_unknown_page_is_a_friendly_404(viewer_client: Client) -> None:
    response = viewer_client.get("/models/nope/")
    assert response.status_code == 404
