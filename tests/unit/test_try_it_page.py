"""The Try it tab's server side without Triton: the form is read into the infer API's request,
the result and the saved examples come back as partials, and the API's limits and role rules
hold on the page too. (The whole journey in a browser is tests/browser/test_try_it_journey.py.)
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from webapp.errors import HubError
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.tryit import inference
from webapp.registry.tryit.models import TryExample
from webapp.slow_requests import Busy

SIGNATURE = {
    "inputs": [{"name": "x", "dtype": "TYPE_FP32", "numpy": "float32", "dims": ["batch", 4]}],
    "outputs": [{"name": "y", "dtype": "TYPE_FP32", "numpy": "float32", "dims": ["batch", 3]}],
}
HOSTILE = '<img src=x onerror="alert(1)">'
RUN = "/models/mlp/try/run/"


@pytest.fixture
def served(operator, settings) -> Model:
    settings.TRITON_URL = settings.TRITON_GRPC_URL = "127.0.0.1:9"  # nothing listens
    model = Model.objects.create(name="mlp", created_by=operator, serving_version=1)
    for number in (1, 2):
        Version.objects.create(
            model=model,
            number=number,
            status=Version.Status.READY,
            source_filename="model.onnx",
            source_sha256="0" * 64,
            source_size=1,
            signature=SIGNATURE,
            verification={"status": "passed"},
        )
    return model


def form(values: str = "[[1, 2, 3, 4]]", **extra: str) -> dict[str, str]:
    return {"input-0": "x", "kind-0": "tensor", "tensor-0": values, "top_k": "2", **extra}


def answer(version: int) -> dict[str, Any]:
    return {
        "version": version,
        "latency": {"triton_ms": 1.25, "hub_ms": 2.5},
        "outputs": [
            {
                "name": HOSTILE,
                "dtype": "float32",
                "shape": [1, 3],
                "kind": "classification",
                "values": [0.93, 0.05, None],
                "truncated": False,
                "probabilities": "as given",
                "top_k": [
                    {"index": 0, "label": HOSTILE, "probability": 0.93},
                    {"index": 1, "label": None, "probability": 0.05},
                ],
            }
        ],
        "snippets": {"curl": "curl -sS -X POST …", "python": "import tritonclient.grpc"},
    }


def test_the_tab_is_a_form_that_posts_to_the_run_view(viewer_client: Client, served) -> None:
    html = viewer_client.get("/models/mlp/try/").content.decode()
    assert f'hx-post="{RUN}"' in html and 'enctype="multipart/form-data"' in html
    assert 'name="input-0" value="x"' in html and 'name="tensor-0"' in html
    assert '<meta name="csrf-token"' in html and "hx-headers" not in html
    assert "onclick" not in html and "window." not in html


def test_a_run_answers_the_result_partial_with_names_as_text(
    viewer_client: Client, served, monkeypatch
) -> None:
    sent: list[dict[str, Any]] = []

    def fake_run(model, body, user_key, *, base_url=None):
        sent.append(body)
        return answer(body.get("version", 1))

    monkeypatch.setattr(inference, "run", fake_run)
    response = viewer_client.post(RUN, form(version="1"))
    assert response.status_code == 200
    html = response.content.decode()
    assert sent == [{"inputs": {"x": [[1, 2, 3, 4]]}, "top_k": 2, "snippets": True, "version": 1}]
    assert "data-topk" in html and "93.0%" in html and "5.00%" in html and "class 1" in html
    assert HOSTILE not in html and "&lt;img src=x" in html
    assert "Triton <strong>1.25 ms</strong>" in html and "data-round-trip" in html
    assert "import tritonclient.grpc" in html and "NaN" in html


def test_bad_input_is_shown_in_place_with_the_apis_status(viewer_client: Client, served) -> None:
    wrong = viewer_client.post(RUN, form("[[1, 2, 3]]"))
    assert wrong.status_code == 422
    shown = wrong.content.decode()
    # The message names the input already; "(input x)" is added only when it does not.
    assert 'class="error"' in shown and "Input &#x27;x&#x27; has shape" in shown
    assert "(input x)" not in shown
    not_json = viewer_client.post(RUN, form("[[1, 2,"))
    assert not_json.status_code == 400 and "not valid JSON" in not_json.content.decode()
    top_k = viewer_client.post(RUN, form(top_k="0"))
    assert top_k.status_code == 400 and "Top-k" in top_k.content.decode()
    # A valid request reaches for Triton, which is not there: 503 with a reason, never a 500.
    down = viewer_client.post(RUN, form())
    assert down.status_code == 503 and "Triton" in down.content.decode()


def test_a_missing_photo_is_named(viewer_client: Client, served) -> None:
    response = viewer_client.post(RUN, {"input-0": "x", "kind-0": "image", "top_k": "5"})
    assert response.status_code == 400 and "Choose a photo for x" in response.content.decode()


def test_the_page_keeps_the_apis_limits(
    viewer_client: Client, served, settings, monkeypatch
) -> None:
    settings.INFER_MAX_REQUEST_BYTES = 64
    big = viewer_client.post(RUN, form("[[" + ", ".join(["0.123456"] * 40) + "]]"))
    assert big.status_code == 413 and b"INFER_MAX_REQUEST_BYTES" in big.content

    def busy(*args: Any, **kwargs: Any) -> None:
        raise Busy("You have 2 slow requests running.", "too_many_requests", 429, retry_after=1)

    settings.INFER_MAX_REQUEST_BYTES = 1 << 20
    monkeypatch.setattr(inference, "run", busy)
    refused = viewer_client.post(RUN, form())
    assert refused.status_code == 429 and refused["Retry-After"] == "1"
    assert Client().post(RUN, form()).status_code == 403  # not signed in: body unread


def test_comparing_offers_to_load_the_other_version_to_operators_only(
    viewer_client: Client, operator_client: Client, served, monkeypatch
) -> None:
    def fake_run(model, body, user_key, *, base_url=None):
        if body.get("version") == 2:
            raise HubError("v2 of mlp is not loaded in Triton.", "version_not_loaded", 409)
        return answer(1)

    monkeypatch.setattr(inference, "run", fake_run)
    both = form(version="1", compare="on", compare_version="2")
    html = operator_client.post(RUN, both).content.decode()
    assert "compare-grid" in html and 'data-compare-load="2"' in html
    assert "Load v2 beside v1" in html
    assert 'data-compare-load="2"' not in viewer_client.post(RUN, both).content.decode()


def test_examples_are_saved_rerun_and_deleted_through_partials(
    viewer_client: Client, operator, served, monkeypatch
) -> None:
    saved = viewer_client.post("/models/mlp/try/examples/", form(example_name=HOSTILE))
    assert saved.status_code == 201
    listed = saved.content.decode()
    assert "&lt;img src=x" in listed and "Saved examples (1)" in listed
    example = TryExample.objects.get()
    assert example.inputs == {"x": [[1, 2, 3, 4]]}

    sent: list[dict[str, Any]] = []

    def fake_run(model, body, user_key, *, base_url=None):
        sent.append(body)
        return answer(1)

    monkeypatch.setattr(inference, "run", fake_run)
    rerun = viewer_client.post(RUN, {"example": str(example.pk), "top_k": "3"})
    assert rerun.status_code == 200 and sent[0]["inputs"] == {"x": [[1, 2, 3, 4]]}
    assert viewer_client.post(RUN, {"example": "999"}).status_code == 404

    other = TryExample.objects.create(model=served, name="theirs", inputs={}, created_by=operator)
    refused = viewer_client.post(f"/models/mlp/try/examples/{other.pk}/delete/")
    assert refused.status_code == 403 and "Only the person" in refused.content.decode()
    deleted = viewer_client.post(f"/models/mlp/try/examples/{example.pk}/delete/")
    assert deleted.status_code == 200 and list(TryExample.objects.all()) == [other]

    bad = viewer_client.post("/models/mlp/try/examples/", form("[[1]]", example_name="short"))
    assert bad.status_code == 422 and 'value="short"' in bad.content.decode()


def test_the_sweep_list_polls_only_while_a_sweep_runs(viewer_client: Client, served) -> None:
    from webapp.registry.jobs.models import Job
    from webapp.registry.performance.models import PerfRun

    def runs_partial() -> str:
        return viewer_client.get(
            "/models/mlp/perf/?part=runs", HTTP_HX_REQUEST="true"
        ).content.decode()

    idle = runs_partial()
    assert 'id="perf-runs"' in idle and 'hx-swap="outerHTML"' in idle
    assert 'hx-trigger="live:sweeps from:body"' in idle and "window." not in idle
    job = Job.objects.create(kind=Job.Kind.SWEEP, model=served, state=Job.State.RUNNING)
    PerfRun.objects.create(model=served, version=served.versions.get(number=1), job=job)
    assert 'hx-trigger="every 3s, live:sweeps from:body"' in runs_partial()


def _not_loaded() -> HubError:
    return HubError("v1 of mlp is not loaded in Triton (v1 serves).", "version_not_loaded", 409)


@pytest.mark.django_db
def test_a_request_naming_no_version_follows_a_switch_that_unloaded_its_version(
    served: Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Triton unloads the old version as soon as the new one is ready, a moment before the
    switch records it: the request waits for the record and goes to the new version."""
    monkeypatch.setattr(inference, "SWITCH_SETTLE_SECONDS", 0.5)
    tried = Version.objects.get(model=served, number=1)
    Model.objects.filter(pk=served.pk).update(serving_version=2)  # the switch's record
    again = inference._serving_after_a_switch(served, tried, None, _not_loaded())
    assert again is not None and again.number == 2 and served.serving_version == 2


@pytest.mark.django_db
def test_a_request_is_not_moved_when_it_named_a_version_or_nothing_switched(
    served: Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inference, "SWITCH_SETTLE_SECONDS", 0.2)
    tried = Version.objects.get(model=served, number=1)
    assert inference._serving_after_a_switch(served, tried, 1, _not_loaded()) is None
    # Nothing switched: after the short wait the answer is the error, as before.
    assert inference._serving_after_a_switch(served, tried, None, _not_loaded()) is None
    other = HubError("Triton did not answer", "triton_unavailable", 503)
    Model.objects.filter(pk=served.pk).update(serving_version=2)
    assert inference._serving_after_a_switch(served, tried, None, other) is None
