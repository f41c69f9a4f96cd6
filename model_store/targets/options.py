"""Build options: how each is declared (:class:`OptionSpec`), parsed and described.

Options arrive from JSON or from HTML forms, so scalar values may also be given as text that
parses exactly (``"8"``, ``"true"``, ``"1,2,4"``); anything else is refused with a message that
names the field. The web layer renders forms and the API schema from the same specs.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol

from model_store.errors import ModelStoreError
from model_store.names import validate_tensor_name
from model_store.text import Message, Said, as_json, say

OptionKind = Literal["bool", "int", "float", "choice", "str", "int_list", "shape"]

MAX_TEXT_OPTION_LENGTH = 1024
MAX_LIST_ITEMS = 128

_TRUE_WORDS = frozenset({"true", "yes", "on", "1"})
_FALSE_WORDS = frozenset({"false", "no", "off", "0"})
_INT_TEXT = re.compile(r"[+-]?[0-9]+")


class InvalidOptions(ModelStoreError):
    """Build options are malformed, out of range or contradict each other."""

    code = "invalid_options"


class UnknownTarget(InvalidOptions):
    """No target has the requested name."""

    code = "unknown_target"


@dataclass(frozen=True)
class OptionSpec:
    """One build option, described well enough to generate a form and a JSON schema.

    Attributes:
        name: Key in the options dict.
        kind: ``bool``, ``int``, ``float``, ``choice`` (one of ``choices``),
            ``str``, ``int_list`` (list of ints) or ``shape`` (input name ->
            list of dims, ``-1`` for a dynamic dim).
        default: Value used when the key is absent or null. None means
            "not set" or, where the help says so, "automatic from the model".
        label: Short form label.
        help: One or two sentences: what it does and when to change it.
        choices: ``(value, label)`` pairs: the only values of a ``choice`` option, the
            suggestions of a ``str`` option (which takes any value matching ``pattern``).
        minimum: Inclusive lower bound (numbers, and each item of int lists).
        maximum: Inclusive upper bound.
        advanced: Hidden behind "advanced" in the form.
        required: The user must give a value (no default).
        pattern: Regular expression a ``str`` value must match in full.
    """

    name: str
    kind: OptionKind
    default: Any
    label: Said
    help: Said
    choices: Sequence[tuple[str, Said]] | None = None
    minimum: float | None = None
    maximum: float | None = None
    advanced: bool = False
    required: bool = False
    pattern: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON-able data (choices as ``[{"value", "label"}]``)."""
        data = asdict(self)
        data["choices"] = (
            [{"value": v, "label": lbl} for v, lbl in self.choices] if self.choices else None
        )
        return dict(as_json(data))

    def json_schema(self) -> dict[str, Any]:
        """JSON schema (draft 2020-12 / OpenAPI 3.1) of this option's value; its title and
        description as messages' JSON (:func:`~model_store.text.as_json`)."""
        schema: dict[str, Any] = {
            "title": as_json(self.label),
            "description": as_json(self.help),
        }
        if self.kind == "bool":
            schema["type"] = "boolean"
        elif self.kind in ("int", "float"):
            schema["type"] = "integer" if self.kind == "int" else "number"
            _bounds(schema, self.minimum, self.maximum, "minimum", "maximum")
        elif self.kind == "choice":
            schema["enum"] = [value for value, _ in self.choices or []]
        elif self.kind == "str":
            schema["type"] = "string"
            schema["maxLength"] = MAX_TEXT_OPTION_LENGTH
            if self.pattern:
                schema["pattern"] = f"^(?:{self.pattern})$"
            if self.choices:
                schema["examples"] = [value for value, _ in self.choices]
        elif self.kind == "int_list":
            items: dict[str, Any] = {"type": "integer"}
            _bounds(items, self.minimum, self.maximum, "minimum", "maximum")
            schema.update(type="array", items=items, maxItems=MAX_LIST_ITEMS)
        else:  # shape
            dims = {"type": "array", "items": {"type": "integer", "minimum": -1}}
            schema.update(type="object", additionalProperties=dims)
        if self.default is None and not self.required:
            _allow_null(schema)
        else:
            schema["default"] = self.default
        return schema


