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
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse

from model_store.errors import ModelStoreError
from model_store.targets import all_targets, options_json_schema
from model_store.uploads import FinishedUpload, UploadOffsetMismatch
from webapp.accounts.roles import Role
from webapp.api.decorators import api_view, field, json_body
from webapp.api.errors import ApiError, error_response
from webapp.api.lookups import model_or_404, version_or_404
from webapp.registry import serving
from webapp.registry import versions as version_actions
from webapp.registry.jobs import full_log_download
from webapp.registry.models import Job
from webapp.registry.storage import get_uploads


def _owner(request: HttpRequest) -> str:
    return str(request.user.pk)


@api_view("GET")
def targets(request: HttpRequest) -> dict[str, Any]:
    import os

    return {
        "targets": [
            {
                "name": t.name,
                "label": t.label,
                "needs_cann": t.needs_cann,
                "hardware_verified": t.hardware_verified,
                "status": vars(t.status(dict(os.environ))),
                "options_schema": options_json_schema(t),
            }
            for t in all_targets()
        ]
    }


@api_view("POST", role=Role.OPERATOR)
def upload_create(request: HttpRequest) -> HttpResponse:
    data = json_body(request)
    upload = get_uploads().create(
        filename=browser_filename(field(data, "filename", str, max_len=300)),
        size=field(data, "size", int),
        sha256=field(data, "sha256", str, default=None, max_len=64),
        owner=_owner(request),
    )
    return JsonResponse(_upload_dict(upload), status=201)


@api_view("GET", "PUT", "DELETE", role=Role.OPERATOR)
def upload_detail(request: HttpRequest, upload_id: str) -> HttpResponse | dict[str, Any]:
    uploads = get_uploads()
    upload = uploads.status(upload_id)
    if upload.owner != _owner(request):
        raise ApiError("There is no such upload.", "upload_not_found", 404)
    if request.method == "GET":
        return _upload_dict(upload)
    if request.method == "DELETE":
        uploads.cancel(upload_id)
        return HttpResponse(status=204)
    offset_header = request.headers.get("Upload-Offset", "")
    if not offset_header.isdigit():
        raise ApiError("Send the chunk's start as an Upload-Offset header.", "invalid_offset")
    length = int(request.headers.get("Content-Length") or 0)
    if length <= 0 or length > settings.UPLOAD_CHUNK_BYTES * 2:
        raise ApiError(
            f"A chunk must be 1 byte to {settings.UPLOAD_CHUNK_BYTES * 2} bytes long.",
            "invalid_chunk",
        )
    try:
        # The request is read as a stream: the chunk goes to disk piece by piece.
        received = uploads.write_chunk(upload_id, int(offset_header), request, length)  # type: ignore[arg-type]
    except UploadOffsetMismatch as exc:
        response = error_response(str(exc), exc.code, 409)
        response["Upload-Offset"] = str(exc.expected)
        return response
    return {"id": upload_id, "offset": received, "size": upload.size}


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


def _options_from(value: Any) -> dict[str, Any]:
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ApiError("options must be a JSON object.", "invalid_options") from None
    if not isinstance(value, dict):
        raise ApiError("options must be a JSON object.", "invalid_options")
    return value


@api_view("GET", "POST", role=Role.OPERATOR)
def versions(request: HttpRequest, name: str) -> HttpResponse | dict[str, Any]:
    model = model_or_404(name)
    if request.method == "GET":
        return {"versions": [v.to_dict() for v in model.versions.order_by("-number")]}
    upload_id, finished, raw_options, allow_duplicate, sample = _received_file(request)
    options = version_actions.parse_options(model, raw_options)
    version, job = version_actions.create_version(
        model=model,
        upload=finished,
        options=options,
        user=request.user,  # type: ignore[arg-type]
        allow_duplicate=allow_duplicate,
        sample=sample,
    )
    get_uploads().cancel(upload_id)  # stored as the version's source: the upload is spent
    return JsonResponse(
        {"version": version.number, "job": str(job.uuid), "status": version.status}, status=201
    )


