"""What each ``/api/v1/`` endpoint takes and answers, declared once.

The handlers in this package name these types in their signatures: django-ninja validates
request bodies and query strings against them (a mismatch is a 400 in the API's one error
shape, see ``webapp.api.app``) and generates ``/api/v1/schema`` from them.

Inputs (``...In``, ``...Query``) are strict: a number sent as a string, or ``true`` where a
number belongs, is refused naming the field. Outputs (``...Out``) allow extra keys, so the
document never hides what the server already sends; the suite checks every answer it sees
against the document (``tests/fixtures/openapi.py``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from model_store.diagnostics import STATES
from webapp.ops.metrics_store import RANGES
from webapp.registry.memory import MAX_BATCH, MAX_INSTANCES
from webapp.registry.models import Target

DateTime = Annotated[str, Field(json_schema_extra={"format": "date-time"})]
Number = int | float
TargetName = Annotated[
    str, Field(json_schema_extra={"enum": list(Target.values)}, description="A target's name")
]
ModelName = Annotated[
    str, Field(max_length=200, json_schema_extra={"pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"})
]


class In(Schema):
    """A request body: strict types; unknown keys are ignored."""

    model_config = ConfigDict(strict=True, extra="ignore")


class Out(BaseModel):
    """An answer: the documented keys, and any others the server adds (a plain pydantic
    model: ninja's ``Schema`` reads declared attributes only, which would drop the others)."""

    model_config = ConfigDict(extra="allow")


class Error(Out):
    """Every refusal (4xx) and failure (5xx): what happened in plain words, and a code."""

    error: str = Field(description="What happened and what to do, in plain words.")
    code: str = Field(description="A stable machine-readable code.")


class Input(Out):
    """An inference refusal about one input names it in ``input``."""

    error: str
    code: str
    input: str | None = None


# --------------------------------------------------------------------------- health, server


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


# --------------------------------------------------------------------------- models, versions


class ModelIn(In):
    name: ModelName
    target: Annotated[
        str, Field(max_length=40, json_schema_extra={"enum": list(Target.values)})
    ] = "onnxruntime"
    description: Annotated[str, Field(max_length=2000)] = ""


class Source(Out):
    filename: str
    sha256: str
    size: int


class VersionOut(Out):
    version: int
    status: str
    source: Source
    verification: str | None
    verification_override: dict[str, Any] | None
    publishable: bool
    created: DateTime
    created_by: str | None
    error: str


class VersionDetail(VersionOut):
    options: dict[str, Any]
    signature: dict[str, Any]
    onnx: dict[str, Any]
    findings: list[Any]
    verification_report: dict[str, Any] | None
    config: str
    artifact: dict[str, Any]
    jobs: list[str]


class ModelOut(Out):
    name: str
    target: TargetName
    description: str
    created: DateTime
    created_by: str | None
    serving_version: int | None
    previous_version: int | None


class ModelDetail(ModelOut):
    versions: list[VersionOut]


class ModelList(Out):
    models: list[ModelOut]


class VersionList(Out):
    versions: list[VersionOut]


class TargetOut(Out):
    name: TargetName
    label: str
    needs_cann: bool
    hardware_verified: bool
    status: dict[str, Any]
    options_schema: dict[str, Any] = Field(description="JSON schema of the options object")


class TargetList(Out):
    targets: list[TargetOut]


class NewVersionIn(In):
    """A new version from a finished chunked upload (JSON), or one multipart ``file`` field
    with ``options``, ``sample`` (JSON text) and ``allow_duplicate`` beside it."""

    upload_id: Annotated[str, Field(max_length=64)]
    sha256: Annotated[str, Field(max_length=64)] = ""
    options: Any = Field(None, description="The target's options: a JSON object")
    allow_duplicate: bool = False
    sample: Any = Field(
        None, description='A verification input: {input name: nested list}, e.g. {"x": [[0.1]]}'
    )


class NewVersion(Out):
    version: int
    job: str
    status: str


class OverrideIn(In):
    reason: Annotated[str, Field(max_length=1000)]


# --------------------------------------------------------------------------- uploads, jobs


class UploadIn(In):
    filename: Annotated[str, Field(max_length=300)]
    size: int
    sha256: Annotated[str, Field(max_length=64)] | None = None


class UploadOut(Out):
    id: str
    filename: str
    size: int
    offset: int = Field(description="Bytes received: the offset to resume from")
    state: str
    chunk_bytes: int
    max_bytes: int


class ChunkOut(Out):
    id: str
    offset: int
    size: int


class LogLine(Out):
    seq: int
    time: DateTime
    level: str
    text: str


class JobOut(Out):
    id: str
    kind: str
    model: str
    version: int | None
    state: str
    step: str
    progress: Number
    steps: Any
    commands: Any
    error: str
    error_code: str
    cancel_requested: bool
    created: DateTime
    started: DateTime | None
    finished: DateTime | None


class JobDetail(JobOut):
    log: list[LogLine] = Field(description="Its first JOB_LOG_MAX_LINES lines")
    log_lines_more: int = Field(description="Lines beyond those; log_url serves all")
    log_url: str


class JobList(Out):
    jobs: list[JobOut]


# --------------------------------------------------------------------------- serving


class Reason(In):
    reason: Annotated[str, Field(max_length=500)] = ""


class ServeIn(In):
    version: int
    reason: Annotated[str, Field(max_length=500)] = ""
    confirm_breaking: bool = False


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


# --------------------------------------------------------------------------- try it

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

    inputs: dict[str, Any] = Field(description=TENSOR_DOC)
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
    max_concurrency: int = Field(8, description="Up to SWEEP_MAX_CONCURRENCY")
    step_seconds: int | None = Field(None, description="Seconds per level, 1 to 30")
    example_id: int | None = Field(None, description="A saved example as the request")


class SweepOut(Out):
    id: int
    job: str
    state: str
    model: str
    version: int
    config_sha256: str
    config: dict[str, Any]
    plan: dict[str, Any]
    levels: list[Any] = Field(
        description="Per level: throughput, p50/p90/p99, failures and Triton's queue/compute "
        "split (null when the backend reports no statistics)"
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


# --------------------------------------------------------------------------- metrics, memory

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


# --------------------------------------------------------------------------- tokens


class TokenIn(In):
    name: Annotated[str, Field(max_length=100)] = "api"
    scope: Any = Field(None, description="viewer, operator or admin; default: the owner's role")
    expires_in_days: Any = Field(
        "default", description="Days until it expires, null for never; default TOKEN_DEFAULT_DAYS"
    )


class TokenExpiryIn(In):
    expires_in_days: Any = Field(description="Days from now, or null for never")


class TokenOut(Out):
    id: int
    name: str
    prefix: str
    scope: str
    created: DateTime
    last_used: DateTime | None
    expires: DateTime | None
    expired: bool


class NewToken(TokenOut):
    key: str = Field(description="Shown once")


class TokenList(Out):
    tokens: list[TokenOut]
