"""Types of the serving endpoints: serve, roll back, compare, unload, and the event history.

A switch answers 202 at once (:class:`Accepted`) or, with ``?wait=true`` (:class:`WaitQuery`),
the job's outcome (:class:`Finished`, 409 :class:`FailedSwitch`). :class:`History` and
:class:`Audit` list the events (:class:`EventOut`) of one model and of the whole hub.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import Field

from webapp.api.types.common import DateTime, In, Out

__all__ = [
    "Accepted",
    "Audit",
    "CompareIn",
    "EventOut",
    "FailedSwitch",
    "Finished",
    "History",
    "Reason",
    "RollbackIn",
    "ServeIn",
    "WaitQuery",
]


class Reason(In):
    reason: Annotated[str, Field(max_length=500)] = ""


#: How a placement with other nodes takes the version: ``staged`` (every node loads it beside
#: the old before the route moves; a node that cannot stops the rollout with nothing changed)
#: or ``node_by_node`` (each node switches in turn; the nodes before a failure keep the new
#: version; calls through the hub's /v2 may fail on a node that already unloaded the old).
RolloutMode = Annotated[
    Literal["staged", "node_by_node"],
    Field(description="staged (the default) or node_by_node (the behaviour before 2026-12)"),
]


class ServeIn(In):
    version: int
    reason: Annotated[str, Field(max_length=500)] = ""
    confirm_breaking: bool = False
    rollout: RolloutMode = "staged"


class RollbackIn(Reason):
    rollout: RolloutMode = "staged"


class CompareIn(In):
    version: int | None = Field(
        None, description="The version to load beside the serving one; null unloads it"
    )


class WaitQuery(Schema):
    wait: str = Field(
        "",
        description="true: answer when the job finished (200 READY, 409 failed) or after "
        "SERVE_WAIT_SECONDS (202, code pending), instead of 202 at once",
    )


class Accepted(Out):
    """202 at once: the job is queued; follow it at ``url`` (also in ``Location``)."""

    job: str
    state: str
    url: str
    kind: str | None = None
    serving_version: int | None = None
    previous_version: int | None = None
    log: list[str] | None = None
    error: str | None = Field(None, description="With ?wait=true past the wait: still running")
    code: str | None = Field(None, description="pending, with ?wait=true past the wait")


class Finished(Out):
    """``?wait=true``: the job's outcome (200 succeeded; 409 with ``error`` and ``code``)."""

    job: str
    state: str
    url: str
    serving_version: int | None
    previous_version: int | None
    log: list[str]


class FailedSwitch(Finished):
    error: str
    code: str


class EventOut(Out):
    kind: str
    model: str | None
    version: int | None
    actor: str | None
    message: str
    data: Any
    time: DateTime


class History(Out):
    model: str
    events: list[EventOut]


class Audit(Out):
    events: list[EventOut]


class PlacementIn(In):
    """Exactly one of the two (the hub checks names and labels: 400 invalid_placement)."""

    nodes: list[Annotated[str, Field(max_length=64)]] | None = Field(
        None, max_length=256, description='Node names, e.g. ["local", "b"]'
    )
    labels: dict[str, Annotated[str, Field(max_length=128)]] | None = Field(
        None, description='Labels every chosen node has, e.g. {"soc": "Ascend310P3"}; {}: all'
    )


class NodeServingOut(Out):
    node: str
    version: int | None
    beside: int | None = Field(
        None, description="A canary's candidate, loaded beside the version on this node"
    )
    state: str = Field(description="serving, placing, failed or empty")
    error: str | None
    duration_s: float | None
    updated: str | None
    node_state: str = Field(description="The node's own state: up, down, draining, unknown")
