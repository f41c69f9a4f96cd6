"""Types of the memory estimate endpoint: will a version fit the device memory.

:class:`MemoryQuery` tries another instance count or batch size; :class:`MemoryEstimate`
holds the estimate (weights and activations, :class:`Estimate`), a :class:`Verdict` per NPU
chip (:class:`DeviceFit`) or for this host's memory, and a warning when it would not fit.
"""

from __future__ import annotations

from typing import Any, Literal

from ninja import Schema
from pydantic import Field

from webapp.api.types.common import Number, Out, TargetName
from webapp.registry.serving.memory import MAX_BATCH, MAX_INSTANCES

__all__ = [
    "Activations",
    "DeviceFit",
    "DeviceVerdict",
    "Estimate",
    "MemoryEstimate",
    "MemoryQuery",
    "Verdict",
]


class MemoryQuery(Schema):
    instances: int | None = Field(
        None,
        ge=1,
        le=MAX_INSTANCES,
        description="Instance count to try; default: the version's config.pbtxt",
    )
    max_batch: int | None = Field(
        None,
        ge=0,
        le=MAX_BATCH,
        description="max_batch_size to try (0: no batching); default: config.pbtxt",
    )
    version: int | None = Field(
        None, ge=1, le=2**31 - 1, description="Default: the serving version, else the newest ready"
    )


class Verdict(Out):
    state: Literal["fits", "tight", "does_not_fit", "unknown"]
    fits: bool | None
    message: str
    device: str | None = None
    needed_bytes: int | None = None
    free_bytes: int | None = None
    needed_mib: Number | None = None
    free_mib: Number | None = None


class DeviceVerdict(Verdict):
    npu_id: int
    chip_id: int | None
    name: str
    memory_kind: Literal["HBM", "memory"]
    total_mib: Number
    placed: bool = Field(description="Named in config.pbtxt device_ids (or no list)")


class DeviceFit(Out):
    available: bool
    reason: str
    fit: list[DeviceVerdict] = Field(description="One verdict per NPU chip (Ascend targets)")


class Estimate(Out):
    weights_bytes: int
    instances: int
    max_batch: int
    batch: int
    activation_bytes_per_sample: int
    activation_bytes: int
    weights_total_bytes: int
    activations_total_bytes: int
    total_bytes: int
    weights_mib: Number
    activation_mib: Number
    total_mib: Number
    description: str


class Activations(Out):
    bytes_per_sample: int | None
    mib_per_sample: Number | None
    method: Literal["liveness", "io_factor", "none"]
    note: str
    unknown_tensors: int


class MemoryEstimate(Out):
    """copies x (weights + activations per sample x batch), against each NPU's free memory
    (Ascend targets) or this host's (onnxruntime); ``warning`` is set when it would not fit."""

    model: str
    version: int
    target: TargetName
    instances: int
    max_batch: int
    from_config: dict[str, int | None]
    copies_per_device: int = Field(
        description="Copies of weights and buffers one device holds: the instance count, "
        "or for npu_ge its GE sessions per device (device_exec_blocks)."
    )
    copies_note: str
    weights: dict[str, Any]
    activations: Activations
    estimate: Estimate
    devices: DeviceFit
    host: Verdict | None = Field(description="onnxruntime target: this host's available memory")
    warning: str | None = Field(description="Set when something does not fit")
    summary: str
    approximation: str
