"""A build the hub sends here because this host has the toolkit (and maybe the NPUs) it needs.

The hub's compile step (webapp/registry/build/node_builds.py) sends ``node.build`` with the job's
id, the model's name and version, the target, its options, the SHA-256 of the validated
source and the verification sample. Here:

1. the source comes over HTTP with the node token and must have that SHA-256; it unpacks into
   a fresh folder under the node's store (``builds/<job>/``), trusting no name in it;
2. the target builds it with this host's toolkit (ATC for ``acl``), exactly as a hub worker
   would (:meth:`model_store.targets.base.Target.build`), its log lines kept;
3. the artifact is verified against the source here, where the NPU is
   (:func:`model_store.verify.verify`; without pyACL or an NPU it says "not run", never
   "failed");
4. the artifact (and any files beside it) goes back as a files tar with its SHA-256.

The answer is plain JSON: the artifact's name and tar hash, ATC's command, the log, the
CANN version, the verification report. The folder is removed whatever happens.
"""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model_store.compile.atc.environment import cann_status
from model_store.errors import ModelStoreError
from model_store.names import validate_model_name, validate_version
from model_store.onnx_info import inspect_onnx
from model_store.package_tar.files import extract_files, write_files
from model_store.package_tar.layout import PackageTarError
from model_store.runtime.client import TritonRuntime
from model_store.runtime.errors import TritonRuntimeError
from model_store.store import ModelStore
from model_store.targets import UnknownTarget, get_target, known_targets
from model_store.targets.base import BuildContext, VerifyPlan
from model_store.text import as_json, said, say
from model_store.verification_inputs import sample_from_json
from model_store.verification_report import VerificationReport
from model_store.verify import verify
from model_store.verify_in_triton import verify_in_trial
from workers.node.hub_client import HubClient
from workers.node.settings import NodeSettings

#: Largest source a node downloads (a model with its external data).
MAX_SOURCE_BYTES = 64 * 1024**3
#: The log lines sent back (the end of ATC's output is what explains a failure).
MAX_LOG_LINES = 300
_HEX32 = re.compile(r"[0-9a-f]{32}")
_HEX64 = re.compile(r"[0-9a-f]{64}")


class BuildRefused(ModelStoreError):
    """The message asked for something this node will not do (bad id, name, hash or target)."""

    code = "build_refused"


@dataclass(frozen=True)
class BuildRequest:
    """A checked ``node.build`` message."""

    job: str
    model: str
    version: int
    target: str
    options: dict[str, Any]
    source_sha256: str
    source_name: str
    samples: list[dict[str, Any]] = field(default_factory=list)


def checked_request(message: dict[str, Any]) -> BuildRequest:
    """The message's fields, each checked; anything off is :class:`BuildRefused`."""
    job = str(message.get("job", ""))
    sha256 = str(message.get("source_sha256", "")).lower()
    target = str(message.get("target", ""))
    options = message.get("options")
    samples = message.get("samples") or []
    name = str(message.get("source_name", ""))
    try:
        model = validate_model_name(message.get("model"))
        version = validate_version(message.get("version"))
        get_target(target)
    except (ModelStoreError, UnknownTarget) as exc:
        raise BuildRefused(f"Refused build message: {exc}") from None
    if target not in {t.name for t in known_targets()}:
        raise BuildRefused(f"Refused build message: unknown target {target[:40]!r}.")
    if not _HEX32.fullmatch(job) or not _HEX64.fullmatch(sha256):
        raise BuildRefused("Refused build message: the job id or the SHA-256 is malformed.")
    if not isinstance(options, dict) or not isinstance(samples, list) or len(samples) > 16:
        raise BuildRefused("Refused build message: options or samples are malformed.")
    if not name or name.startswith("/") or ".." in name.split("/"):
        raise BuildRefused(f"Refused build message: source name {name[:80]!r}.")
    return BuildRequest(job, model, version, target, options, sha256, name, samples)


