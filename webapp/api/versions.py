"""API for uploads, versions and jobs.

Large files arrive in chunks (``/api/v1/uploads``): create, then PUT each chunk with an
``Upload-Offset`` header, resume from the offset ``GET`` reports, and finally name the upload
when creating a version. Small files may also be sent as one multipart ``file`` field.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.translation import gettext
from ninja import Router, Status

from model_store.errors import ModelStoreError
from model_store.targets import all_targets, options_json_schema
from model_store.uploads import Upload, UploadStore
from webapp.accounts.roles import Role, require_role
from webapp.api import types
from webapp.api.app import (
    ADMIN,
    EXTRA_SCHEMAS,
    OPERATOR,
    RETRY_AFTER,
    errors,
    json_object,
    parse_body,
)
from webapp.api.lookups import model_or_404, version_or_404
from webapp.errors import HubError
from webapp.nodes import build_routing as routing
from webapp.registry.catalogue import package_tars
from webapp.registry.catalogue.actions import versions as version_actions
from webapp.registry.catalogue.storage import get_uploads
from webapp.registry.jobs.models import Job
from webapp.registry.jobs.record import full_log_download
from webapp.registry.performance.actions import revisions as revision_actions
from webapp.registry.quantize import actions as quantize_actions
from webapp.text import localize, localized

router = Router(tags=["versions"], exclude_unset=True)


def _owner(request: HttpRequest) -> str:
    return str(request.user.pk)


@router.get(
    "/targets",
    response=types.TargetList,
    url_name="api-targets",
    summary="Targets with their compile options (JSON schema) and status",
)
def targets(request: HttpRequest) -> Any:
    return {
        "targets": [
            {
                "name": t.name,
                "label": localize(t.label),
                "needs_cann": t.needs_cann,
                "hardware_verified": t.hardware_verified,
                "status": localized(routing.build_status(t.name)),
                "options_schema": localized(options_json_schema(t)),
            }
            for t in all_targets()
        ]
    }


# --------------------------------------------------------------------------- uploads


@router.post(
    "/uploads",
    response={201: types.UploadOut, **errors(400, 409, 507)},
    auth=OPERATOR,
    url_name="api-uploads",
    summary="Start a chunked upload (operator); the answer has id and chunk_bytes",
)
def upload_create(request: HttpRequest, data: types.UploadIn) -> Any:
    upload = get_uploads().create(
        filename=browser_filename(data.filename),
        size=data.size,
        sha256=data.sha256,
        owner=_owner(request),
    )
    return Status(201, _upload_dict(upload))


def _own_upload(request: HttpRequest, upload_id: str) -> Upload:
    upload = get_uploads().status(upload_id)
    if upload.owner != _owner(request):
        raise HubError(gettext("There is no such upload."), "upload_not_found", 404)
    return upload


def check_chunk_request(
    request: HttpRequest, upload_id: str
) -> tuple[UploadStore, Upload, int, int]:
    """What a chunk ``PUT`` must pass before a byte of it is read: the operator role, the
    upload's owner, ``Upload-Offset`` and ``Content-Length``. Raises ``HubError`` or a
    ``ModelStoreError``; the streamed fast path (``stream_upload``) runs the same."""
    require_role(request.user, Role.OPERATOR)
    uploads = get_uploads()
    upload = _own_upload(request, upload_id)
    offset_header = request.headers.get("Upload-Offset", "")
    if not offset_header.isdigit():
        message = gettext("Send the chunk's start as an Upload-Offset header.")
        raise HubError(message, "invalid_offset")
    length = int(request.headers.get("Content-Length") or 0)
    if length <= 0 or length > settings.UPLOAD_CHUNK_BYTES * 2:
        message = gettext("A chunk must be 1 byte to %(most)s bytes long.")
        raise HubError(message % {"most": settings.UPLOAD_CHUNK_BYTES * 2}, "invalid_chunk")
    return uploads, upload, int(offset_header), length


@router.get(
    "/uploads/{upload_id}",
    response={200: types.UploadOut, **errors(404)},
    auth=OPERATOR,
    url_name="api-upload",
    summary="Bytes received so far (the offset to resume from)",
)
def upload_detail(request: HttpRequest, upload_id: str) -> Any:
    return _upload_dict(_own_upload(request, upload_id))


CHUNK_DOC = {
    "parameters": [
        {
            "name": "Upload-Offset",
            "in": "header",
            "required": True,
            "schema": {"type": "integer", "minimum": 0},
            "description": "Where this chunk starts: the offset GET reports",
        },
        {
            "name": "Content-Length",
            "in": "header",
            "required": True,
            "schema": {"type": "integer", "minimum": 1},
            "description": "1 byte to twice chunk_bytes; no chunked transfer encoding",
        },
    ],
    "requestBody": {
        "required": True,
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    },
    "x-served-by": "Under Uvicorn the body streams to disk in front of Django "
    "(webapp/edge/stream_upload.py), after the same checks; the answers are the same.",
}
OFFSET_HEADER = {
    "Upload-Offset": {
        "description": "The offset the server expects next",
        "schema": {"type": "integer"},
    }
}


@router.put(
    "/uploads/{upload_id}",
    response={200: types.ChunkOut, **errors(400, 404, 409, 413, 507)},
    auth=OPERATOR,
    summary="Send one chunk: raw body, header Upload-Offset; 409 carries the expected offset "
    "in Upload-Offset",
    openapi_extra={**CHUNK_DOC, "x-responses": {"409": {"headers": OFFSET_HEADER}}},
)
def upload_chunk(request: HttpRequest, upload_id: str) -> Any:
    uploads, upload, offset, length = check_chunk_request(request, upload_id)
    # The request is read as a stream: the chunk goes to disk piece by piece.
    received = uploads.write_chunk(upload_id, offset, request, length)  # type: ignore[arg-type]
    return {"id": upload_id, "offset": received, "size": upload.size}


@router.delete(
    "/uploads/{upload_id}",
    response={204: None, **errors(404)},
    auth=OPERATOR,
    summary="Cancel and delete everything received",
)
def upload_cancel(request: HttpRequest, upload_id: str) -> Any:
    _own_upload(request, upload_id)
    get_uploads().cancel(upload_id)
    return HttpResponse(status=204)


def browser_filename(name: str) -> str:
    """Spaces are common in file names people pick; the store's names allow none."""
    return re.sub(r"\s+", "_", name.strip())


