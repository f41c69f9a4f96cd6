"""Types of the canary endpoints: start one, follow it, promote it now, abort it."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from webapp.api.types.common import DateTime, In, Number, Out

__all__ = ["CanaryIn", "CanaryOut", "CanarySide"]


class CanaryIn(In):
    version: int = Field(description="The packaged version to send a share of traffic to")
    steps: list[int] = Field(
        description="Increasing percentages of unpinned calls, ending at 100 (the promotion), "
        "e.g. [10, 50, 100]"
    )
    step_seconds: int = Field(description="How long each step runs before it is decided (>= 5)")
    max_error_rate: Number = Field(
        description="The candidate's highest error rate, a fraction (0.01 = 1%)"
    )
    max_p99_ratio: Number = Field(
        description="The candidate's highest p99 as a multiple of the serving version's (> 1)"
    )
    min_requests: int | None = Field(
        None, description="Requests each side needs before a gate may fail (default 50)"
    )


class CanarySide(Out):
    version: int
    requests: int
    errors: int
    error_rate: Number
    p50_ms: Number | None = None
    p99_ms: Number | None = None
    queue_ms: Number | None = Field(None, description="Triton's mean queue time per request")
    compute_ms: Number | None = Field(None, description="Triton's mean compute time per request")


class CanaryOut(Out):
    """A canary: ``state`` is running, promoted, rolled_back, aborted or failed; ``weight`` the
    candidate's share of unpinned calls now, in percent; ``live`` the current step's numbers."""

    id: str
    state: str
    phase: str = Field(
        description="starting, running, promoting, ending (the candidate is being unloaded), "
        "or the state it ended in"
    )
    version: int
    serving_version: int
    weight: int
    steps: list[int]
    step: int
    step_seconds: int
    max_error_rate: Number
    max_p99_ratio: Number
    min_requests: int
    step_started: DateTime | None = None
    decisions: list[dict[str, Any]]
    reason: str | None = None
    job: str | None = None
    created: DateTime
    created_by: str | None = None
    finished: DateTime | None = None
    live: dict[str, CanarySide] | None = Field(
        None,
        description="This step's numbers so far, candidate and serving, as the gateway "
        "counted them",
    )
