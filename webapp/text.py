"""The web layer's side of :mod:`model_store.text`: say a model_store sentence in the
request's language.

``model_store`` hands over English sentences that remember their template and parameters
(:class:`~model_store.text.Text`), live or as stored JSON. :func:`localize` translates the
template with Django's catalogues and fills in the values; text that carries no template (an
event stored in English before translation existed, a user's own words) is shown as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils.translation import gettext, ngettext

from model_store.text import Text, field_of, from_json


def localize(value: Any) -> str:
    """``value`` in the active language: a :class:`Text`, its stored JSON, or plain text."""
    if isinstance(value, Text):
        return value.render(gettext, ngettext)
    if isinstance(value, Mapping):
        return localize(from_json(value))
    return "" if value is None else str(value)


def localized_field(record: Any, field: str) -> str:
    """A record's field in the active language, using the ``texts`` kept beside its strings.

    ``record`` is a mapping (a stored check, finding, step) or an object with attributes;
    ``record["texts"][field]`` (see :func:`model_store.text.with_texts`) wins over the plain
    ``record[field]``, which is what older records and outside readers have.
    """
    if isinstance(record, Mapping):
        return localize(field_of(record, field))
    return localize(getattr(record, field, ""))


def localized_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``record`` with every field kept under ``texts`` said in the active language
    (for JSON answers that follow ``Accept-Language``); ``texts`` itself is left out."""
    texts = record.get("texts")
    texts = texts if isinstance(texts, Mapping) else {}
    out = {key: value for key, value in record.items() if key != "texts"}
    for key, value in out.items():
        if isinstance(value, Text):
            out[key] = localize(value)
    for key, stored in texts.items():
        out[key] = localize(stored)
    return out