def _upload_dict(upload: Any) -> dict[str, Any]:
    return {
        "id": upload.id,
        "filename": upload.filename,
        "size": upload.size,
        "offset": upload.received,
        "state": upload.state,
        "chunk_bytes": settings.UPLOAD_CHUNK_BYTES,
        "max_bytes": settings.UPLOAD_MAX_BYTES,
    }


# --------------------------------------------------------------------------- versions


def _must_be_object(field: str) -> str:
    return gettext("%(field)s must be a JSON object.") % {"field": field}


def _options_from(value: Any) -> dict[str, Any]:
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise HubError(_must_be_object("options"), "invalid_options") from None
    if not isinstance(value, dict):
        raise HubError(_must_be_object("options"), "invalid_options")
    return value


@router.get(
    "/models/{name}/versions",
    response={200: types.VersionList, **errors(404)},
    url_name="api-versions",
    summary="Versions of a model",
)
def versions(request: HttpRequest, name: str) -> Any:
    model = model_or_404(name)
    return {"versions": [v.to_dict() for v in model.versions.order_by("-number")]}


EXTRA_SCHEMAS["NewVersionIn"] = types.NewVersionIn
NEW_VERSION_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/NewVersionIn"}},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "options": {"type": "string", "description": "A JSON object"},
                        "sample": {"type": "string", "description": "A JSON object"},
                        "allow_duplicate": {"type": "string", "enum": ["1", "true", "yes"]},
                    },
                }
            },
        },
    }
}


