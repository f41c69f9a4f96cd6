# ruff: noqa: RUF001  (the Chinese test strings use full-width punctuation, as translations do)
"""Try it and the infer API say their refusals in the reader's language (issue 22).

``model_store.inference`` and ``model_store.names`` say every message with
:func:`model_store.text.say`: the English is exactly what it was, the template and the values
travel with it, and the web layer translates the template. The zh-Hans catalogue is merged
later, so the Chinese is checked with one entry put into the catalogue for a test.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from django.test import Client
from django.utils import translation
from django.utils.translation import trans_real

from model_store.errors import InvalidModelName, InvalidTensorName, InvalidVersion
from model_store.inference import (
    PRESET_LABELS,
    PRESETS,
    InferenceInputError,
    Limits,
    Preprocess,
    decode_image,
    decode_inputs,
    parse_labels,
    specs_from_signature,
)
from model_store.inference.limits import Budget
from model_store.inference.v2 import payload_from_v2
from model_store.names import validate_model_name, validate_tensor_name, validate_version
from model_store.text import Message
from tests.fixtures.registry import served_model
from tests.fixtures.users import PASSWORD, token_for
from webapp.errors import HubError
from webapp.registry.catalogue.actions.models import create_model
from webapp.registry.tryit.views.page import _preprocess_name, _preprocess_summary
from webapp.text import localize

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN"}
EN = {"HTTP_ACCEPT_LANGUAGE": "en-US,en;q=0.9"}
SIGNATURE = {
    "inputs": [{"name": "x", "dtype": "TYPE_FP32", "numpy": "float32", "dims": ["batch", 4]}],
    "outputs": [{"name": "y", "dtype": "TYPE_FP32", "numpy": "float32", "dims": ["batch", 3]}],
}
SPECS = specs_from_signature(SIGNATURE)


def _translate(monkeypatch: pytest.MonkeyPatch, msgid: str, msgstr: str) -> None:
    """Put one zh-Hans catalogue entry in place for this test (monkeypatch undoes it)."""
    catalog = trans_real.translation("zh-hans")._catalog
    monkeypatch.setitem(catalog._catalogs[0], msgid, msgstr)


def _refusal(call, *args, **kwargs) -> Message:  # type: ignore[no-untyped-def]
    with pytest.raises(InferenceInputError) as caught:
        call(*args, **kwargs)
    message = caught.value.message
    assert isinstance(message, Message), message
    return message


# The messages keep their English and carry their templates ---------------------------------


def test_a_missing_input_is_said_from_templates_with_the_english_unchanged() -> None:
    message = _refusal(decode_inputs, SPECS, {"z": [[1, 2, 3, 4]]}, Limits())
    assert message == (
        "'z' is not an input; 'x' is missing. The model takes: 'x' (FP32 [batch, 4])."
    )
    assert message.template == "%(problems)s. The model takes: %(takes)s."
    problems = message.params["problems"]
    assert problems.template == "%(first)s; %(then)s"
    assert problems.params["first"].template == "%(names)s is not an input"
    assert problems.params["then"].plural == "%(names)s are missing"


def test_a_bad_base64_value_names_the_input_and_the_key() -> None:
    message = _refusal(decode_inputs, SPECS, {"x": {"b64": 5, "shape": [1, 4]}}, Limits())
    assert message == "Input 'x': 'b64' must be a base64 string."
    assert message.template == "Input %(input)s: %(key)s must be a base64 string."
    assert message.params == {"input": "'x'", "key": "'b64'"}


def test_an_image_helpers_refusal_is_wrapped_with_the_input_name() -> None:
    body = {"x": {"image_b64": "aGVsbG8=", "preprocess": {"crop": 0}}}
    message = _refusal(decode_inputs, SPECS, body, Limits())
    assert message.template == "Input %(input)s: %(problem)s"
    assert message.params["problem"].template.startswith("preprocess.crop must be")
    assert message == (
        "Input 'x': preprocess.crop must be a whole number from 1 to 4096, or null to use the "
        "model's height and width; got 0."
    )


def test_preprocess_image_labels_limits_and_v2_refusals_keep_their_english() -> None:
    assert _refusal(Preprocess.from_dict, {"colour": "RGB"}) == (
        "preprocess has unknown keys ['colour']; the known ones are ['preset', 'resize_short', "
        "'crop', 'mean', 'std', 'color', 'layout']."
    )
    assert _refusal(decode_image, b"not an image", 1000) == (
        "The file is not an image Pillow can read (PNG, JPEG, WebP, GIF, BMP, TIFF)."
    )
    assert _refusal(parse_labels, b"") == "The labels file is empty; send one label per line."
    budget = Budget(Limits(max_elements=10))
    refused = _refusal(budget.check, "x", 12, 48, at_least=True)
    assert refused == (
        "Input 'x' brings the request to at least 12 elements; the limit is 10 per request. "
        "Send a smaller batch or tensor."
    )
    assert refused.params["count"].template == "at least %(count)s"
    assert _refusal(payload_from_v2, [{"name": "x", "shape": [1], "datatype": "FP8"}]) == (
        "Input 'x': 'datatype' must be one of BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, "
        "INT32, INT64, FP16, FP32, FP64, BYTES."
    )


def test_name_checks_are_said_from_templates() -> None:
    with pytest.raises(InvalidModelName) as caught:
        validate_model_name("a/b")
    assert str(caught.value) == (
        "The model name 'a/b' is not allowed: it contains a path separator. Use letters, "
        "digits, '_', '-' and '.', start with a letter or digit, and keep it to 64 characters."
    )
    message = caught.value.message
    assert isinstance(message, Message)
    assert message.template == "The %(kind)s %(value)s is not allowed: %(reason)s. %(rules)s"
    assert message.params["kind"].template == "model name"
    with pytest.raises(InvalidVersion) as version:
        validate_version("007")
    assert str(version.value) == (
        "The version '007' is not allowed. Versions are whole numbers from 1 to 2147483647, "
        "without leading zeros."
    )
    with pytest.raises(InvalidTensorName, match="A tensor name is empty"):
        validate_tensor_name("")


def test_preset_labels_and_the_preprocessing_summary_keep_their_english() -> None:
    assert all(isinstance(label, Message) for label in PRESET_LABELS.values())
    with translation.override("en"):
        assert localize(PRESET_LABELS["raw"]) == "Raw pixels 0..255"
        summary = _preprocess_summary(PRESETS["efficientnet"].to_dict())
        assert summary == "short side 256, centre 224 crop; mean 127, std 128; RGB"
        stretched = Preprocess(resize_short=0, crop=None, layout="NHWC")
        assert _preprocess_summary(stretched.to_dict()) == (
            "stretched to the model's size; mean 0, std 1; RGB, NHWC"
        )
        named = Preprocess(256, 224, (0.0,) * 3, (255.0,) * 3, layout="NCHW")
        assert _preprocess_name(named) == "Pixels scaled to 0..1, layout NCHW"


# The web layer says them in the request's language ------------------------------------------


def test_the_infer_api_answers_a_bad_input_in_the_requests_language(
    viewer, operator, settings, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    settings.TRITON_URL = settings.TRITON_GRPC_URL = "127.0.0.1:9"  # nothing listens
    served_model("mlp", operator, SIGNATURE)
    _translate(
        monkeypatch,
        "Input %(input)s: %(key)s must be a base64 string.",
        "输入 %(input)s：%(key)s 必须是 base64 字符串。",
    )
    client = Client(HTTP_AUTHORIZATION=f"Token {token_for(viewer)}")
    body = json.dumps({"inputs": {"x": {"b64": 5, "shape": [1, 4]}}})

    def infer(headers: dict[str, str]):  # type: ignore[no-untyped-def]
        return client.post(
            "/api/v1/models/mlp/infer", data=body, content_type="application/json", **headers
        )

    english, chinese = infer(EN), infer(ZH)
    assert english.status_code == chinese.status_code == 400
    assert english.json() == {
        "error": "Input 'x': 'b64' must be a base64 string.",
        "code": "bad_format",
        "input": "x",
    }
    assert chinese.json() == {
        "error": "输入 'x'：'b64' 必须是 base64 字符串。",
        "code": "bad_format",
        "input": "x",
    }


def test_creating_a_model_with_a_bad_name_is_refused_in_the_active_language(
    operator, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    _translate(monkeypatch, "it is empty", "名称为空")
    _translate(
        monkeypatch,
        "The %(kind)s %(value)s is not allowed: %(reason)s. %(rules)s",
        "%(kind)s %(value)s 不可用：%(reason)s。%(rules)s",
    )
    for language, reason in (("en", "it is empty."), ("zh-hans", "不可用：名称为空。")):
        with translation.override(language), pytest.raises(HubError) as caught:
            create_model(name="", target="onnxruntime", description="", user=operator)
        assert caught.value.code == "invalid_name"
        assert reason in caught.value.message, caught.value.message


def test_the_metrics_range_refusal_follows_accept_language(viewer, operator, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    served_model("mlp", operator, SIGNATURE)
    _translate(
        monkeypatch,
        "%(field)s must be one of %(choices)s; got %(got)s.",
        "%(field)s 必须是 %(choices)s 之一；收到 %(got)s。",
    )
    client = Client(HTTP_AUTHORIZATION=f"Token {token_for(viewer)}")
    english = client.get("/api/v1/models/mlp/metrics?range=year", **EN).json()
    chinese = client.get("/api/v1/models/mlp/metrics?range=year", **ZH).json()
    assert english["code"] == chinese["code"] == "invalid_field"
    assert english["error"].startswith("'range' must be one of ")
    assert english["error"].endswith("; got 'year'.")
    assert chinese["error"].startswith("'range' 必须是 ") and chinese["error"].endswith("。")


def test_metrics_refuse_a_user_without_a_role_in_the_requests_language(
    db, settings, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    from django.contrib.auth import get_user_model

    from webapp.accounts.auth import NO_ROLE_MESSAGE
    from webapp.ops.prometheus import NO_ROLE

    settings.METRICS_PUBLIC = False
    nobody = get_user_model().objects.create_user("nemo", password=PASSWORD)
    _translate(monkeypatch, NO_ROLE_MESSAGE, "你的账号还没有角色。")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token_for(nobody)}")
    english, chinese = client.get("/metrics", **EN), client.get("/metrics", **ZH)
    assert english.status_code == chinese.status_code == 403
    assert english.content.decode() == NO_ROLE
    assert chinese.content.decode() == "403 Forbidden: 你的账号还没有角色。\n"


def test_an_array_is_still_decoded_when_nothing_is_wrong() -> None:
    arrays = decode_inputs(SPECS, {"x": [1, 2, 3, 4]}, Limits())
    assert arrays["x"].shape == (1, 4) and arrays["x"].dtype == np.float32
