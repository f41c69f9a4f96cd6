"""What each ``/api/v1/`` endpoint takes and answers, declared once.

The handlers in this package name these types in their signatures: django-ninja validates
request bodies and query strings against them (a mismatch is a 400 in the API's one error
shape, see ``webapp.api.app``) and generates ``/api/v1/schema`` from them.

Inputs (``...In``, ``...Query``) are strict: a number sent as a string, or ``true`` where a
number belongs, is refused naming the field. Outputs (``...Out``) allow extra keys, so the
document never hides what the server already sends; the suite checks every answer it sees
against the document (``tests/fixtures/openapi.py``).

The types live in one submodule per area, beside the router that uses them:

* :mod:`~webapp.api.types.common`: the ``In``/``Out`` bases, ``Error`` and shared field types.
* :mod:`~webapp.api.types.server`: health, server and diagnostics.
* :mod:`~webapp.api.types.models` and :mod:`~webapp.api.types.versions`: models, versions,
  targets, uploads and jobs.
* :mod:`~webapp.api.types.serving`: serving, rollback, comparison and events.
* :mod:`~webapp.api.types.canary`: canary releases.
* :mod:`~webapp.api.types.capture`: capture of real requests.
* :mod:`~webapp.api.types.tryit`: inference, examples, labels, settings, sweeps, demo.
* :mod:`~webapp.api.types.metrics` and :mod:`~webapp.api.types.memory`: metrics and the
  memory estimate.
* :mod:`~webapp.api.types.tokens`: API tokens.
* :mod:`~webapp.api.types.nodes`: nodes and their reports.

This package re-exports them all, so routers write ``types.ModelOut``.
"""

from __future__ import annotations

from webapp.api.types.canary import CanaryIn, CanaryOut, CanarySide
from webapp.api.types.capture import (
    CaptureCounts,
    CaptureItem,
    CaptureList,
    CaptureOut,
    CapturePolicyIn,
    CaptureTensor,
    ExampleFromCaptureIn,
)
from webapp.api.types.common import (
    DateTime,
    Error,
    In,
    Input,
    ModelName,
    Number,
    Out,
    TargetName,
)
from webapp.api.types.memory import (
    Activations,
    DeviceFit,
    DeviceVerdict,
    Estimate,
    MemoryEstimate,
    MemoryQuery,
    Verdict,
)
from webapp.api.types.metrics import (
    Advice,
    MetricPoint,
    Metrics,
    MetricsQuery,
    Ms,
    Rate,
    Totals,
)
from webapp.api.types.models import (
    ModelDetail,
    ModelIn,
    ModelList,
    ModelListQuery,
    ModelOut,
    ModelPatchIn,
    RetireQuery,
)
from webapp.api.types.nodes import (
    ArtifactReceived,
    DrainIn,
    NodeList,
    NodeOut,
    NodeReportIn,
    NodeSelfIn,
    NodeTriton,
    NodeTritonIn,
    ReportAccepted,
)
from webapp.api.types.server import (
    Check,
    Devices,
    Diagnostic,
    Diagnostics,
    DiagnosticsQuery,
    DiagnosticState,
    Health,
    Live,
    RepositoryEntry,
    Server,
    Triton,
    Unhealthy,
)
from webapp.api.types.serving import (
    Accepted,
    Audit,
    CompareIn,
    EventOut,
    FailedSwitch,
    Finished,
    History,
    NodeServingOut,
    PlacementIn,
    Reason,
    ServeIn,
    WaitQuery,
)
from webapp.api.types.tokens import (
    Me,
    NewToken,
    TokenExpiryIn,
    TokenIn,
    TokenList,
    TokenOut,
)
from webapp.api.types.tryit import (
    TENSOR_DOC,
    DemoAdded,
    DemoState,
    ExampleDetail,
    ExampleIn,
    ExampleList,
    ExampleOut,
    InferIn,
    InferOut,
    LabelsIn,
    LabelsOut,
    Preprocess,
    SweepIn,
    SweepList,
    SweepOut,
    TrySettingsIn,
    TrySettingsOut,
    V2InferOut,
)
from webapp.api.types.tuning import TuneIn, TuneList, TuneOut
from webapp.api.types.versions import (
    ChunkOut,
    JobDetail,
    JobList,
    JobOut,
    LogLine,
    NewQuantization,
    NewRevision,
    NewVersion,
    NewVersionIn,
    OverrideIn,
    RevisionPlanOut,
    Source,
    TargetList,
    TargetOut,
    UploadIn,
    UploadOut,
    VersionDetail,
    VersionList,
    VersionOut,
)

__all__ = [
    "TENSOR_DOC",
    "Accepted",
    "Activations",
    "Advice",
    "ArtifactReceived",
    "Audit",
    "CanaryIn",
    "CanaryOut",
    "CanarySide",
    "CaptureCounts",
    "CaptureItem",
    "CaptureList",
    "CaptureOut",
    "CapturePolicyIn",
    "CaptureTensor",
    "Check",
    "ChunkOut",
    "CompareIn",
    "DateTime",
    "DemoAdded",
    "DemoState",
    "DeviceFit",
    "DeviceVerdict",
    "Devices",
    "Diagnostic",
    "DiagnosticState",
    "Diagnostics",
    "DiagnosticsQuery",
    "DrainIn",
    "Error",
    "Estimate",
    "EventOut",
    "ExampleDetail",
    "ExampleFromCaptureIn",
    "ExampleIn",
    "ExampleList",
    "ExampleOut",
    "FailedSwitch",
    "Finished",
    "Health",
    "History",
    "In",
    "InferIn",
    "InferOut",
    "Input",
    "JobDetail",
    "JobList",
    "JobOut",
    "LabelsIn",
    "LabelsOut",
    "Live",
    "LogLine",
    "Me",
    "MemoryEstimate",
    "MemoryQuery",
    "MetricPoint",
    "Metrics",
    "MetricsQuery",
    "ModelDetail",
    "ModelIn",
    "ModelList",
    "ModelListQuery",
    "ModelName",
    "ModelOut",
    "ModelPatchIn",
    "Ms",
    "NewQuantization",
    "NewRevision",
    "NewToken",
    "NewVersion",
    "NewVersionIn",
    "NodeList",
    "NodeOut",
    "NodeReportIn",
    "NodeSelfIn",
    "NodeServingOut",
    "NodeTriton",
    "NodeTritonIn",
    "Number",
    "Out",
    "OverrideIn",
    "PlacementIn",
    "Preprocess",
    "Rate",
    "Reason",
    "ReportAccepted",
    "RepositoryEntry",
    "RetireQuery",
    "RevisionPlanOut",
    "ServeIn",
    "Server",
    "Source",
    "SweepIn",
    "SweepList",
    "SweepOut",
    "TargetList",
    "TargetName",
    "TargetOut",
    "TokenExpiryIn",
    "TokenIn",
    "TokenList",
    "TokenOut",
    "Totals",
    "Triton",
    "TrySettingsIn",
    "TrySettingsOut",
    "TuneIn",
    "TuneList",
    "TuneOut",
    "Unhealthy",
    "UploadIn",
    "UploadOut",
    "V2InferOut",
    "Verdict",
    "VersionDetail",
    "VersionList",
    "VersionOut",
    "WaitQuery",
]
