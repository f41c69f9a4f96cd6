"""The web layer's side of :mod:`model_store.text`: messages stored as JSON, said when shown.

A :class:`~model_store.text.Message` is stored once, as its template and values
(:class:`MessageField` for a column, :class:`MessageEncoder` for messages inside a JSON record),
and said in the reader's language only when a page or an answer shows it: :func:`localize` for
one sentence, :func:`localized` for a whole record (what the API answers), and the ``translated``
template filter (webapp/accounts/templatetags/hub_i18n.py) on pages. English is one more language
here: without ``Accept-Language`` the answer is the template filled in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils.translation import gettext, ngettext

from model_store.text import Message, Said, from_json, is_message_json


def localize(value: Any) -> str:
    """``value`` in the active language: a message, its stored JSON, or plain words."""
    if isinstance(value, Message):
        return value.render(gettext, ngettext)
    if is_message_json(value):
        return localize(from_json(value))
    return "" if value is None else str(value)


#: Types that are never a message: a list made only of these is answered as it is.
_PLAIN = frozenset((str, int, float, bool, type(None)))


def localized(data: Any) -> Any:
    """``data`` (a record, a list of them) with every message in it said in the active language.

    For JSON answers: what the API returns is plain strings in the caller's language, never the
    stored templates.
    """
    if isinstance(data, Message):
        return localize(data)
    if isinstance(data, Mapping):
        if is_message_json(data):
            return localize(data)
        return {key: localized(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        # A tensor's values (an inference answer can hold millions) or a list of names: no
        # message inside, so one quick look instead of a call per item (bench/localized_answers.py).
        if _PLAIN.issuperset(map(type, data)):  # exact types, looked at in C
            return data
        return [localized(item) for item in data]
    return data


class MessageEncoder(DjangoJSONEncoder):
    """JSON for records that hold messages: each one as its template and values."""

    def default(self, o: Any) -> Any:
        if isinstance(o, Message):
            return o.to_json()
        return super().default(o)


class MessageField(models.JSONField):
    """A column holding one sentence: a :class:`Message` (stored as its template and values) or
    plain words (stored as a JSON string). Reads give back the message, or the words."""

    description = "A message: a gettext template and its values, or plain text"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("encoder", MessageEncoder)
        kwargs.setdefault("default", str)  # a callable: "" for a new row
        kwargs.setdefault("blank", True)
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        for key, value in (("encoder", MessageEncoder), ("default", str), ("blank", True)):
            if key in kwargs and kwargs[key] is value:
                del kwargs[key]
        return name, path, args, kwargs

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Said:
        return from_json(super().from_db_value(value, expression, connection))

    def to_python(self, value: Any) -> Said:
        return from_json(value)
