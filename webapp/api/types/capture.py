"""Types of the capture endpoints: the policy, the captured requests, their export."""

from __future__ import annotations

from pydantic import Field

from webapp.api.types.common import DateTime, In, Number, Out

__all__ = ["CaptureCounts", "CaptureItem", "CaptureList", "CaptureOut", "CapturePolicyIn",
           "CaptureTensor", "ExampleFromCaptureIn"]  # fmt: skip


class CapturePolicyIn(In):
    enabled: bool = Field(True, description="Capture on or off (on when omitted)")
    sample_rate: Number = Field(100, description="Percent of answered requests kept, 0 to 100")
    max_items: int = Field(1000, description="Most captures kept; the oldest go first")
    max_bytes: int = Field(1 << 30, description="Most bytes kept on disk (>= 1 MiB)")
    retention_hours: int = Field(168, description="Captures older than this are removed")


class CaptureCounts(Out):
    written: int
    dropped_queue_full: int = Field(description="Not captured: the writer was behind")
    dropped_disk_full: int = Field(description="Not captured: the disk would fill")
    dropped_unreadable: int = Field(description="Not captured: the body could not be read")
    trimmed: int = Field(description="Removed to stay within max_items and max_bytes")


class CaptureOut(Out):
    enabled: bool
    sample_rate: Number
    max_items: int
    max_bytes: int
    retention_hours: int
    stopped_reason: str | None = Field(
        description="Why capture stopped by itself (disk_full, write_failed), else null"
    )
    count: int = Field(description="Captures kept now")
    bytes: int = Field(description="Their size on disk")
    counters: CaptureCounts


class CaptureTensor(Out):
    name: str
    datatype: str = Field(description="NumPy's name of the dtype, e.g. float32")
    shape: list[int]


class CaptureItem(Out):
    id: int
    version: int
    created: DateTime
    caller: str = Field(description="The caller's user name (never the token)")
    latency_ms: Number
    source: str = Field(description="v2 (the /v2 gateway) or api (the infer API)")
    inputs: list[CaptureTensor]
    outputs: list[CaptureTensor]
    size: int


class CaptureList(Out):
    captures: list[CaptureItem]
    count: int = Field(description="All captures that match the filters")
    next: str | None = Field(description="The next page's URL, or null")


class ExampleFromCaptureIn(In):
    name: str = Field(description="The example's name (at most 80 characters)")
