"""Class labels in one click, without Triton: what validation stores from a real ONNX file, the
API's ``PUT .../labels`` bodies (a preset, the model file's names, a list) and its refusals,
and the Try it tab's Labels section (offers, operators only, the partial after a click).
The browser journey, with a served model, is tests/browser/test_label_offers_journey.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from django.test import Client
from onnx import TensorProto, helper, numpy_helper

from model_store.inference import imagenet_labels
from model_store.onnx_info import inspect_onnx
from tests.fixtures.registry import served_model as served_row
from webapp.registry.build.compile_steps import signature_of, summary_of
from webapp.registry.catalogue.models import Model

NAMES = {i: f"thing {i}" for i in range(80)}
LABELS = "/api/v1/models/cls/labels"
SECTION = "/models/cls/try/labels/"


def classifier_file(path: Path, classes: int, metadata: dict[str, str]) -> Path:
    weight = numpy_helper.from_array(np.zeros((8, classes), np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["logits"])],
        "classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes])],
        initializer=[weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    helper.set_model_props(model, metadata)
    onnx.save(model, str(path))
    return path


def served_model(owner, tmp_path: Path, classes: int = 1000, metadata: dict | None = None):  # type: ignore[no-untyped-def]
    """Model ``cls`` serving v1, whose signature and ONNX summary are what validation stores
    for a real file with ``classes`` outputs and ``metadata``."""
    if metadata is None:
        metadata = {"names": str(NAMES)}
    info = inspect_onnx(classifier_file(tmp_path / "m.onnx", classes, metadata))
    return served_row("cls", owner, signature_of(info), onnx_summary=summary_of(info))


@pytest.fixture
def served(operator, tmp_path: Path) -> Model:
    return served_model(operator, tmp_path)


def test_validation_stores_the_names_it_found_with_the_key(served) -> None:
    summary = served.versions.get().onnx_summary
    assert summary["class_names"] == {"key": "names", "names": list(NAMES.values())}


# The API -----------------------------------------------------------------------------------


def test_the_imagenet_preset_sets_the_shipped_names(api, served) -> None:
    answer = api("put", LABELS, {"preset": "imagenet-1k"})
    assert answer.status_code == 200, answer.json()
    assert answer.json()["count"] == 1000 and answer.json()["labels"][967] == "espresso"
    served.refresh_from_db()
    assert served.labels == imagenet_labels(1000)
    # GET is as it was: the names, as stored.
    assert api("get", LABELS).json() == {"model": "cls", "count": 1000, "labels": served.labels}


def test_a_1001_class_model_gets_background_first(api, operator, tmp_path) -> None:
    served_model(operator, tmp_path, classes=1001, metadata={})
    labels = api("put", LABELS, {"preset": "imagenet-1k"}).json()["labels"]
    assert labels[:3] == ["background", "tench", "goldfish"] and len(labels) == 1001


def test_the_model_files_names_and_a_plain_list(api, served) -> None:
    answer = api("put", LABELS, {"from_model_file": True})
    assert answer.status_code == 200, answer.json()
    assert answer.json()["labels"] == list(NAMES.values())
    answer = api("put", LABELS, {"labels": ["cat", "dog"]})
    assert answer.json() == {"model": "cls", "count": 2, "labels": ["cat", "dog"]}
    answer = api("put", LABELS, {"labels": {"0": "zero", "2": "two"}})
    assert answer.json()["labels"] == ["zero", "", "two"]
    # The older forms still work: lines, a JSON list, an object of index -> name.
    assert api("put", LABELS, raw="a\nb\n", content_type="text/plain").json()["count"] == 2
    assert api("put", LABELS, ["x", "y", "z"]).json()["count"] == 3
    assert api("put", LABELS, {"0": "only"}).json()["labels"] == ["only"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"preset": "imagenet-21k"}, "the one preset is 'imagenet-1k'"),
        ({"preset": 1}, "Unknown preset '1'"),
        ({"from_model_file": False}, '"from_model_file" must be true'),
        ({"from_model_file": "yes"}, '"from_model_file" must be true'),
        ({"labels": "cat"}, '"labels" must be a list of names or an object'),
        ({"labels": [1, 2]}, "only strings"),
        ({"preset": "imagenet-1k", "labels": ["a"]}, "Expected exactly one key"),
        ({"preset": "imagenet-1k", "extra": 1}, "Expected exactly one key"),
    ],
)
def test_a_bad_body_is_refused_with_what_to_send(api, served, body, message) -> None:
    answer = api("put", LABELS, body)
    assert answer.status_code == 400
    assert message in answer.json()["error"] and answer.json()["code"] == "bad_labels"
    served.refresh_from_db()
    assert served.labels == []


def test_what_the_serving_version_does_not_offer_is_refused(api, operator, tmp_path) -> None:
    model = served_model(operator, tmp_path, classes=10, metadata={"stride": "32"})
    answer = api("put", LABELS, {"preset": "imagenet-1k"})
    assert answer.status_code == 409 and answer.json()["code"] == "not_offered"
    assert "last axis is 1000 or 1001" in answer.json()["error"]
    answer = api("put", LABELS, {"from_model_file": True})
    assert answer.status_code == 409 and "carries no class names" in answer.json()["error"]
    model.serving_version = None
    model.save()
    answer = api("put", LABELS, {"preset": "imagenet-1k"})
    assert answer.status_code == 409 and answer.json()["code"] == "not_served"


def test_viewers_may_read_labels_but_not_set_them(viewer_api, served) -> None:
    assert viewer_api("put", LABELS, {"preset": "imagenet-1k"}).status_code == 403
    assert viewer_api("get", LABELS).json()["count"] == 0


def test_the_schema_documents_the_three_bodies(api) -> None:
    put = api("get", "/api/v1/schema").json()["paths"]["/api/v1/models/{name}/labels"]["put"]
    forms = put["requestBody"]["content"]["application/json"]["schema"]["oneOf"]
    assert set(forms[2]["properties"]) == {"preset", "from_model_file", "labels"}
    assert {"400", "403", "409", "413"} <= set(put["responses"])


# The Try it tab ------------------------------------------------------------------------------


def test_operators_get_one_button_per_offer(operator_client: Client, served) -> None:
    page = operator_client.get("/models/cls/try/").content.decode()
    assert '<details id="try-labels" open>' in page  # no labels yet, some offered
    assert "Use ImageNet-1k labels (1000 classes)" in page
    assert "Use the labels in the model file (key names, 80 classes)" in page
    assert f'hx-post="{SECTION}"' in page


def test_viewers_see_the_offers_without_buttons(viewer_client: Client, served) -> None:
    page = viewer_client.get("/models/cls/try/").content.decode()
    assert '<details id="try-labels">' in page
    assert "Offered: ImageNet-1k labels (1000 classes)" in page
    assert 'data-label-offer="' not in page and "data-labels-file" not in page
    assert viewer_client.post(SECTION, {"source": "imagenet-1k"}).status_code == 403
    served.refresh_from_db()
    assert served.labels == []


def test_a_click_saves_the_labels_and_answers_the_section(operator_client, served) -> None:
    answer = operator_client.post(SECTION, {"source": "imagenet-1k"}, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200
    section = answer.content.decode()
    assert '<details id="try-labels" open>' in section
    assert "Labels: 1000 class names" in section
    assert "1000 class names saved; the next run shows them." in section
    # The names now in use are marked so; the other offer says it replaces them.
    assert 'ImageNet-1k labels (1000 classes) <span class="tag">in use</span>' in section
    assert "Replace the labels with those in the model file (key names, 80 classes)" in section
    served.refresh_from_db()
    assert served.labels == imagenet_labels(1000)

    answer = operator_client.post(SECTION, {"source": "model-file"})
    assert "Labels: 80 class names" in answer.content.decode()
    served.refresh_from_db()
    assert served.labels[:2] == ["thing 0", "thing 1"]


def test_a_refused_click_says_why_in_the_section(operator_client, operator, tmp_path) -> None:
    served_model(operator, tmp_path, classes=10, metadata={})
    answer = operator_client.post(SECTION, {"source": "imagenet-1k"})
    assert answer.status_code == 409
    assert "has no output of ImageNet&#x27;s size" in answer.content.decode()
    answer = operator_client.post(SECTION, {"source": "<script>"})
    assert answer.status_code == 400 and "<script>" not in answer.content.decode()
    assert operator_client.get(SECTION).status_code == 200


def test_hostile_names_in_a_model_file_are_shown_as_text(
    operator_client, operator, tmp_path
) -> None:
    hostile = {"names": str({0: '<img src=x onerror="alert(1)">', 1: "ok"})}
    served_model(operator, tmp_path, classes=10, metadata=hostile)
    operator_client.post(SECTION, {"source": "model-file"})
    assert Model.objects.get(name="cls").labels[0] == '<img src=x onerror="alert(1)">'
    page = operator_client.get("/models/cls/try/").content.decode()
    assert "key names, 2 classes" in page and "<img src=x" not in page