@router.post(
    "/models/{name}/versions",
    response={201: types.NewVersion, **errors(400, 404, 409, 507)},
    auth=OPERATOR,
    summary="New version from a finished upload or one multipart 'file'; 409 duplicate",
    openapi_extra=NEW_VERSION_BODY,
)
def version_create(request: HttpRequest, name: str) -> Any:
    model = model_or_404(name)
    if request.content_type == "multipart/form-data":
        version, job = version_actions.create_version_from_upload(
            model=model,
            upload_id=_upload_from_file(request),
            user=request.user,  # type: ignore[arg-type]
            options=_options_from(request.POST.get("options")),
            allow_duplicate=request.POST.get("allow_duplicate", "").lower() in ("1", "true", "yes"),
            sample=_sample_from(request.POST.get("sample")),
        )
    else:
        data = parse_body(request, types.NewVersionIn)
        version, job = version_actions.create_version_from_upload(
            model=model,
            upload_id=data.upload_id,
            user=request.user,  # type: ignore[arg-type]
            options=_options_from(data.options),
            sha256=data.sha256,
            allow_duplicate=data.allow_duplicate,
            sample=_sample_from(data.sample),
        )
    body = {"version": version.number, "job": str(job.uuid), "status": version.status}
    return Status(201, body)


def _sample_from(value: Any) -> dict[str, Any] | None:
    """A verification sample: ``{input name: nested list of numbers}`` (checked in the job)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise HubError(_must_be_object("sample"), "invalid_sample") from None
    if not isinstance(value, dict) or not value or not all(isinstance(k, str) for k in value):
        message = gettext("sample must map each input name to its values, e.g. %(example)s.")
        raise HubError(message % {"example": '{"x": [[0.1, 0.2]]}'}, "invalid_sample")
    return value


def _upload_from_file(request: HttpRequest) -> str:
    """One multipart ``file`` field, stored as a finished upload of the user's; its id."""
    file = request.FILES.get("file")
    if file is None:
        raise HubError(gettext("Send the model as the multipart field 'file'."), "missing_file")
    uploads = get_uploads()
    upload = uploads.create(
        filename=browser_filename(file.name or ""), size=file.size or 0, owner=_owner(request)
    )
    try:
        uploads.write_chunk(upload.id, 0, file, file.size or 0)  # type: ignore[arg-type]
        uploads.finish(upload.id)
    except ModelStoreError:
        uploads.cancel(upload.id)
        raise
    return upload.id


@router.get(
    "/models/{name}/versions/{int:number}",
    response={200: types.VersionDetail, **errors(404)},
    url_name="api-version",
    summary="Status, signature, options, findings, verification, config",
)
def version_detail(request: HttpRequest, name: str, number: int) -> Any:
    return version_or_404(name, number).to_dict(detail=True)


@router.delete(
    "/models/{name}/versions/{int:number}",
    response={204: None, **errors(404, 409)},
    auth=OPERATOR,
    summary="Delete a version that is not serving (files and record)",
)
def version_delete(request: HttpRequest, name: str, number: int) -> Any:
    version = version_or_404(name, number)
    version_actions.delete_version(version=version, user=request.user)  # type: ignore[arg-type]
    return HttpResponse(status=204)


@router.post(
    "/models/{name}/versions/{int:number}/override",
    response={200: types.VersionDetail, **errors(400, 404, 409)},
    auth=ADMIN,
    url_name="api-version-override",
    summary="Allow a version whose verification failed to be published (admin)",
)
def version_override(request: HttpRequest, name: str, number: int, data: types.OverrideIn) -> Any:
    version = version_or_404(name, number)
    version = version_actions.override_verification(version, request.user, data.reason)  # type: ignore[arg-type]
    return version.to_dict(detail=True)