def _sample_from(value: Any) -> dict[str, Any] | None:
    """A verification sample: ``{input name: nested list of numbers}`` (checked in the job)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ApiError("sample must be a JSON object.", "invalid_sample") from None
    if not isinstance(value, dict) or not value or not all(isinstance(k, str) for k in value):
        raise ApiError(
            'sample must map each input name to its values, e.g. {"x": [[0.1, 0.2]]}.',
            "invalid_sample",
        )
    return value


def _received_file(
    request: HttpRequest,
) -> tuple[str, FinishedUpload, Any, bool, dict[str, Any] | None]:
    """The new version's file: a finished chunked upload, or one multipart ``file`` field."""
    uploads = get_uploads()
    if request.content_type == "multipart/form-data":
        file = request.FILES.get("file")
        if file is None:
            raise ApiError("Send the model as the multipart field 'file'.", "missing_file")
        upload = uploads.create(
            filename=browser_filename(file.name or ""), size=file.size or 0, owner=_owner(request)
        )
        try:
            uploads.write_chunk(upload.id, 0, file, file.size or 0)  # type: ignore[arg-type]
            finished = uploads.finish(upload.id)
        except ModelStoreError:
            uploads.cancel(upload.id)
            raise
        allow = request.POST.get("allow_duplicate", "").lower() in ("1", "true", "yes")
        options = _options_from(request.POST.get("options"))
        return upload.id, finished, options, allow, _sample_from(request.POST.get("sample"))
    data = json_body(request)
    upload_id = field(data, "upload_id", str, max_len=64)
    upload = uploads.status(upload_id)
    if upload.owner != _owner(request):
        raise ApiError("There is no such upload.", "upload_not_found", 404)
    finished = uploads.finish(upload_id)
    allow = bool(field(data, "allow_duplicate", bool, default=False))
    client_sha = field(data, "sha256", str, default="", max_len=64).lower()
    if client_sha and client_sha != finished.sha256:
        uploads.cancel(upload_id)
        raise ApiError(
            "The file changed in transit: your sha256 does not match what arrived. Upload again.",
            "upload_corrupt",
        )
    sample = _sample_from(data.get("sample"))
    return upload_id, finished, _options_from(data.get("options")), allow, sample


@api_view("GET", "DELETE", role=Role.OPERATOR)
def version_detail(request: HttpRequest, name: str, number: int) -> HttpResponse | dict[str, Any]:
    version = version_or_404(name, number)
    if request.method == "DELETE":
        serving.delete_version(version=version, user=request.user)  # type: ignore[arg-type]
        return HttpResponse(status=204)
    return version.to_dict(detail=True)


@api_view("POST", role=Role.ADMIN)
def version_override(request: HttpRequest, name: str, number: int) -> dict[str, Any]:
    version = version_or_404(name, number)
    reason = field(json_body(request), "reason", str, max_len=1000)
    version = version_actions.override_verification(version, request.user, reason)  # type: ignore[arg-type]
    return version.to_dict(detail=True)


def _job(job_id: str) -> Job:
    try:
        job = Job.objects.select_related("model", "version").filter(uuid=job_id).first()
    except ValidationError:  # not a UUID
        job = None
    if job is None:
        raise ApiError(f"There is no job {job_id!r}.", "not_found", 404)
    return job


@api_view("GET")
def job_detail(request: HttpRequest, job_id: str) -> dict[str, Any]:
    job = _job(job_id)
    # "log" holds the first JOB_LOG_MAX_LINES lines; log_url serves all of them.
    return job.to_dict(log=True) | {"log_url": reverse("api-job-log", args=[job.uuid])}


@api_view("GET")
def job_log(request: HttpRequest, job_id: str) -> FileResponse:
    """The job's full log file (text/plain attachment), streamed from disk."""
    try:
        return full_log_download(_job(job_id))
    except Http404 as exc:
        raise ApiError(str(exc), "not_found", 404) from None


@api_view("POST", role=Role.OPERATOR)
def job_cancel(request: HttpRequest, job_id: str) -> dict[str, Any]:
    job = version_actions.cancel_job(_job(job_id), request.user)  # type: ignore[arg-type]
    return job.to_dict()


@api_view("GET")
def jobs(request: HttpRequest) -> dict[str, Any]:
    rows = Job.objects.select_related("model", "version")[:100]
    return {"jobs": [j.to_dict() for j in rows]}
