"""Types of the Try it endpoints: inference, saved examples, labels, settings, sweeps, demo.

:class:`InferIn` is checked by the inference code itself, which names the input at fault
(:data:`TENSOR_DOC` lists the input forms); :class:`Preprocess` is the image preprocessing
a request or the saved settings may carry. Sweeps (:class:`SweepIn`, :class:`SweepOut`) step
the load up level by level; the demo endpoints add the example model.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import ConfigDict, Field, WithJsonSchema

from webapp.api.types.common import DateTime, In, Number, Out

__all__ = [
    "TENSOR_DOC",
    "DemoAdded",
    "DemoState",
    "ExampleDetail",
    "ExampleIn",
    "ExampleList",
    "ExampleOut",
    "InferIn",
    "InferOut",
    "LabelsIn",
    "LabelsOut",
    "Preprocess",
    "SweepIn",
    "SweepList",
    "SweepOut",
    "TrySettingsIn",
    "TrySettingsOut",
]


TENSOR_DOC = (
    "One input: a nested JSON array; {data, shape}; {b64 (raw little-endian bytes of the "
    "input's dtype), shape}; {npy_b64 (a .npy file)}; or, for image inputs (rank-4 float, 1 or "
    "3 channels), {image_b64 (PNG/JPEG/WebP/GIF/BMP/TIFF), preprocess?}"
)


class Preprocess(Schema):
    preset: Literal["efficientnet", "imagenet", "unit", "raw"] | None = None
    resize_short: int | None = None
    crop: int | None = None
    mean: Annotated[list[Number], Field(min_length=3, max_length=3)] | None = None
    std: Annotated[list[Number], Field(min_length=3, max_length=3)] | None = None
    color: Literal["RGB", "BGR"] | None = None
    layout: Literal["NCHW", "NHWC"] | None = None


class InferIn(Schema):
    """Checked by the inference code itself (it names the input at fault)."""

    model_config = ConfigDict(extra="allow")

    inputs: dict[str, Any] | list[Any] = Field(
        description="The hub's form, an object of input name -> tensor (" + TENSOR_DOC + "); "
        "or the KServe v2 / Open Inference Protocol form, a list of {name, shape, datatype, "
        "data} (answered in v2 form)"
    )
    outputs: Any = Field(None, description='v2 form only: [{"name": ...}], the outputs wanted')
    id: Any = Field(None, description="v2 form only: echoed in the answer")
    version: Any = Field(None, description="A version number; default: the serving one")
    top_k: Any = Field(None, description="1 to 50 (default 5)")
    preprocess: Annotated[Any, WithJsonSchema(Preprocess.model_json_schema())] = None
    snippets: Any = Field(None, description="true: the same request as curl and tritonclient")

    def as_body(self) -> dict[str, Any]:
        """The body as it came (only the keys the client sent)."""
        return self.model_dump(exclude_unset=True)


class InferOut(Out):
    """Outputs (values; top_k with labels and probabilities for classifiers), input shapes,
    latency {triton_ms, hub_ms}; with snippets=true, curl and tritonclient code."""

    model: str
    version: int
    outputs: Any
    serving: bool | None = None
    inputs: dict[str, Any] | None = None
    latency: dict[str, Number] | None = None
    node: str | None = Field(
        None,
        description="The node whose Triton answered (local unless the model is placed "
        "on other nodes: then requests are spread over the nodes that serve the version)",
    )


class V2Tensor(Out):
    name: str
    datatype: str
    shape: list[int]
    data: list[Any]


class V2InferOut(Out):
    """The answer to a v2 request, in v2 form (data flattened in row-major order)."""

    model_name: str
    model_version: str
    outputs: list[V2Tensor]
    id: str | None = None


class ExampleIn(In):
    name: Annotated[str, Field(max_length=80)]
    inputs: dict[str, Any]


class ExampleOut(Out):
    id: int
    name: str
    created: DateTime
    created_by: str | None


class ExampleDetail(ExampleOut):
    inputs: dict[str, Any]


class ExampleList(Out):
    examples: list[ExampleOut]


class LabelsIn(In):
    """Labels without a file: exactly one of the three keys (docs/labels.md)."""

    preset: Literal["imagenet-1k"] | None = Field(
        None,
        description="The ImageNet-1k names shipped with the hub, for a serving version with an "
        "output of 1000 classes (1001: 'background' first)",
    )
    from_model_file: Literal[True] | None = Field(
        None, description="The class names found in the serving version's ONNX metadata"
    )
    labels: list[str] | dict[str, str] | None = Field(
        None, description="The names themselves: a list, or an object of index -> name"
    )


class LabelsOut(Out):
    model: str
    count: int
    labels: Any = Field(description="A list of class names, or an object of index -> name")


class TrySettingsIn(In):
    preprocess: Annotated[dict[str, Any] | None, WithJsonSchema(Preprocess.model_json_schema())] = (
        None
    )
    image_inputs: list[Annotated[str, Field(max_length=256)]] | None = None


class TrySettingsOut(Out):
    model: str
    preprocess: dict[str, Any]
    image_inputs: list[str] | None
    saved: dict[str, Any]


class SweepIn(In):
    mode: Literal["concurrency", "rate"] = Field(
        "concurrency",
        description="'concurrency' (closed loop: clients 1, 2, 4 ... up to max_concurrency, "
        "each sending back to back) or 'rate' (open loop: each of 'rates' requests per second "
        "on a fixed schedule, at most SWEEP_MAX_CONCURRENCY in flight; latency counts from "
        "each request's scheduled time, so waiting for a free sender counts)",
    )
    max_concurrency: int = Field(8, description="Up to SWEEP_MAX_CONCURRENCY (mode concurrency)")
    rates: list[float] | None = Field(
        None,
        description="Mode rate: 1 to 8 request rates in requests per second, each above 0 and "
        "at most 10000; sorted, duplicates dropped, for example [10, 20, 50, 100]",
    )
    step_seconds: int | None = Field(None, description="Seconds per level, 1 to 30")
    example_id: int | None = Field(None, description="A saved example as the request")
    captured: bool = Field(
        False,
        description="The model's newest captured request that fits the serving version as the "
        "request (409 no_captures when there is none); the job's log names it",
    )


class SweepOut(Out):
    id: int
    job: str
    state: str
    model: str
    version: int
    config_sha256: str
    config: dict[str, Any]
    plan: dict[str, Any] = Field(
        description="mode ('concurrency' or 'rate'), levels or rates (and max_in_flight), "
        "step_seconds, warmup_seconds, max_total_seconds"
    )
    levels: list[Any] = Field(
        description="Per level: throughput (achieved req/s), p50/p90/p99, failures and Triton's "
        "queue/compute split (null when the backend reports no statistics); in mode rate also "
        "offered_rps, late (sent after their time: every sender busy), unsent (still unsent one "
        "step after the window) and concurrency = the most requests in flight at once"
    )
    stopped: str | None
    server_stats: bool
    created: DateTime


class SweepList(Out):
    sweeps: list[SweepOut]


class DemoState(Out):
    available: bool
    model: str | None
    name: str


class DemoAdded(Out):
    model: str
    version: int
    job: str
    job_url: str
