"""Finding the best config: the request and a run with its trials."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from webapp.api.types.common import DateTime, In, Out

__all__ = ["TuneIn", "TuneList", "TuneOut"]


class TuneIn(In):
    objective: Literal["throughput", "latency"] = Field(
        description="throughput: highest req/s with p99 <= p99_ms; latency: lowest p99 at rate"
    )
    p99_ms: float | None = Field(None, description="The p99 budget (throughput objective)")
    rate: float | None = Field(None, description="Requests per second to hold (latency objective)")
    budget_s: int = Field(300, description="Time budget in seconds, 30 to TUNE_MAX_BUDGET_S")
    strategy: Literal["search", "grid"] = Field(
        "search",
        description="search: move along one knob at a time while it helps (the default); grid: "
        "try every config of a small grid (instances x batching 8/16 x queue delay 100/1000 µs), "
        "a slow reference",
    )
    node: str = Field(
        "local", description="The node whose Triton runs the trials (an up node; default local)"
    )
    max_concurrency: int | None = Field(
        None, description="Requests in flight per trial, up to TUNE_MAX_CONCURRENCY (default)"
    )
    captured: bool = Field(
        False,
        description="Send the model's newest captured request that fits instead of random "
        "values (409 no_captures when there is none)",
    )


class TuneOut(Out):
    id: int
    job: str
    state: str
    model: str
    version: int = Field(description="The version tuned (serving when asked)")
    objective: dict[str, Any]
    budget_s: int
    strategy: str
    node: str
    max_concurrency: int
    trials: list[dict[str, Any]] = Field(
        description="In the order tried: index, changes (options vs the serving config), "
        "label, state (measured/skipped/failed), reason, throughput_rps, p50_ms, p99_ms, load "
        "(concurrency or offered rate), failed, score, seconds, levels"
    )
    best: dict[str, Any] | None = Field(description="The winning trial, if any met the objective")
    stopped: str | None = Field(description="budget, cancelled, or null (searched everything)")
    grid_size: int = Field(description="How many configs trying everything would have taken")
    revision: int | None = Field(description="The version made from the winner, if any")
    created: DateTime


class TuneList(Out):
    runs: list[TuneOut]
