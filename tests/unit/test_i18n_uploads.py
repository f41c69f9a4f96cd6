"""Issue 22: uploads, validation, the store, package tars, adopt, verification and the ONNX
optimiser say their sentences as templates (model_store.text), English unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.utils import translation

from model_store.adopt.found import Problem
from model_store.errors import ModelStoreError
from model_store.file_io import safe_join
from model_store.package_tar.files import _parts
from model_store.targets.findings import error
from model_store.text import Message, from_json, say
from model_store.uploads.errors import InvalidUpload, human_bytes
from model_store.uploads.records import check_upload_filename, check_upload_id
from model_store.uploads.upload_store import UploadStore
from model_store.validate import ValidationReport
from model_store.verification_report import OutputComparison, VerificationReport
from webapp.api.app import store_error
from webapp.text import localize


def test_upload_refusal_is_a_template_with_the_english_unchanged() -> None:
    with pytest.raises(InvalidUpload) as caught:
        check_upload_filename("../model.onnx")
    message = caught.value.message
    assert isinstance(message, Message)
    assert message.template.startswith("The file name %(name)s contains a folder or '..'.")
    assert message.params == {"name": "'../model.onnx'"}
    assert str(caught.value) == (
        "The file name '../model.onnx' contains a folder or '..'. "
        "Send only the file's own name, e.g. 'model.onnx'."
    )


def test_nested_texts_say_the_allowed_extensions() -> None:
    with pytest.raises(InvalidUpload) as caught:
        check_upload_filename("")
    message = caught.value.message
    assert message == "The file name is empty. Upload a .onnx or .zip file."
    assert isinstance(message.params["allowed"], Message)


def test_human_bytes_says_bytes_through_a_template() -> None:
    said = human_bytes(12)
    assert said == "12 bytes" and isinstance(said, Message)
    assert human_bytes(1536) == "1.5 KiB"


def test_upload_store_errors_keep_templates(tmp_path: Path) -> None:
    store = UploadStore(tmp_path, max_bytes=10)
    with pytest.raises(ModelStoreError) as caught:
        store.create("m.onnx", 11)
    message = caught.value.message
    assert isinstance(message, Message)
    assert message.template.startswith("The file %(name)s is %(size)s; the limit is %(limit)s.")
    assert str(message).startswith("The file 'm.onnx' is 11 bytes; the limit is 10 bytes.")


def test_the_api_renders_a_store_error_with_localize() -> None:
    with pytest.raises(ModelStoreError) as caught:
        check_upload_id("../etc")
    with translation.override("en"):
        answer = store_error(caught.value)
    assert answer.message == str(caught.value.message)
    assert answer.message.startswith("There is no upload '../etc'")


def test_store_and_package_tar_paths_say_templates(tmp_path: Path) -> None:
    with pytest.raises(ModelStoreError) as caught:
        safe_join(tmp_path, "..", "x")
    assert isinstance(caught.value.message, Message)
    assert caught.value.message.template.startswith("The path %(path)s leads outside %(root)s.")
    with pytest.raises(ModelStoreError) as tar_error:
        _parts("/abs")
    assert tar_error.value.message == "'/abs' is not a relative name."
    assert tar_error.value.message.template == "%(name)s is not a relative name."


def test_findings_of_validation_are_stored_with_their_templates() -> None:
    finding = error("no_outputs", say("The model has no outputs."), say("Export it."))
    data = json.loads(json.dumps(ValidationReport(False, None, [finding]).to_dict()))
    (stored,) = data["findings"]
    assert stored["message"] == {"template": "The model has no outputs.", "params": {}}
    with translation.override("en"):
        assert localize(stored["message"]) == "The model has no outputs."
    assert localize("The model has no outputs.") == "The model has no outputs."


def test_verification_reason_and_problems_keep_their_templates() -> None:
    problem = say("the %(where)s output contains NaN or infinity", where="x")
    report = VerificationReport(
        "failed",
        "fp32",
        {},
        outputs=[OutputComparison("y", problem=problem)],
        reason=say("The artifact cannot be loaded: %(error)s", error="boom"),
    )
    data = json.loads(json.dumps(report.to_dict()))
    assert data["reason"]["params"] == {"error": "boom"}
    assert from_json(data["outputs"][0]["problem"]) == "the x output contains NaN or infinity"
    restored = from_json(data["reason"])
    assert isinstance(restored, Message) and restored == "The artifact cannot be loaded: boom"
    with translation.override("en"):
        assert localize(data["reason"]) == "The artifact cannot be loaded: boom"
    plain = VerificationReport("not_run", "fp32", {}, reason="as stored").to_dict()
    assert plain["reason"] == "as stored"


def test_adopt_problems_store_their_message() -> None:
    problem = Problem(
        "error", "empty_version", say("Version %(version)s holds no files.", version=3)
    )
    data = problem.to_dict()
    assert data["message"]["template"] == "Version %(version)s holds no files."
    with translation.override("en"):
        assert localize(data["message"]) == "Version 3 holds no files."
