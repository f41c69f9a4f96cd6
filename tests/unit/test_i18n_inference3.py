# ruff: noqa: RUF001  (the Chinese test strings use full-width punctuation, as translations do)
"""Try it's last English leftovers are said in the reader's language (issue 22).

A tensor of any shape in "The model takes: ..." keeps its words translatable, the result's
fallback class label and "first N" values count go through gettext, and so does the labels
section's "N class names saved". The English is what it was.
"""

from __future__ import annotations

import pytest
from django.utils import translation
from django.utils.translation import trans_real

from model_store.inference import InferenceInputError, Limits, decode_inputs, specs_from_signature
from model_store.text import Message
from webapp.registry.tryit.views.partials import _present_output
from webapp.text import localize

ANY_SHAPE = {
    "inputs": [
        {"name": "x", "dtype": "TYPE_FP32", "numpy": "float32", "dims": ["batch", 4]},
        {"name": "blob", "dtype": "TYPE_FP32", "numpy": "float32"},
    ],
    "outputs": [],
}


def _translate(monkeypatch: pytest.MonkeyPatch, msgid: str, msgstr: str) -> None:
    """Put one zh-Hans catalogue entry in place for this test (monkeypatch undoes it)."""
    catalog = trans_real.translation("zh-hans")._catalog
    monkeypatch.setitem(catalog._catalogs[0], msgid, msgstr)


def _refusal(payload: dict[str, object]) -> Message:
    with pytest.raises(InferenceInputError) as caught:
        decode_inputs(specs_from_signature(ANY_SHAPE), payload, Limits())
    message = caught.value.message
    assert isinstance(message, Message), message
    return message


def test_an_input_of_any_shape_is_described_from_a_template(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    message = _refusal({"x": [[1, 2, 3, 4]]})
    assert message == (
        "'blob' is missing. The model takes: 'x' (FP32 [batch, 4]), 'blob' (FP32 any shape)."
    )
    takes = message.params["takes"]
    assert takes.template == "%(first)s, %(then)s"
    assert takes.params["first"] == "'x' (FP32 [batch, 4])"
    assert takes.params["then"].template == "%(name)s (%(type)s any shape)"
    assert takes.params["then"].params == {"name": "'blob'", "type": "FP32"}
    _translate(monkeypatch, "%(name)s (%(type)s any shape)", "%(name)s（%(type)s，任意形状）")
    with translation.override("zh-hans"):
        assert "'blob'（FP32，任意形状）" in localize(message)
    with translation.override("en"):
        assert localize(message) == str(message)


def test_fixed_shapes_are_still_described_as_plain_data() -> None:
    message = _refusal({})
    assert message.params["takes"].params["first"] == "'x' (FP32 [batch, 4])"
    with pytest.raises(InferenceInputError) as caught:
        decode_inputs(specs_from_signature({"inputs": ANY_SHAPE["inputs"][:1]}), {}, Limits())
    assert caught.value.message.params["takes"] == "'x' (FP32 [batch, 4])"


def test_the_results_fallback_label_and_values_count_follow_the_language(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    out = {
        "name": "y",
        "shape": [1, 3],
        "top_k": [{"index": 7, "probability": 0.5, "label": None}],
        "values": [0.5, 0.25],
        "truncated": True,
    }
    with translation.override("en"):
        shown = _present_output(out)
    assert shown["rows"][0]["label"] == "class 7"
    assert shown["values_count"] == "first 2"
    _translate(monkeypatch, "class %(index)s", "类别 %(index)s")
    _translate(monkeypatch, "first %(count)s", "前 %(count)s 个")
    with translation.override("zh-hans"):
        shown = _present_output(out)
    assert shown["rows"][0]["label"] == "类别 7"
    assert shown["values_count"] == "前 2 个"
    assert _present_output({**out, "truncated": False})["values_count"] == "2"