REVISE_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "description": "The options to change, by name (the target's options_schema "
                    "in GET /api/v1/targets); dynamic_batching also takes config.pbtxt's block: "
                    "{preferred_batch_size, max_queue_delay_microseconds}, or false. Or only "
                    '"quantize": {"method": "static", "calibration": "captures" | "examples" | '
                    '{"upload_id": "<a finished .npz upload>"}, "max_items": 32..2048 (256), '
                    '"calibrate_method": "minmax" | "percentile" | "entropy", "activations": '
                    '"int8" | "uint8", "per_channel": true, "exclude_nodes": [node names]}.',
                    "example": {
                        "instance_count": 2,
                        "max_batch_size": 8,
                        "dynamic_batching": {
                            "preferred_batch_size": [4, 8],
                            "max_queue_delay_microseconds": 500,
                        },
                    },
                }
            }
        },
    }
}


@router.post(
    "/models/{name}/versions/{int:number}/revise",
    response={
        200: types.RevisionPlanOut,
        201: types.NewRevision | types.NewQuantization,
        **errors(400, 404, 409),
    },
    auth=OPERATOR,
    url_name="api-version-revise",
    summary="A new version with other serving options (operator): reuses the artifact when "
    "only config.pbtxt changes, else compiles and verifies again; ?dry_run=true previews. "
    'Or {"quantize": {"method": "static", "calibration": "captures" | "examples" | '
    '{"upload_id": ...}, "max_items": 256}}: the version in INT8 (onnxruntime target), '
    "checked against it on held-out inputs",
    openapi_extra=REVISE_BODY,
)
def version_revise(request: HttpRequest, name: str, number: int, dry_run: bool = False) -> Any:
    version = version_or_404(name, number)
    changes = json_object(request.body)
    if "quantize" in changes:
        return _quantize(request, version, changes, dry_run)
    if dry_run:
        return revision_actions.localized_preview(
            revision_actions.preview_revision(version, changes)
        )
    revision, job, plan = revision_actions.request_revision(version, changes, request.user)  # type: ignore[arg-type]
    body = {
        "version": revision.number,
        "job": str(job.uuid),
        "status": revision.status,
        "revision_of": version.number,
        "reuses_artifact": plan.reuses_artifact,
        "rebuild": plan.rebuild,
        "changed": plan.changed,
    }
    return Status(201, body)


def _quantize(request: HttpRequest, version: Any, body: dict[str, Any], dry_run: bool) -> Any:
    """``{"quantize": {...}}``: the next version is this one in INT8 (docs/quantise.md)."""
    if set(body) != {"quantize"}:
        raise HubError(
            gettext("Send quantize alone; change the other options in a revision of its own."),
            "invalid_field",
        )
    if dry_run:
        raise HubError(gettext("dry_run does not apply to quantize."), "invalid_field")
    revision, job, record = quantize_actions.request_quantization(
        version,
        body["quantize"],
        request.user,  # type: ignore[arg-type]
    )
    body = {
        "version": revision.number,
        "job": str(job.uuid),
        "status": revision.status,
        "revision_of": version.number,
        "quantization": record,
    }
    return Status(201, body)


DIGEST_HEADERS = {
    "Content-Disposition": {
        "description": 'attachment; filename="<model>-v<version>.tar"',
        "schema": {"type": "string"},
    },
    "Content-Length": {"description": "The tar's size in bytes", "schema": {"type": "integer"}},
    "X-Content-SHA256": {"description": "The tar's SHA-256, hex", "schema": {"type": "string"}},
    "Repr-Digest": {
        "description": "The same SHA-256 as RFC 9530 writes it: sha-256=:<base64>:",
        "schema": {"type": "string"},
    },
    "ETag": {"description": '"sha256-<hex>"', "schema": {"type": "string"}},
}
PACKAGE_TAR_DOC = {
    "x-responses": {
        "200": {
            "description": "The tar: <model>/config.pbtxt (pinned to this version) and "
            "<model>/<version>/<files>, deterministic (docs/triton.md#package-tar)",
            "headers": DIGEST_HEADERS,
            "content": {"application/x-tar": {"schema": {"type": "string", "format": "binary"}}},
        },
        **{str(c): {"headers": RETRY_AFTER} for c in (429, 503)},
    }
}


