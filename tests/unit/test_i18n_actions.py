"""Issue 22: what the actions say can be said in the reader's language.

Events store their message once (its template and values), and HubError messages are made with
gettext at request time; the English stays as it was.
"""

from __future__ import annotations

import numpy as np
import pytest
from django.utils import translation

from model_store.inference import InferenceInputError
from model_store.inference.coerce import fit_shape
from model_store.inference.signature import specs_from_signature
from model_store.text import Message, from_json
from webapp.errors import HubError
from webapp.registry.catalogue.actions import models as model_actions
from webapp.registry.catalogue.actions import versions as version_actions
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs.models import Event
from webapp.registry.serving import placement
from webapp.registry.serving.actions import switch as serving_actions
from webapp.text import localize

SIG = {"inputs": [{"name": "x", "dtype": "TYPE_FP32", "dims": ["batch", 4]}],
       "outputs": [{"name": "y", "dtype": "TYPE_FP32", "dims": ["batch", 3]}]}  # fmt: skip


@pytest.fixture
def model(operator, settings, tmp_path) -> Model:
    settings.MODEL_STORE_ROOT = tmp_path / "store"
    return Model.objects.create(name="mlp", target="onnxruntime", created_by=operator)


def _version(model: Model, number: int) -> Version:
    return Version.objects.create(
        model=model, number=number, status="ready", source_filename="m.onnx",
        source_sha256=f"{number:064d}", source_size=10, verification={"status": "passed"},
        signature=SIG,
    )  # fmt: skip


def test_an_edit_event_stores_its_message(model, operator) -> None:
    model_actions.edit_model(model=model, user=operator, description="New", tags=["team:a"])
    event = Event.objects.get(kind="model.edited")
    assert event.message == f"{operator.username} changed the description and tags of mlp."
    assert isinstance(event.message, Message)
    assert event.message.template == "%(user)s changed the %(fields)s of %(model)s."
    assert event.message.params["model"] == "mlp"
    assert event.data["tags"]["added"] == ["team:a"]  # the change itself is still there
    with translation.override("en"):
        assert localize(event.message) == str(event.message)


def test_a_serve_request_event_is_a_template_with_the_reason(model, operator) -> None:
    _version(model, 1)
    job = serving_actions.request_switch(model=model, number=1, user=operator, reason="canary")
    event = Event.objects.get(job=job)
    assert event.message == f"{operator.username} asked to serve mlp v1: canary"
    stored = event.message.to_json()  # type: ignore[union-attr]
    assert stored["template"] == "%(request)s: %(reason)s"
    inner = stored["params"]["request"]
    assert inner["template"] == "%(user)s asked to serve %(model)s v%(to)s"
    assert from_json(stored) == event.message
    assert event.data["to"] == 1  # the job's params are still the event's data


def test_a_cancel_event_stores_its_template(model, operator) -> None:
    _version(model, 1)
    job = serving_actions.request_switch(model=model, number=1, user=operator)
    version_actions.cancel_job(job, operator)
    event = Event.objects.get(kind="job.cancel_requested")
    assert event.message == f"{operator.username} asked to cancel the serve job."
    assert event.message.template == "%(user)s asked to cancel the %(kind)s job."  # type: ignore[union-attr]


def test_an_event_made_without_a_template_shows_as_stored() -> None:
    assert localize("Old English.") == "Old English."


def test_a_refusal_reads_the_same_in_english(model, operator) -> None:
    with translation.override("en"), pytest.raises(HubError) as info:
        serving_actions.request_switch(model=model, number=7, user=operator)
    assert info.value.message == "mlp has no version 7."
    assert info.value.code == "not_found"
    with translation.override("en"), pytest.raises(HubError) as info:
        model_actions.clean_tags(["bad tag!"])
    assert info.value.message.startswith("The tag 'bad tag!' is not allowed: up to ")


def test_placement_is_described_as_text() -> None:
    said = placement.describe({"nodes": ["local", "b"]})
    assert isinstance(said, Message)
    assert said == "nodes local, b"
    assert said.template == "nodes %(nodes)s"
    assert placement.describe({"labels": {}}) == "every node"


def test_a_shape_error_in_try_it_is_a_template() -> None:
    spec = specs_from_signature(SIG)[0]
    with pytest.raises(InferenceInputError) as info:
        fit_shape(spec, np.zeros((2, 5), dtype=np.float32))
    message = info.value.message
    assert isinstance(message, Message)
    assert message.template == "Input %(input)s has shape %(shape)s; %(takes)s."
    assert str(message).startswith("Input 'x' has shape [2, 5]; the model takes ")
    with translation.override("en"):
        assert localize(message) == str(message)
