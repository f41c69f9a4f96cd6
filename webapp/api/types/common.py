"""The API's base types and the types every area shares.

:class:`In` is the base of every request body (strict: a number sent as a string is refused
naming the field), :class:`Out` of every answer (extra keys allowed, so the document never
hides what the server sends). :class:`Error` is the one refusal and failure shape,
:class:`Input` the inference refusal that names its input. ``DateTime``, ``Number``,
``TargetName`` and ``ModelName`` are the field types several areas use.
"""

from __future__ import annotations

from typing import Annotated

from ninja import Schema
from pydantic import BaseModel, ConfigDict, Field

from model_store.targets import known_targets

__all__ = [
    "DateTime",
    "Error",
    "In",
    "Input",
    "ModelName",
    "Number",
    "Out",
    "TargetName",
]


DateTime = Annotated[str, Field(json_schema_extra={"format": "date-time"})]
Number = int | float
# Models adopted from an existing repository have the target "external", which no new model
# may choose (ModelIn lists the choosable ones), so answers list every known target.
TargetName = Annotated[
    str,
    Field(
        json_schema_extra={"enum": [t.name for t in known_targets()]},
        description="A target's name",
    ),
]
ModelName = Annotated[
    str, Field(max_length=200, json_schema_extra={"pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"})
]


class In(Schema):
    """A request body: strict types; unknown keys are ignored."""

    model_config = ConfigDict(strict=True, extra="ignore")


class Out(BaseModel):
    """An answer: the documented keys, and any others the server adds (a plain pydantic
    model: ninja's ``Schema`` reads declared attributes only, which would drop the others)."""

    model_config = ConfigDict(extra="allow")


class Error(Out):
    """Every refusal (4xx) and failure (5xx): what happened in plain words, and a code."""

    error: str = Field(description="What happened and what to do, in plain words.")
    code: str = Field(description="A stable machine-readable code.")


class Input(Out):
    """An inference refusal about one input names it in ``input``."""

    error: str
    code: str
    input: str | None = None
