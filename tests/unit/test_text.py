"""Messages (model_store/text.py): values, not strings; stored once; said when shown."""

from __future__ import annotations

import copy
import json
import pickle

import pytest
from django.utils import translation

from model_store.text import Message, as_json, from_json, joined, restored, say, say_n, set_strict
from webapp.text import MessageEncoder, localize, localized


def test_a_message_is_a_value_whose_str_is_the_english() -> None:
    said = say("Triton at %(url)s does not answer.", url="http://t:8000")
    assert not isinstance(said, str)
    assert str(said) == "Triton at http://t:8000 does not answer."
    assert said.template == "Triton at %(url)s does not answer."
    assert said.params == {"url": "http://t:8000"}
    # Compares with its English, so that checks read as before; frozen.
    assert said == "Triton at http://t:8000 does not answer."
    assert "does not answer" in said
    with pytest.raises(AttributeError):
        said.template = "other"  # type: ignore[misc]


def test_formatting_a_message_into_a_string_fails_loudly_under_the_tests() -> None:
    said = say("%(n)s models", n=2)
    with pytest.raises(TypeError, match="formatted into a string"):
        f"{said}"
    with pytest.raises(TypeError, match="formatted into a string"):
        "{}".format(said)  # noqa: UP032
    with pytest.raises(TypeError, match="joined to a string"):
        "Found: " + said  # type: ignore[operator]
    with pytest.raises(TypeError):
        " ".join([said])  # type: ignore[list-item]
    assert f"{said!s}" == "2 models"  # the explicit way to the English, for logs


def test_outside_the_tests_formatting_gives_the_english() -> None:
    said = say("%(n)s models", n=2)
    set_strict(False)
    try:
        assert f"{said}" == "2 models"
        assert "Found: " + said == "Found: 2 models"  # type: ignore[operator]
    finally:
        set_strict(True)


def test_a_percent_sign_without_parameters_is_kept_as_written() -> None:
    assert str(say("100% of requests failed")) == "100% of requests failed"


def test_plural_chooses_the_english_form_and_offers_count() -> None:
    assert str(say_n("%(count)s check", "%(count)s checks", 1)) == "1 check"
    assert str(say_n("%(count)s check", "%(count)s checks", 3)) == "3 checks"


def test_a_template_that_does_not_fit_its_values_fails_when_made() -> None:
    with pytest.raises(KeyError):
        say("%(missing)s and %(x)s", x=1)


def test_copies_and_pickles_keep_the_template() -> None:
    said = say("%(a)s then %(b)s", a="x", b=say("stop"))
    for again in (copy.deepcopy(said), pickle.loads(pickle.dumps(said))):  # noqa: S301 (our own bytes)
        assert isinstance(again, Message)
        assert again == said
        assert again.template == said.template
        assert isinstance(again.params["b"], Message)


def test_json_is_the_template_and_the_values_only() -> None:
    said = say("Load failed: %(why)s", why=say("timed out after %(s)s s", s=5))
    assert said.to_json() == {
        "template": "Load failed: %(why)s",
        "params": {"why": {"template": "timed out after %(s)s s", "params": {"s": 5}}},
    }
    back = from_json(json.loads(json.dumps(said.to_json())))
    assert isinstance(back, Message)
    assert back == said
    assert isinstance(back.params["why"], Message)
    plural = say_n("%(count)s check", "%(count)s checks", 3).to_json()
    assert plural["plural"] == "%(count)s checks" and plural["count"] == 3


def test_records_store_messages_at_any_depth_and_read_them_back() -> None:
    record = {"found": say("%(n)s devices", n=2), "lines": [say("a"), "plain"], "state": "ok"}
    stored = json.loads(json.dumps(as_json(record)))
    assert stored["found"] == {"template": "%(n)s devices", "params": {"n": 2}}
    assert stored["lines"][1] == "plain"
    assert restored(stored) == record
    # Django's JSON columns store them the same way.
    assert json.loads(json.dumps(record, cls=MessageEncoder)) == stored


def test_words_without_a_template_are_shown_as_they_are() -> None:
    assert from_json("otto switched mlp to v1") == "otto switched mlp to v1"
    assert localize("as stored") == "as stored"
    assert localize(None) == ""
    # A mapping with other keys is a record, not a message.
    assert localized({"template": "x", "name": "y"}) == {"template": "x", "name": "y"}


def test_render_uses_the_given_translation_and_falls_back_on_a_broken_one() -> None:
    said = say("%(n)s models", n=2)
    assert said.render(lambda s: "%(n)s 个模型", lambda s, p, n: s) == "2 个模型"
    assert said.render(lambda s: "%(wrong)s 个模型", lambda s, p, n: s) == "2 models"


def test_localized_says_every_message_of_an_answer_in_the_active_language() -> None:
    answer = {"error": say("Not found."), "items": [{"message": say("Not found.").to_json()}]}
    with translation.override("zh-hans"):
        said = localized(answer)
        assert said["error"] == said["items"][0]["message"] == translation.gettext("Not found.")
    with translation.override("en"):
        assert localized(answer)["error"] == "Not found."


def test_joined_sentences_are_one_message() -> None:
    said = joined([say("One."), "two", say("Three.")])
    assert isinstance(said, Message)
    assert str(said) == "One. two Three."
    assert joined([]) == ""
    assert str(joined([say("a"), say("b")], "; ")) == "a; b"


def test_odd_stored_data_from_a_node_is_shown_as_its_template_never_a_crash() -> None:
    assert from_json({"template": "a %(x)s", "params": [1, 2]}) == "a %(x)s"
    assert from_json({"template": "%(x)999999999s", "params": {"x": 1}}) == "%(x)999999999s"
    assert from_json({"template": "%(gone)s and %(missing)s", "params": {"gone": 1}}) == (
        "%(gone)s and %(missing)s"
    )


def test_a_precision_in_the_hubs_own_templates_still_round_trips() -> None:
    back = from_json(say("%(ms).1f ms", ms=2.25).to_json())
    assert isinstance(back, Message)
    assert back == "2.2 ms"