def build(settings: NodeSettings, hub: HubClient, request: BuildRequest) -> dict[str, Any]:
    """Fetch, build, verify, send back; the answer for the hub (see the module)."""
    work = settings.store_root / "builds" / request.job
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    lines: list[str] = []
    started = time.monotonic()
    try:
        source = _fetch_source(settings, hub, request, work)
        target = get_target(request.target)
        info = inspect_onnx(source)
        ctx = BuildContext(
            source=source,
            workdir=work / "build",
            info=info,
            options=request.options,
            log=lines.append,
            progress=lambda fraction: None,
            cancelled=lambda: False,
            env=dict(settings.env),
        )
        (work / "build").mkdir()
        result = target.build(ctx)
        plan = target.verify_plan(request.options, info)
        report = verify(
            source,
            result.artifact,
            plan.artifact_kind,
            precision=plan.precision,
            samples=[sample_from_json(s) for s in request.samples] or None,
            batch=plan.batch,
            input_shapes=plan.input_shapes,
            device_id=plan.device_id,
        )
        if plan.artifact_kind == "om" and report.status == "not_run":
            report = _verify_in_triton(settings, request, source, result.artifact, plan, report)
        files = {result.artifact_name: result.artifact}
        if result.artifact.suffix == ".onnx":
            beside = inspect_onnx(result.artifact).external_data_files
            files |= {f: result.artifact.parent / f for f in beside}
        out = write_files(files, work / "artifact.tar")
        hub.upload_build_artifact(settings.name, request.job, out.path, out.sha256)
        status = cann_status(settings.env)
        return {
            "ok": True,
            "artifact_name": result.artifact_name,
            "artifact_sha256": out.sha256,
            "artifact_size": out.size,
            "commands": result.commands,
            "notes": as_json(result.notes),
            "log": lines[-MAX_LOG_LINES:],
            "cann": {"version": status.version, "ops_version": status.ops_version},
            "verification": report.to_dict(),
            "seconds": round(time.monotonic() - started, 3),
        }
    except ModelStoreError as exc:
        # ATC's error, an unusable source, ...: the hub shows the reason and the log's end.
        return {
            "ok": False,
            "code": getattr(exc, "code", "") or exc.__class__.__name__,
            "reason": as_json(said(exc)),
            "log": lines[-MAX_LOG_LINES:],
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _verify_in_triton(
    settings: NodeSettings,
    request: BuildRequest,
    source: Path,
    artifact: Path,
    plan: VerifyPlan,
    direct: VerificationReport,
) -> VerificationReport:
    """The OM through a trial in this node's Triton, which holds the NPU (this worker leaves
    it alone by default, ``WORKER_NPU``); ``direct`` (why the worker could not run it) when
    Triton cannot either, its reason extended by Triton's."""
    runtime = TritonRuntime(
        http_url=settings.triton_http, api_key=settings.triton_api_key, timeout=300.0
    )
    cfg = get_target(request.target).make_config(
        request.model, inspect_onnx(source), request.options, request.version
    )
    samples = [sample_from_json(s) for s in request.samples] or None
    try:
        report, _ = verify_in_trial(
            ModelStore(settings.store_root), runtime, cfg, source, artifact, plan, samples,
            version=request.version,
        )  # fmt: skip
        return report
    except (ModelStoreError, TritonRuntimeError) as exc:
        direct.reason = say(
            "%(reason)s This node's Triton could not verify it either: %(error)s",
            reason=direct.reason,
            error=said(exc),
        )
        return direct
    finally:
        runtime.close()


def _fetch_source(
    settings: NodeSettings, hub: HubClient, request: BuildRequest, work: Path
) -> Path:
    download = hub.download_build_source(
        settings.name, request.job, work / "source.tar", max_bytes=MAX_SOURCE_BYTES
    )
    try:
        names = extract_files(download.path, work / "source", request.source_sha256)
    except PackageTarError as exc:
        raise BuildRefused(f"The build's source did not check out: {exc}") from None
    finally:
        download.path.unlink(missing_ok=True)
    if request.source_name not in names:
        raise BuildRefused(f"The source tar has no {request.source_name[:80]!r}.")
    return work / "source" / request.source_name
