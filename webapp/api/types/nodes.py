"""Types of ``/api/v1/nodes``: a node's report as it posts it (:class:`NodeReportIn`), the
hub's answer (:class:`ReportAccepted`), and the nodes as the hub shows them (:class:`NodeOut`).

The report is ``model_store.host_report.build_host_report``'s dict plus ``node`` (who sends it:
:class:`NodeSelfIn`). Its inner parts (devices, targets, diagnostics) are the report's own
shape, checked as JSON objects and lists here and read with ``.get`` by the pages.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from webapp.api.types.common import DateTime, In, Out

__all__ = [
    "DrainIn",
    "NodeList",
    "NodeOut",
    "NodeReportIn",
    "NodeSelfIn",
    "NodeTriton",
    "NodeTritonIn",
    "ReportAccepted",
]

Url = Annotated[str, StringConstraints(max_length=200)]
LabelKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")]
LabelValue = Annotated[str, StringConstraints(max_length=200)]


class NodeTritonIn(In):
    http: Url
    grpc: Url
    metrics: Url


class NodeSelfIn(In):
    """Who sends the report: its name (as in the URL), its Triton, its code, its labels."""

    name: Annotated[str, StringConstraints(max_length=64)]
    triton: NodeTritonIn
    hub_version: Annotated[str, StringConstraints(max_length=40)]
    labels: Annotated[dict[LabelKey, LabelValue], Field(max_length=32)] = {}


class NodeReportIn(In):
    """A host report (model_store/host_report.py) and ``node``; bounded to 256 KiB."""

    protocol: int
    host: Annotated[str, StringConstraints(max_length=255)]
    made_at: Annotated[float, Field(ge=0, lt=1e11, allow_inf_nan=False)]
    devices: dict[str, Any]
    targets: dict[str, dict[str, Any]]
    cann: dict[str, Any] | None = None
    diagnostics: list[dict[str, Any]] = []
    node: NodeSelfIn


class ReportAccepted(Out):
    accepted: bool
    protocol: int
    report_every_s: int


class DrainIn(In):
    draining: bool


class NodeTriton(Out):
    http: str | None
    grpc: str | None
    metrics: str | None


class NodeOut(Out):
    """One node: ``state`` is ``up``, ``down`` (silent for 3 report intervals, never reported,
    or refused: see ``refused_reason``) or ``draining``."""

    name: str
    state: Literal["up", "down", "draining"]
    triton: NodeTriton
    soc: str | None
    cann_version: str | None
    devices: list[dict[str, Any]]
    labels: dict[str, str]
    draining: bool
    host: str | None
    hub_version: str | None
    last_report_at: DateTime | None
    last_report_age_s: float | None
    refused_reason: str | None
    refused_at: DateTime | None


class NodeList(Out):
    nodes: list[NodeOut]


class ArtifactReceived(Out):
    """The hub checked the node's artifact tar against its SHA-256 and unpacked it."""

    received: bool
    sha256: str
    files: list[str]
