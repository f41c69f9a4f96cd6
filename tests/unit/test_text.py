"""model_store's translatable sentences (model_store/text.py) and their web rendering."""

from __future__ import annotations

import copy
import json
import pickle

from django.utils import translation

from model_store.text import Message, field_of, from_json, say, say_n, with_texts
from webapp.text import localize, localized_field, localized_record


def test_text_is_the_english_sentence_and_keeps_its_parts() -> None:
    text = say("Triton at %(url)s does not answer.", url="http://t:8000")
    assert text == "Triton at http://t:8000 does not answer."
    assert isinstance(text, str)
    assert text.template == "Triton at %(url)s does not answer."
    assert text.params == {"url": "http://t:8000"}


def test_a_percent_sign_without_parameters_is_kept_as_written() -> None:
    assert say("100% of requests failed") == "100% of requests failed"


def test_plural_chooses_the_english_form_and_offers_count() -> None:
    assert say_n("%(count)s check", "%(count)s checks", 1) == "1 check"
    assert say_n("%(count)s check", "%(count)s checks", 3) == "3 checks"


def test_copies_and_pickles_keep_the_template() -> None:
    text = say("%(a)s then %(b)s", a="x", b=say("stop"))
    for again in (copy.deepcopy(text), pickle.loads(pickle.dumps(text))):  # noqa: S301 (our own bytes)
        assert isinstance(again, Message)
        assert again == text
        assert again.template == text.template


def test_json_round_trip_keeps_nested_sentences() -> None:
    text = say("Load failed: %(why)s", why=say("timed out after %(s)s s", s=5))
    back = from_json(json.loads(json.dumps(text.to_json())))
    assert isinstance(back, Message)
    assert back == "Load failed: timed out after 5 s"
    assert isinstance(back.params["why"], Message)


def test_stored_english_without_a_template_is_shown_as_stored() -> None:
    assert from_json("otto switched mlp to v1") == "otto switched mlp to v1"
    assert localized_field({"found": "as stored"}, "found") == "as stored"
    assert localize(None) == ""


def test_a_template_that_no_longer_fits_its_values_falls_back_to_the_english() -> None:
    stored = {"text": "kept", "template": "%(gone)s and %(missing)s", "params": {"gone": 1}}
    assert from_json(stored) == "kept"


def test_render_uses_the_given_translation_and_falls_back_on_a_broken_one() -> None:
    text = say("%(n)s models", n=2)
    assert text.render(lambda s: "%(n)s 个模型", lambda s, p, n: s) == "2 个模型"
    assert text.render(lambda s: "%(wrong)s 个模型", lambda s, p, n: s) == "2 models"


def test_records_keep_english_fields_and_texts_beside_them() -> None:
    record = with_texts({"found": say("%(n)s devices", n=2), "state": "ok"})
    assert json.loads(json.dumps(record))["found"] == "2 devices"
    assert record["texts"]["found"]["template"] == "%(n)s devices"
    with translation.override("en"):
        assert localized_field(json.loads(json.dumps(record)), "found") == "2 devices"
        assert localized_record(record) == {"found": "2 devices", "state": "ok"}


def test_odd_stored_data_from_a_node_is_shown_as_its_english_never_a_crash() -> None:
    assert from_json({"template": "a %(x)s", "params": [1, 2], "text": "as sent"}) == "as sent"
    assert from_json({"template": "%(x)999999999s", "params": {"x": 1}, "text": "t"}) == "t"
    assert localized_field({"found": "plain", "texts": ["not", "a", "mapping"]}, "found") == "plain"
    assert localized_record({"found": "plain", "texts": "odd"}) == {"found": "plain"}


def test_a_precision_in_the_hubs_own_templates_still_round_trips() -> None:
    back = from_json(say("%(ms).1f ms", ms=2.25).to_json())
    assert isinstance(back, Message)
    assert back == "2.2 ms"


def test_field_of_prefers_the_kept_template_and_keeps_live_texts() -> None:
    live = say("%(n)s devices", n=2)
    assert field_of({"found": live}, "found") is live
    stored = json.loads(json.dumps(with_texts({"found": live})))
    assert isinstance(field_of(stored, "found"), Message)
    assert field_of({"found": None}, "found") == ""