PACKAGE_TAR_PATH = "/models/{name}/versions/{int:number}/package.tar"
PACKAGE_TAR_ANSWERS = {200: None, **errors(404, 409, 429, 503, 507)}


@router.get(
    PACKAGE_TAR_PATH,
    response=PACKAGE_TAR_ANSWERS,
    url_name="api-version-package-tar",
    summary="The packaged version as a tar with its SHA-256 (X-Content-SHA256, Repr-Digest); "
    "409 not_packaged, 404 package_missing; built on the first request, then reused",
    openapi_extra=PACKAGE_TAR_DOC,
)
def version_package_tar(request: HttpRequest, name: str, number: int) -> Any:
    return _package_tar(request, name, number, head=False)


# A handler of its own: GET and HEAD on one handler would share one operationId.
@router.api_operation(
    ["HEAD"],
    PACKAGE_TAR_PATH,
    response=PACKAGE_TAR_ANSWERS,
    summary="The tar's headers only: size and SHA-256 (builds it if it is not built yet)",
    openapi_extra=PACKAGE_TAR_DOC,
)
def version_package_tar_head(request: HttpRequest, name: str, number: int) -> Any:
    return _package_tar(request, name, number, head=True)


def _package_tar(request: HttpRequest, name: str, number: int, *, head: bool) -> Any:
    version = version_or_404(name, number)
    tar = package_tars.tar_of(version, _owner(request))
    return package_tars.tar_response(tar, head=head)


# --------------------------------------------------------------------------- jobs


def _job(job_id: str) -> Job:
    try:
        job = Job.objects.select_related("model", "version").filter(uuid=job_id).first()
    except ValidationError:  # not a UUID
        job = None
    if job is None:
        raise HubError(gettext("There is no job %(id)s.") % {"id": repr(job_id)}, "not_found", 404)
    return job


@router.get("/jobs", response=types.JobList, url_name="api-jobs", summary="Recent jobs")
def jobs(request: HttpRequest) -> Any:
    rows = Job.objects.select_related("model", "version")[:100]
    return {"jobs": [j.to_dict() for j in rows]}


@router.get(
    "/jobs/{job_id}",
    response={200: types.JobDetail, **errors(404)},
    url_name="api-job",
    summary="State, steps, progress, commands, log (its first JOB_LOG_MAX_LINES lines; "
    "log_lines_more counts the rest, log_url serves all)",
)
def job_detail(request: HttpRequest, job_id: str) -> Any:
    job = _job(job_id)
    return job.to_dict(log=True) | {"log_url": reverse("api-job-log", args=[job.uuid])}


@router.post(
    "/jobs/{job_id}/cancel",
    response={200: types.JobOut, **errors(404, 409)},
    auth=OPERATOR,
    url_name="api-job-cancel",
    summary="Ask a running job to stop",
)
def job_cancel(request: HttpRequest, job_id: str) -> Any:
    job = version_actions.cancel_job(_job(job_id), request.user)  # type: ignore[arg-type]
    return job.to_dict()


@router.get(
    "/jobs/{job_id}/log",
    response={200: None, **errors(404)},
    url_name="api-job-log",
    summary="The full log as a text/plain attachment",
    openapi_extra={
        "x-responses": {
            "200": {
                "description": "Every line the job logged",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            }
        }
    },
)
def job_log(request: HttpRequest, job_id: str) -> Any:
    """The job's full log file (text/plain attachment), streamed from disk."""
    try:
        return full_log_download(_job(job_id))
    except Http404 as exc:
        raise HubError(str(exc), "not_found", 404) from None