def _bounds(
    schema: dict[str, Any], low: float | None, high: float | None, low_key: str, high_key: str
) -> None:
    if low is not None:
        schema[low_key] = low
    if high is not None:
        schema[high_key] = high


def _allow_null(schema: dict[str, Any]) -> None:
    """Lets a schema accept null ("use the automatic value")."""
    if "enum" in schema:
        schema["enum"] = [*schema["enum"], None]
    elif "type" in schema:
        schema["type"] = [schema["type"], "null"]
    schema["default"] = None


def _fail(spec: OptionSpec, problem: Said) -> InvalidOptions:
    """The refusal naming the option; ``problem`` is a ``say()`` sentence (model_store.text)."""
    return InvalidOptions(
        say(
            "Option '%(name)s' (%(label)s): %(problem)s",
            name=spec.name,
            label=spec.label,
            problem=problem,
        )
    )


def _parse_bool(spec: OptionSpec, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE_WORDS | _FALSE_WORDS:
        return value.strip().lower() in _TRUE_WORDS
    raise _fail(spec, say("expected true or false, got %(value)s.", value=repr(value)))


def _check_range(spec: OptionSpec, number: float, what: Message | None = None) -> None:
    what = what or say("value")
    if spec.minimum is not None and number < spec.minimum:
        raise _fail(
            spec,
            say(
                "%(what)s %(number)s is below the minimum %(minimum)s.",
                what=what,
                number=number,
                minimum=f"{spec.minimum:g}",
            ),
        )
    if spec.maximum is not None and number > spec.maximum:
        raise _fail(
            spec,
            say(
                "%(what)s %(number)s is above the maximum %(maximum)s.",
                what=what,
                number=number,
                maximum=f"{spec.maximum:g}",
            ),
        )


def _to_int(spec: OptionSpec, value: object, what: Message | None = None) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _INT_TEXT.fullmatch(value.strip()):
        return int(value.strip())
    raise _fail(
        spec,
        say(
            "%(what)s must be a whole number, got %(value)s.",
            what=what or say("value"),
            value=repr(value),
        ),
    )


def _parse_int(spec: OptionSpec, value: object) -> int:
    number = _to_int(spec, value)
    _check_range(spec, number)
    return number


def _parse_float(spec: OptionSpec, value: object) -> float:
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None or not math.isfinite(number):
        raise _fail(spec, say("expected a finite number, got %(value)s.", value=repr(value)))
    _check_range(spec, number)
    return number


def _parse_choice(spec: OptionSpec, value: object) -> str:
    allowed = [v for v, _ in spec.choices or []]
    if not isinstance(value, str) or value not in allowed:
        raise _fail(
            spec,
            say(
                "%(value)s is not one of: %(allowed)s.",
                value=repr(value),
                allowed=", ".join(allowed),
            ),
        )
    return value


def _parse_str(spec: OptionSpec, value: object) -> str:
    if not isinstance(value, str):
        raise _fail(spec, say("expected text, got %(kind)s.", kind=type(value).__name__))
    text = value.strip()
    if len(text) > MAX_TEXT_OPTION_LENGTH or not text.isprintable():
        raise _fail(spec, say("the text is too long or contains control characters."))
    if spec.pattern and not re.fullmatch(spec.pattern, text):
        raise _fail(
            spec,
            say(
                "%(value)s does not have the expected form. %(help)s",
                value=repr(text),
                help=spec.help,
            ),
        )
    return text


def _parse_int_list(spec: OptionSpec, value: object) -> list[int]:
    items: Sequence[object]
    if isinstance(value, str):
        items = [part for part in re.split(r"[,;\s]+", value.strip()) if part]
    elif isinstance(value, list | tuple):
        items = value
    else:
        raise _fail(
            spec, say("expected a list of whole numbers, got %(value)s.", value=repr(value))
        )
    if len(items) > MAX_LIST_ITEMS:
        raise _fail(spec, say("at most %(count)s numbers are allowed.", count=MAX_LIST_ITEMS))
    numbers = [_to_int(spec, item, say("each item")) for item in items]
    for number in numbers:
        _check_range(spec, number, say("item"))
    return sorted(set(numbers))  # order and repeats carry no meaning for batch sizes


def _parse_dims(spec: OptionSpec, name: str, dims: object) -> list[int]:
    parts: Sequence[object]
    if isinstance(dims, str):
        parts = [p for p in dims.replace(" ", "").split(",") if p]
    elif isinstance(dims, list | tuple):
        parts = dims
    else:
        raise _fail(
            spec,
            say(
                "the dims of %(name)s must be a list or text like '1,3,224,224'.",
                name=repr(name),
            ),
        )
    values = [_to_int(spec, part, say("a dim of %(name)s", name=repr(name))) for part in parts]
    if not values or len(values) > 16:
        raise _fail(
            spec,
            say(
                "%(name)s needs between 1 and 16 dims, got %(count)s.",
                name=repr(name),
                count=len(values),
            ),
        )
    if any(v < 1 and v != -1 for v in values):
        raise _fail(
            spec,
            say(
                "dims of %(name)s must be >= 1 (or -1 for dynamic), got %(dims)s.",
                name=repr(name),
                dims=str(values),
            ),
        )
    return values


def _parse_shape(spec: OptionSpec, value: object) -> dict[str, list[int]] | None:
    """``{"x": [1,3,224,224]}``, ``{"x": "1,3,224,224"}`` or ``"x:1,3,224,224;y:1,16"``."""
    entries: dict[object, object]
    if isinstance(value, str):
        entries = {}
        for part in (p.strip() for p in value.split(";")):
            if not part:
                continue
            name, sep, dims_text = part.rpartition(":")
            if not sep or not name:
                raise _fail(
                    spec,
                    say("%(part)s should look like 'input_name:1,3,224,224'.", part=repr(part)),
                )
            entries[name.strip()] = dims_text
    elif isinstance(value, Mapping):
        entries = dict(value)
    else:
        raise _fail(
            spec, say("expected input names mapped to dims, e.g. {'input': '1,3,224,224'}.")
        )
    shapes: dict[str, list[int]] = {}
    for key, dims in entries.items():
        try:
            validate_tensor_name(key)
        except ModelStoreError as exc:
            raise _fail(spec, exc.message) from None
        shapes[str(key)] = _parse_dims(spec, str(key), dims)
    return shapes or None


_PARSERS: dict[str, Callable[[OptionSpec, object], Any]] = {
    "bool": _parse_bool,
    "int": _parse_int,
    "float": _parse_float,
    "choice": _parse_choice,
    "str": _parse_str,
    "int_list": _parse_int_list,
    "shape": _parse_shape,
}


def parse_value(spec: OptionSpec, value: object) -> Any:
    """Parses one option value; None or empty text means the default.

    Raises:
        InvalidOptions: If the value has the wrong type, form or range, or a
            required option is missing.
    """
    if isinstance(value, str) and not value.strip():
        value = None  # an empty form field means "not set"
    if value is None:
        if spec.required:
            raise _fail(spec, say("a value is required. %(help)s", help=spec.help))
        return copy.deepcopy(spec.default)
    return _PARSERS[spec.kind](spec, value)


class HasOptions(Protocol):
    """What the schema needs of a target (``model_store.targets.base.Target`` is one); a
    protocol, so that this module, which the targets import, imports none of them."""

    @property
    def label(self) -> Said: ...

    def option_specs(self) -> Sequence[OptionSpec]: ...


def options_json_schema(target: HasOptions) -> dict[str, Any]:
    """JSON schema of ``target``'s options object (for OpenAPI and client-side checks); its
    titles and descriptions are messages' JSON, which the web layer says in its reader's
    language (``webapp.text.localized``)."""
    specs = target.option_specs()
    return {
        "title": as_json(say("%(target)s build options", target=target.label)),
        "type": "object",
        "additionalProperties": False,
        "properties": {spec.name: spec.json_schema() for spec in specs},
        "required": [spec.name for spec in specs if spec.required],
    }
