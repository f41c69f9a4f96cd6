"""Types of the health, server and diagnostics endpoints.

``/live`` and ``/health`` (:class:`Live`, :class:`Health`, 503 :class:`Unhealthy`), ``/server``
(Triton's state and the NPUs, :class:`Server`) and ``/diagnostics`` (the host checks, one
:class:`Diagnostic` each, with :class:`DiagnosticsQuery` to wait for a fresh run).
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


class Server(Out):
    triton: Triton
    devices: Devices


DiagnosticState = Literal[STATES]  # type: ignore[valid-type]


class Diagnostic(Out):
    id: str = Field(
        description="cann_env, atc, npu_ge_backend, davinci_devices, npu_smi, "
        "triton_reachable, triton_access, stuck_loading, load_failures"
    )
    title: str
    state: DiagnosticState
    found: str = Field(description="What the check found, with the values.")
    advice: str = Field(description="What to do; empty when ok.")
    details: list[str]


class Diagnostics(Out):
    checks: list[Diagnostic]
    summary: dict[str, int] = Field(description="How many checks are in each state.")
    summary_line: str | None = Field(None, examples=["8 checks: 4 ok, 4 not applicable"])
    ran_at: DateTime
    host: str | None = Field(None, description="The host the checks ran on (the web's).")


class DiagnosticsQuery(Schema):
    fresh: str = Field("", description="true: wait for a new run (at most 20 s)")
