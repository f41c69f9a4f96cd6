"""Types of the model endpoints: create one, list them, show one with its versions.

:class:`ModelIn` names a new model and its target; :class:`ModelOut` is a model as listed,
:class:`ModelDetail` the same with its versions
(:class:`~webapp.api.types.versions.VersionOut`).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from webapp.api.types.common import DateTime, In, ModelName, Out, TargetName
from webapp.api.types.versions import VersionOut
from webapp.registry.models import Target

__all__ = [
    "ModelDetail",
    "ModelIn",
    "ModelList",
    "ModelOut",
]


class ModelIn(In):
    name: ModelName
    target: Annotated[
        str, Field(max_length=40, json_schema_extra={"enum": list(Target.values)})
    ] = "onnxruntime"
    description: Annotated[str, Field(max_length=2000)] = ""


class ModelOut(Out):
    name: str
    target: TargetName
    description: str
    created: DateTime
    created_by: str | None
    serving_version: int | None
    previous_version: int | None


class ModelDetail(ModelOut):
    versions: list[VersionOut]


class ModelList(Out):
    models: list[ModelOut]
