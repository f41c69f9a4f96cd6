"""Types of the model endpoints: create, list (filtered, sorted, paged), show, edit, retire.

:class:`ModelIn` names a new model and its target; :class:`ModelOut` is a model as listed,
:class:`ModelDetail` the same with its versions
(:class:`~webapp.api.types.versions.VersionOut`). :class:`ModelListQuery` filters the list,
:class:`ModelPatchIn` edits a model, :class:`RetireQuery` says how to retire one.
"""

from __future__ import annotations

from typing import Annotated, Any

from ninja import Schema
from pydantic import Field

from webapp.api.types.common import DateTime, In, ModelName, Out, TargetName
from webapp.api.types.serving import NodeServingOut
from webapp.api.types.versions import VersionOut
from webapp.registry.catalogue.rules import Target

__all__ = [
    "ModelDetail",
    "ModelIn",
    "ModelList",
    "ModelListQuery",
    "ModelOut",
    "ModelPatchIn",
    "RetireQuery",
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
    updated: DateTime
    owner: str | None = Field(description="The user who answers for the model")
    tags: list[str]
    serving_version: int | None
    previous_version: int | None
    retired_at: DateTime | None = Field(None, description="Only on retired models")
    retired_by: str | None = Field(None, description="Only on retired models")


class ModelPatchIn(In):
    """What to change; a key left out stays as it is."""

    description: Annotated[str, Field(max_length=2000)] | None = None
    tags: list[Annotated[str, Field(max_length=200)]] | None = Field(
        None,
        max_length=200,
        description="The model's whole set of tags (replaces the old set): up to 20, each up "
        "to 40 characters of a-z 0-9 . _ : / - (upper case is lowered), e.g. team:vision",
    )
    owner: Annotated[str, Field(max_length=150)] | None = Field(
        None, description="A user name of the hub; null or empty: no owner"
    )


class ModelListQuery(Schema):
    q: str = Field("", max_length=100, description="Text in the name or description")
    target: str = Field("", json_schema_extra={"enum": ["", *Target.values]})
    state: str = Field(
        "",
        description="serving; not_served; failing (served, but Triton does not hold it READY)",
        json_schema_extra={"enum": ["", "serving", "not_served", "failing"]},
    )
    tag: str = Field("", max_length=100, description="Only models with this tag")
    owner: str = Field("", max_length=150, description="Only models this user owns")
    sort: str = Field(
        "name",
        description="name, updated or created; a leading - reverses",
        json_schema_extra={"enum": ["name", "-name", "updated", "-updated", "created", "-created"]},
    )
    retired: bool = Field(False, description="true: list the retired models instead")
    page: int = Field(1, ge=1)
    per_page: int = Field(500, ge=1, le=1000)


class RetireQuery(Schema):
    confirm_serving: bool = Field(
        False, description="Needed to retire a serving model: its clients fail from then on"
    )
    purge_sources: bool = Field(
        False, description="Delete its uploaded sources and packages too (admin)"
    )
    reason: str = Field("", max_length=500)


class ModelDetail(ModelOut):
    versions: list[VersionOut]
    placement: dict[str, Any] = Field(
        description='Where it serves: {"nodes": [...]} or {"labels": {...}} (docs/nodes.md)'
    )
    nodes: list[NodeServingOut] = Field(description="Per node of the placement: what it serves")


class ModelList(Out):
    models: list[ModelOut]
