"""Messages: sentences for people, kept as a template and its values until someone reads them.

``model_store`` never imports Django, yet what it says (a diagnostics finding, the advice on the
Metrics tab, a job step, an ATC error explained) must reach a Chinese reader in Chinese. So it
writes each sentence the way gettext expects, as an English template with named placeholders,
and keeps the template and the values apart::

    say("Triton at %(url)s does not answer.", url=url)

The result is a :class:`Message`, a frozen value and deliberately *not* a ``str``: ``str()`` of
it is the English (logs, exceptions), and the web layer says it in the reader's language when it
is shown (:meth:`Message.render` with ``gettext``/``ngettext``). Because it is not a ``str``, a
type checker flags a message passed where text is expected, and the ways Python would quietly
turn it into English inside a bigger string (an f-string, ``.format()``, ``+``) raise under the
tests (:func:`set_strict`), so that no half-English sentence reaches a page unnoticed.

A message is stored and sent as JSON (:meth:`Message.to_json`, :func:`from_json`): the template,
its values (nested messages as their own JSON) and, for plurals, the plural template and count.
Nothing else is kept; English is rendered from the template like any other language.

``makemessages`` finds the templates because the web layer's ``makemessages`` command passes
``--keyword=say`` and ``--keyword=say_n:1,2`` to xgettext (webapp/management/commands).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

Translate = Callable[[str], str]
TranslatePlural = Callable[[str, str, int], str]

#: Under the tests (``HUB_STRICT_MESSAGES=1``, set by tests/conftest.py and inherited by the
#: workers they start) formatting a message into a string raises instead of giving English.
_strict = os.environ.get("HUB_STRICT_MESSAGES") == "1"


def set_strict(on: bool) -> None:
    """Make accidental formatting of a message raise (tests) or give its English (production)."""
    global _strict
    _strict = on


class Message:
    """A sentence for people: an English template (gettext's msgid) and the values it names.

    Attributes:
        template: The English template, e.g. ``"Triton at %(url)s does not answer."``.
        params: The named values; a value may itself be a :class:`Message`.
        plural: The plural template for :func:`say_n`; ``None`` for a plain sentence.
        count: The number that chooses between ``template`` and ``plural``.
    """

    __slots__ = ("count", "params", "plural", "template")

    template: str
    params: Mapping[str, Any]
    plural: str | None
    count: int

    def __init__(
        self,
        template: str,
        params: Mapping[str, Any] | None = None,
        plural: str | None = None,
        count: int = 1,
    ) -> None:
        values = dict(params or {})
        for name, value in (("template", template), ("params", values)):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "plural", plural)
        object.__setattr__(self, "count", count)
        _fill(self._chosen(), values)  # a template that does not fit its values fails here

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a Message is frozen; {name!r} cannot change")

    def __reduce__(self) -> tuple[Any, ...]:
        # copy, deepcopy and pickle rebuild the message from its parts.
        return (Message, (self.template, dict(self.params), self.plural, self.count))

    def _chosen(self) -> str:
        return self.template if self.plural is None or self.count == 1 else self.plural

    def __str__(self) -> str:
        values = {k: str(v) if isinstance(v, Message) else v for k, v in self.params.items()}
        return _fill(self._chosen(), values)

    def __repr__(self) -> str:
        return f"Message({str(self)!r})"

    def __bool__(self) -> bool:
        return bool(self.template)

    def __eq__(self, other: object) -> bool:
        # Equal to another message with the same parts, and to the plain English it says, so that
        # a check such as ``finding.message == "..."`` reads as it always did.
        if isinstance(other, Message):
            return self._key() == other._key()
        if isinstance(other, str):
            return str(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(str(self))

    def _key(self) -> tuple[Any, ...]:
        return (self.template, self.plural, self.count, sorted(self.params.items()))

    # The ways a message would silently become English inside a longer string.
    def __format__(self, spec: str) -> str:
        _refuse("formatted into a string (f-string or .format())")
        return format(str(self), spec)

    def __add__(self, other: object) -> str:
        _refuse("joined to a string with +")
        return str(self) + str(other)

    def __radd__(self, other: object) -> str:
        _refuse("joined to a string with +")
        return str(other) + str(self)

    def __contains__(self, part: str) -> bool:
        # Searching the English (``"CANN" in finding.message``) makes no text for a reader.
        return part in str(self)

    def render(self, translate: Translate, translate_plural: TranslatePlural) -> str:
        """The sentence in the language ``translate`` speaks; English when it cannot be said.

        A translation whose placeholders do not fit the parameters (a broken catalogue entry)
        gives the English sentence rather than an error on the page.
        """
        values = {
            key: value.render(translate, translate_plural) if isinstance(value, Message) else value
            for key, value in self.params.items()
        }
        if self.plural is None:
            said = translate(self.template)
        else:
            said = translate_plural(self.template, self.plural, self.count)
        try:
            return _fill(said, values)
        except (KeyError, ValueError, TypeError):
            return str(self)

    def to_json(self) -> dict[str, Any]:
        """The message as JSON-ready data that :func:`from_json` turns back into a message."""
        data: dict[str, Any] = {
            "template": self.template,
            "params": {key: _param_json(value) for key, value in self.params.items()},
        }
        if self.plural is not None:
            data["plural"] = self.plural
            data["count"] = self.count
        return data


#: What a record's sentence may be: a message, or plain words (a name, a user's own text, an
#: English line from an outside tool) shown as they are.
Said: TypeAlias = Message | str


def say(template: str, /, **params: Any) -> Message:
    """A message from a gettext template with named placeholders (``%(name)s``).

    Write the whole sentence as the template, never an f-string: the translator needs it whole.
    With no parameters the template is the sentence as it stands (a ``%`` needs no doubling).
    """
    return Message(template, params)


def say_n(singular: str, plural: str, count: int, /, **params: Any) -> Message:
    """Like :func:`say`, with a singular and a plural template chosen by ``count``.

    ``count`` is also available to the templates as ``%(count)s`` unless given otherwise.
    """
    params.setdefault("count", count)
    return Message(singular, params, plural=plural, count=count)


_JOINERS = {
    "; ": "%(first)s; %(then)s",
    ", ": "%(first)s, %(then)s",
    " ": "%(first)s %(then)s",
}


def joined(parts: Sequence[Said], separator: str = " ") -> Said:
    """Sentences (or clauses) said one after the other, as one translatable message.

    ``separator`` is ``" "`` (sentences), ``"; "`` or ``", "`` (clauses); each is its own
    template, so a language that joins them differently (Chinese: no space, full-width marks)
    can. Plain values (names, paths) are data: join those with ``", ".join`` instead.
    """
    if separator not in _JOINERS:
        raise ValueError(f"no template joins with {separator!r}")
    if not parts:
        return ""
    said: Said = parts[-1]
    for part in reversed(parts[:-1]):
        said = Message(_JOINERS[separator], {"first": part, "then": said})
    return said


def said(exc: BaseException) -> Said:
    """What an error says: the :class:`Message` it was raised with (its ``message``, or its one
    argument), so the sentence stays translatable; else its words; else its type's name."""
    for candidate in (getattr(exc, "message", None), *exc.args[:1]):
        if isinstance(candidate, Message) and str(candidate) == str(exc):
            return candidate
    return str(exc) or type(exc).__name__


def as_json(value: Any) -> Any:
    """``value`` as stored or sent: every message in it (a sentence, or a record and list holding
    some) as its JSON; everything else as it is."""
    if isinstance(value, Message):
        return value.to_json()
    if isinstance(value, Mapping):
        return {key: as_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json(item) for item in value]
    return value


def from_json(data: Any) -> Said:
    """The :class:`Message` that :meth:`Message.to_json` stored; plain words stay words.

    Data from outside (a node's report) is not trusted: a template that is not what
    :meth:`Message.to_json` writes, or that no longer fits its values, comes back as its English
    template rather than an error.
    """
    if is_message_json(data):
        stored = data.get("params") or {}
        plural = data.get("plural")
        templates = [data["template"], plural if isinstance(plural, str) else ""]
        if not isinstance(stored, Mapping) or any(_WIDE.search(t) for t in templates):
            return str(data["template"])
        params = {key: _param_from_json(value) for key, value in stored.items()}
        try:
            return Message(
                data["template"],
                params,
                plural=plural if isinstance(plural, str) else None,
                count=int(data.get("count", 1)),
            )
        except (KeyError, ValueError, TypeError):
            return str(data["template"])
    if isinstance(data, Message):
        return data
    return "" if data is None else str(data)


def restored(data: Any) -> Any:
    """``data`` as read back (a record, a report from a node): every message JSON in it, at any
    depth, turned back into a :class:`Message` (see :func:`from_json`); the rest as it is."""
    if is_message_json(data):
        return from_json(data)
    if isinstance(data, Mapping):
        return {key: restored(value) for key, value in data.items()}
    if isinstance(data, list):
        return [restored(item) for item in data]
    return data


#: The keys :meth:`Message.to_json` writes: a stored mapping with a string ``template`` and no
#: other keys is a message, whatever else a JSON record holds.
_MESSAGE_KEYS = frozenset({"template", "params", "plural", "count"})


def is_message_json(data: Any) -> bool:
    """Whether ``data`` is a message as :meth:`Message.to_json` stores it."""
    return (
        isinstance(data, Mapping)
        and isinstance(data.get("template"), str)
        and set(data) <= _MESSAGE_KEYS
    )


#: A width, or a precision of 3+ digits, in a placeholder (``%(x)999999999s``): the hub's own
#: templates have none, and rendering one that came from outside could allocate without bound.
_WIDE = re.compile(r"%(\([^)]*\))?[-#0 +]*(\*|[0-9]+|\.(\*|[0-9]{3,}))")


def _refuse(how: str) -> None:
    if _strict:
        raise TypeError(
            f"a Message was {how}: that gives English on every page. Pass the message itself "
            "(or a say() template naming it), and let the web layer say it (webapp/text.py)."
        )


def _fill(template: str, values: Mapping[str, Any]) -> str:
    return template % values if values else template


def _param_json(value: Any) -> Any:
    if isinstance(value, Message):
        return value.to_json()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _param_from_json(value: Any) -> Any:
    if is_message_json(value):
        return from_json(value)
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)
