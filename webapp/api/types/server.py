"""Types of the health, server and diagnostics endpoints.

``/live`` and ``/health`` (:class:`Live`, :class:`Health`, 503 :class:`Unhealthy`), ``/server``
(Triton's state and the NPUs, :class:`Server`) and ``/diagnostics`` (the checklist, one
:class:`Diagnostic` each: the host's from its worker's report, :class:`HostReportAge`, and the
hub's run by the web; :class:`DiagnosticsQuery` waits for a fresh run of the hub's).
"""

from __future__ import annotations

from typing import Literal

from ninja import Schema
from pydantic import Field

from model_store.diagnostics import STATES
from webapp.api.types.common import DateTime, Out

__all__ = [
    "Check",
    "Devices",
    "Diagnostic",
    "DiagnosticState",
    "Diagnostics",
    "DiagnosticsQuery",
    "Health",
    "HostReportAge",
    "Live",
    "RepositoryEntry",
    "Server",
    "Triton",
    "Unhealthy",
]


class Live(Out):
    status: Literal["ok"]


class Check(Out):
    ok: bool
    detail: str | None = None


class Health(Out):
    status: Literal["ok", "failing"]
    checks: dict[str, Check]


class Unhealthy(Health):
    """503: ``error`` and ``code`` (``unhealthy``) name the failing parts."""

    error: str
    code: str


class RepositoryEntry(Out):
    name: str
    version: str | None = None
    state: str | None = None
    reason: str | None = None


class Triton(Out):
    url: str
    embedded: bool
    live: bool
    ready: bool
    name: str | None
    version: str | None
    extensions: list[str]
    repository: list[RepositoryEntry]
    error: str | None


class Devices(Out):
    """Ascend NPUs from ``npu-smi``, or ``reason`` why there are none."""

    available: bool | None = None
    reason: str = ""
    seen_in: Literal["triton"] | None = Field(
        None,
        description="triton: npu-smi ran inside the Triton container, which holds the NPU "
        "(the worker leaves it alone, WORKER_NPU=off or shared); absent: on the worker's host",
    )
    pyacl_device_count: int | None = Field(
        None,
        description="Present when the serving Triton's pyACL counts another number of devices "
        "than npu-smi lists: inside a container only the mapped NPUs, numbered from 0",
    )


class Server(Out):
    triton: Triton
    devices: Devices


DiagnosticState = Literal[STATES]  # type: ignore[valid-type]


class Diagnostic(Out):
    id: str = Field(
        description="On the host (from its worker's report): cann_env, atc, atc_python, "
        "npu_ge_backend, davinci_devices, npu_smi. From the hub (run by the web): "
        "triton_reachable, triton_access, stuck_loading, load_failures, oidc_discovery, "
        "ldap_bind."
    )
    title: str
    state: DiagnosticState
    found: str = Field(description="What the check found, with the values.")
    advice: str = Field(description="What to do; empty when ok.")
    details: list[str]
    ran_on: Literal["host", "hub"] | None = Field(
        None,
        description="host: run by a worker on the host with the NPUs, from its newest report "
        "(see host_report); hub: run by the web process.",
    )


class HostReportAge(Out):
    """Who reported the host checks, and how long ago."""

    host: str | None = Field(None, description="The host name of the worker that reported.")
    reported_at: DateTime
    age_s: float | None = None
    stale: bool = Field(description="Older than three probe intervals: is the worker running?")


class Diagnostics(Out):
    checks: list[Diagnostic]
    summary: dict[str, int] = Field(description="How many checks are in each state.")
    summary_line: str | None = Field(None, examples=["10 checks: 4 ok, 6 not applicable"])
    ran_at: DateTime | None = Field(None, description="When the hub's checks ran.")
    host: str | None = Field(None, description="The host the hub's checks ran on (the web's).")
    host_report: HostReportAge | None = Field(
        None, description="The host report the host checks come from; null when none yet."
    )
    host_checks_reason: str = Field(
        "", description="Why the host checks are missing (no worker has reported yet); else ''."
    )


class DiagnosticsQuery(Schema):
    fresh: str = Field(
        "", description="true: wait for a new run of the hub's checks (at most 20 s)"
    )
