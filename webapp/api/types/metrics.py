"""Types of the metrics endpoint: a model's Triton statistics over a range, and advice.

Each :class:`MetricPoint` holds rates per second and mean times per request for one scrape or
one bucket (``Rate`` and ``Ms`` describe those fields); :class:`Metrics` adds the totals,
the versions and nodes seen and the advice drawn from them. :class:`MetricsQuery` picks the
range and, optionally, one node.
"""

from __future__ import annotations

from typing import Annotated, Literal

from ninja import Schema
from pydantic import Field

from webapp.api.types.common import Number, Out
from webapp.ops.metrics_read import RANGES

__all__ = [
    "Advice",
    "MetricPoint",
    "Metrics",
    "MetricsQuery",
    "Ms",
    "Rate",
    "Totals",
]


Rate = Annotated[Number, Field(description="per second over the point's interval")]
Ms = Annotated[Number | None, Field(description="ms per successful request; null: none")]


class MetricPoint(Out):
    t: Number = Field(description="interval start, seconds since the epoch")
    seconds: Number | None = Field(None, description="seconds of scrape intervals in the point")
    version: str = Field(description="Triton version label; 'latest' joins them")
    versions: list[str] | None = Field(None, description="'latest' only: its versions")
    requests: int | None = None
    requests_per_s: Rate
    inferences_per_s: Rate
    failures_per_s: Rate
    avg_batch: Number | None = Field(None, description="inferences per execution")
    request_ms: Ms = None
    queue_ms: Ms = None
    compute_input_ms: Ms = None
    compute_infer_ms: Ms = None
    compute_output_ms: Ms = None
    pending: Number | None = Field(None, description="most requests waiting at a scrape")
    client_requests_per_s: Rate | None = None
    client_failures_per_s: Rate | None = None
    client_latency_ms: Number | None = Field(
        None, description="the hub's own calls (Try it, sweeps): mean latency of successful ones"
    )


class Totals(Out):
    seconds: Number
    requests: int
    failures: int
    inferences: int
    client_requests: int
    client_failures: int


class Advice(Out):
    level: Literal["ok", "info", "warning"]
    code: str
    message: str


class Metrics(Out):
    model: str
    range: Literal[tuple(RANGES)]  # type: ignore[valid-type]
    tier: int = Field(description="bucket width in s; 0: one point per scrape")
    since: Number
    now: Number
    scrape_seconds: int
    last_scrape: Number | None
    node: str | None = Field(description="the node read; null: every node's points summed")
    nodes: list[str] = Field(
        description="the nodes with points of the model in the range (whichever is read)"
    )
    statistics: Literal["triton", "none (npu_ge)"]
    versions: list[str]
    serving_version: int | None
    points: list[MetricPoint]
    latest: MetricPoint | None
    totals: Totals
    advice: list[Advice]


class MetricsQuery(Schema):
    range: str = Field(
        "1h",
        description="1h: a point per scrape; 6h, 24h: 1-minute buckets; 7d: 10-minute buckets",
        json_schema_extra={"enum": list(RANGES)},
    )
    node: str | None = Field(
        None,
        description="one node's numbers (a name from GET /api/v1/nodes); default: all nodes summed",
    )
