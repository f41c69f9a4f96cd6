"""``webapp.text.localized``: every message in an answer said, nothing else touched."""

from __future__ import annotations

from django.utils import translation

from model_store.text import say
from webapp.text import localized

UPLOADED = say("%(user)s uploaded %(file)s as version %(number)s.", user="a", file="f", number=1)


def test_a_list_of_plain_values_is_answered_as_it_is() -> None:
    values = [0.25, 1, True, None, "cat"]
    assert localized(values) is values  # looked at once, not copied item by item
    assert localized({"data": values})["data"] is values


def test_messages_are_found_in_lists_beside_plain_values() -> None:
    answer = {"steps": [1.5, UPLOADED, UPLOADED.to_json(), ["x", UPLOADED]], "n": (1, 2)}
    said = localized(answer)
    assert said["steps"][1] == "a uploaded f as version 1."
    assert said["steps"][2] == "a uploaded f as version 1."
    assert said["steps"][3] == ["x", "a uploaded f as version 1."]
    assert said["n"] == (1, 2)


def test_messages_are_said_in_the_active_language() -> None:
    with translation.override("zh-hans"):
        said = localized({"events": [{"message": UPLOADED.to_json()}], "scores": [0.5] * 3})
    assert said["events"][0]["message"] != "a uploaded f as version 1."
    assert said["scores"] == [0.5, 0.5, 0.5]


def test_a_str_subclass_is_still_walked_and_kept() -> None:
    class Name(str):
        pass

    assert localized([Name("x"), 1]) == ["x", 1]
