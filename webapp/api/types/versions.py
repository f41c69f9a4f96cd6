"""Types of the version, target, upload and job endpoints.

A version as listed (:class:`VersionOut`) and in full (:class:`VersionDetail`); the targets
with their options' JSON schema; a new version from a finished upload (:class:`NewVersionIn`)
and a verification override; the chunked upload session (:class:`UploadIn`,
:class:`UploadOut`, :class:`ChunkOut`); and the jobs that build, verify and serve versions,
with their logs (:class:`JobOut`, :class:`JobDetail`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from webapp.api.types.common import DateTime, In, Number, Out, TargetName

__all__ = [
    "BuiltWith",
    "ChunkOut",
    "JobDetail",
    "JobList",
    "JobOut",
    "LogLine",
    "NewQuantization",
    "NewRevision",
    "NewVersion",
    "NewVersionIn",
    "OverrideIn",
    "RevisionPlanOut",
    "Source",
    "TargetList",
    "TargetOut",
    "UploadIn",
    "UploadOut",
    "VersionDetail",
    "VersionList",
    "VersionOut",
]


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
    revision_of: int | None = Field(
        default=None,
        description="The version this one revises (same source, other serving config), if any",
    )
    quantized: bool = Field(
        default=False, description="Quantised to INT8 by the hub from revision_of"
    )


class BuiltWith(Out):
    """The CANN toolkit that built the artifact (targets that compile with CANN), else nulls."""

    cann_version: str | None = Field(
        description="The toolkit's version, e.g. 8.0.RC3; the serving host's CANN must be at "
        "least this new for an OM"
    )
    cann_ops_version: str | None = Field(description="The operator package's version, if known")


class VersionDetail(VersionOut):
    options: dict[str, Any]
    signature: dict[str, Any]
    onnx: dict[str, Any]
    findings: list[Any]
    verification_report: dict[str, Any] | None
    config: str
    artifact: dict[str, Any]
    built_with: BuiltWith
    quantization: dict[str, Any] | None = Field(
        default=None,
        description="How it was quantised: method, calibration source, the split of the "
        "inputs (calibration / held out for the check) and the quantiser's result",
    )
    jobs: list[str]


class RevisionPlanOut(Out):
    """What a config revision would do (``dry_run``), or did."""

    revision_of: int = Field(description="The version revised")
    options: dict[str, Any] = Field(description="The revision's options, resolved")
    changed: dict[str, list[Any]] = Field(description="option -> [before, after]")
    rebuild: list[str] = Field(
        description="Changed options the artifact depends on; empty: the artifact is reused"
    )
    reuses_artifact: bool
    config_pbtxt: str
    diff: str = Field(description="Unified diff of config.pbtxt, original -> revision")
    findings: list[dict[str, Any]]
    problems: list[str] = Field(description="What the config linter says; empty: fine")
    ok: bool = Field(description="No error finding and no lint problem")


class NewRevision(Out):
    version: int
    job: str
    status: str
    revision_of: int
    reuses_artifact: bool
    rebuild: list[str]
    changed: dict[str, list[Any]]


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


class NewQuantization(Out):
    version: int
    job: str
    status: str
    revision_of: int
    quantization: dict[str, Any]


class NewVersion(Out):
    version: int
    job: str
    status: str


class OverrideIn(In):
    reason: Annotated[str, Field(max_length=1000)]


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
