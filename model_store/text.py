"""Text for people that the web layer can say in another language.

``model_store`` never imports Django, yet what it says (a diagnostics finding, the advice on the
Metrics tab, a job step, an ATC error explained) must reach a Chinese reader in Chinese. So it
writes each sentence the way gettext expects, as an English template with named placeholders,
and keeps the template and the values apart::

    say("Triton at %(url)s does not answer.", url=url)

The result is a :class:`Text`: a ``str`` holding the English sentence, so every caller that
treats it as text (logs, tests, the API's English answers) is unchanged, which also remembers its
template and parameters. The web layer translates the template with Django's catalogues and
fills in the parameters (:meth:`Text.render` with ``gettext``/``ngettext``).

Text crosses process boundaries as JSON (a node's host report, a job's stored steps, an event):
:meth:`Text.to_json` and :func:`from_json` carry the template and the parameters, and
:func:`texts_of` / the ``texts`` key keep a record's plain strings as they were for older readers.

``makemessages`` finds the templates because the web layer's ``makemessages`` command passes
``--keyword=say`` and ``--keyword=say_n:1,2`` to xgettext (webapp/management/commands).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Translate = Callable[[str], str]
TranslatePlural = Callable[[str, str, int], str]


class Text(str):
    """An English sentence that remembers its template and parameters.

    Attributes:
        template: The English template (gettext's msgid), e.g. ``"%(n)s models"``.
        plural: The plural template for :func:`say_n`; ``None`` for plain text.
        number: The number that chooses between ``template`` and ``plural``.
        params: The named values; a value may itself be a :class:`Text`.
    """

    template: str
    plural: str | None
    number: int
    params: dict[str, Any]

    def __new__(
        cls,
        template: str,
        params: Mapping[str, Any] | None = None,
        plural: str | None = None,
        count: int = 1,
    ) -> Text:
        values = dict(params or {})
        chosen = template if plural is None or count == 1 else plural
        obj = super().__new__(cls, _fill(chosen, values))
        obj.template = template
        obj.plural = plural
        obj.number = count
        obj.params = values
        return obj

    def __getnewargs__(self) -> tuple[Any, ...]:
        # copy, deepcopy and pickle rebuild the Text from its parts, not from the English.
        return (self.template, self.params, self.plural, self.number)

    def render(self, translate: Translate, translate_plural: TranslatePlural) -> str:
        """The sentence in the language ``translate`` speaks; English when it cannot be said.

        A translation whose placeholders do not fit the parameters (a broken catalogue entry)
        gives the English sentence rather than an error on the page.
        """
        values = {
            key: value.render(translate, translate_plural) if isinstance(value, Text) else value
            for key, value in self.params.items()
        }
        if self.plural is None:
            said = translate(self.template)
        else:
            said = translate_plural(self.template, self.plural, self.number)
        try:
            return _fill(said, values)
        except (KeyError, ValueError, TypeError):
            return str(self)

    def to_json(self) -> dict[str, Any]:
        """The text as JSON-ready data that :func:`from_json` turns back into a :class:`Text`."""
        data: dict[str, Any] = {
            "text": str(self),
            "template": self.template,
            "params": {key: _param_json(value) for key, value in self.params.items()},
        }
        if self.plural is not None:
            data["plural"] = self.plural
            data["count"] = self.number
        return data


def say(template: str, /, **params: Any) -> Text:
    """English text from a gettext template with named placeholders (``%(name)s``).

    Write the whole sentence as the template, never an f-string: the translator needs it whole.
    With no parameters the template is the sentence as it stands (a ``%`` needs no doubling).
    """
    return Text(template, params)


def say_n(singular: str, plural: str, count: int, /, **params: Any) -> Text:
    """Like :func:`say`, with a singular and a plural template chosen by ``count``.

    ``count`` is also available to the templates as ``%(count)s`` unless given otherwise.
    """
    params.setdefault("count", count)
    return Text(singular, params, plural=plural, count=count)


def joined(parts: Sequence[str], separator: str = " ") -> str:
    """Sentences (or clauses) said one after the other, as one translatable text.

    ``separator`` is ``" "`` (sentences), ``"; "`` or ``", "`` (clauses); each is its own
    template, so a language that joins them differently (Chinese: no space, full-width marks)
    can. Plain values (names, paths) are data: join those with ``", ".join`` instead.
    """
    if not parts:
        return ""
    said: str = parts[-1]
    for part in reversed(parts[:-1]):
        if separator == "; ":
            said = say("%(first)s; %(then)s", first=part, then=said)
        elif separator == ", ":
            said = say("%(first)s, %(then)s", first=part, then=said)
        elif separator == " ":
            said = say("%(first)s %(then)s", first=part, then=said)
        else:
            raise ValueError(f"no template joins with {separator!r}")
    return said


def said(exc: BaseException) -> str:
    """What an error says: the :class:`Text` it was raised with (its ``message``, or its one
    argument), so the sentence stays translatable; else its words; else its type's name."""
    for candidate in (getattr(exc, "message", None), *exc.args[:1]):
        if isinstance(candidate, Text) and str(candidate) == str(exc):
            return candidate
    return str(exc) or type(exc).__name__


def from_json(data: Any) -> Text | str:
    """The :class:`Text` that :meth:`Text.to_json` stored; a plain string stays a string."""
    if isinstance(data, Mapping) and isinstance(data.get("template"), str):
        stored = data.get("params") or {}
        plural = data.get("plural")
        templates = [data["template"], plural if isinstance(plural, str) else ""]
        if not isinstance(stored, Mapping) or any(_WIDE.search(t) for t in templates):
            # Not what to_json writes (a node's report is outside data): its English only.
            return str(data.get("text", data["template"]))
        params = {key: _param_from_json(value) for key, value in stored.items()}
        try:
            return Text(
                data["template"],
                params,
                plural=plural if isinstance(plural, str) else None,
                count=int(data.get("count", 1)),
            )
        except (KeyError, ValueError, TypeError):
            # A template that no longer fits its stored values: show the English as stored.
            return str(data.get("text", data["template"]))
    if isinstance(data, Mapping):
        return str(data.get("text", ""))
    return "" if data is None else str(data)


def field_of(record: Mapping[str, Any], field: str) -> Text | str:
    """A stored record's field as it was said: the :class:`Text` kept under ``texts`` when
    there is one, else the plain value (a record from before, or from an older node)."""
    texts = record.get("texts")
    if isinstance(texts, Mapping) and field in texts:
        return from_json(texts[field])
    value = record.get(field)
    return value if isinstance(value, str) else "" if value is None else str(value)


def texts_of(record: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The :class:`Text` values among a record's fields, as JSON, keyed by field name.

    Stored beside the record's plain strings (``record["texts"] = texts_of(record)``), so a
    reader that knows nothing of translation still finds the English where it always was.
    """
    return {key: value.to_json() for key, value in record.items() if isinstance(value, Text)}


def with_texts(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with its :class:`Text` fields also kept under ``texts`` (see :func:`texts_of`)."""
    found = texts_of(record)
    if found:
        record = {**record, "texts": {**dict(record.get("texts") or {}), **found}}
    return record


#: A width, or a precision of 3+ digits, in a placeholder (``%(x)999999999s``): the hub's own
#: templates have none, and rendering one that came from outside could allocate without bound.
_WIDE = re.compile(r"%(\([^)]*\))?[-#0 +]*(\*|[0-9]+|\.(\*|[0-9]{3,}))")


def _fill(template: str, values: Mapping[str, Any]) -> str:
    return template % values if values else template


def _param_json(value: Any) -> Any:
    if isinstance(value, Text):
        return {"__text__": value.to_json()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _param_from_json(value: Any) -> Any:
    if isinstance(value, Mapping) and "__text__" in value:
        return from_json(value["__text__"])
    return value
