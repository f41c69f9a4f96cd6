"""The "Quantise to INT8" page of a version, and the INT8/FP32 pair its version page shows.

The page posts like the upload page (``static/hub/upload.js``): a calibration ``.npz`` goes up
in resumable chunks with a progress bar first; captures and examples need no file. The answer
is JSON, ``{"version", "job_url"}`` or the refusal.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.translation import gettext

from model_store.errors import ModelStoreError
from model_store.verification_compare import TOLERANCES
from webapp.accounts.roles import Role, require_role
from webapp.api.app import store_error
from webapp.errors import HubError, error_json
from webapp.http import HubRequest
from webapp.registry.catalogue.models import Version
from webapp.registry.performance.models import PerfRun
from webapp.registry.performance.views.revise import page_version
from webapp.registry.quantize import actions, calibration
from webapp.text import localize

#: The form's advanced choices, as the API names them.
METHODS = ("minmax", "percentile", "entropy")
ACTIVATIONS = ("int8", "uint8")


def quantize_page(request: HubRequest, name: str, number: int) -> HttpResponse:
    version = page_version(name, number)
    if request.method == "POST":
        return _submit(request, version)
    available, why = actions.availability(version)
    refusal = ""
    if available:
        try:
            actions.check_state(version)  # the graph is read when the form is sent
        except HubError as exc:
            refusal = localize(exc.message)
    context = {
        "model": version.model,
        "version": version,
        "nav": "models",
        "available": available and not refusal,
        "why": why or refusal,
        "counts": {
            "captures": len(calibration.captures(version, actions.MAX_ITEMS).ids),
            "examples": len(calibration.examples(version, actions.MAX_ITEMS).ids),
        },
        "min_inputs": actions.MIN_INPUTS,
        "default_max": actions.DEFAULT_MAX_ITEMS,
        "max_items": actions.MAX_ITEMS,
        "methods": METHODS,
        "activations": ACTIVATIONS,
        "tolerances": TOLERANCES["int8"],
        "chunk_bytes": settings.UPLOAD_CHUNK_BYTES,
        "max_bytes": calibration.MAX_UPLOAD_BYTES,
    }
    return render(request, "registry/version_quantize.html", context)


def _submit(request: HubRequest, version: Version) -> HttpResponse:
    try:
        require_role(request.user, Role.OPERATOR)
        body = _body_from_form(request.POST)
        revision, job, _ = actions.request_quantization(version, body, request.user)  # type: ignore[arg-type]
    except ModelStoreError as exc:
        return error_json(store_error(exc))
    except HubError as exc:
        return error_json(exc)
    return JsonResponse({"version": revision.number, "job_url": f"/jobs/{job.uuid}/"}, status=201)


def _body_from_form(form: Any) -> dict[str, Any]:
    """The API's ``quantize`` object from the page's fields (text until :func:`actions.parse`)."""
    source = form.get("calibration", "captures")
    body: dict[str, Any] = {
        "method": "static",
        "calibrate_method": form.get("calibrate_method", "minmax"),
        "activations": form.get("activations", "int8"),
        # A checkbox sends nothing when unchecked.
        "per_channel": form.get("per_channel") == "on",
    }
    if source == "upload":
        if not form.get("upload_id"):
            raise HubError(gettext("Choose or drop the .npz file of calibration inputs."))
        body["calibration"] = {"upload_id": form["upload_id"], "sha256": form.get("sha256", "")}
    else:
        body["calibration"] = source
    raw_max = form.get("max_items", "").strip()
    if raw_max:
        if not raw_max.isdigit():
            raise HubError(gettext("max_items must be a whole number."), "invalid_field")
        body["max_items"] = int(raw_max)
    exclude = [n.strip() for n in form.get("exclude_nodes", "").split(",") if n.strip()]
    if exclude:
        body["exclude_nodes"] = exclude
    return body


# -- the pair on the INT8 version's page ----------------------------------------------------


def pair(version: Version) -> dict[str, Any] | None:
    """The INT8 version beside the FP32 one it came from: sizes, agreement, sweeps."""
    record = version.quantization
    source = version.revision_of
    if record is None or source is None:
        return None
    report = version.verification or {}
    outputs = report.get("outputs") or []
    return {
        "record": record,
        "source": source,
        "sizes": _sizes(source, version),
        "outputs": outputs,
        "held_out": (report.get("inputs") or {}).get("held_out"),
        "tolerances": report.get("tolerances") or TOLERANCES["int8"],
        "sweeps": sweeps_side_by_side(source, version),
    }


def _sizes(fp32: Version, int8: Version) -> dict[str, Any]:
    before, after = fp32.artifact_size, int8.artifact_size
    return {
        "fp32": before,
        "int8": after,
        "ratio": round(before / after, 1) if before and after else None,
    }


def _newest_sweep(version: Version) -> PerfRun | None:
    for run in version.perf_runs.select_related("job").order_by("-created")[:10]:
        if run.job.state == "succeeded" and run.plan.get("mode", "concurrency") == "concurrency":
            return run
    return None


def sweeps_side_by_side(fp32: Version, int8: Version) -> dict[str, Any]:
    """Each version's newest finished closed-loop sweep, level by level where both measured
    the same concurrency: throughput and p99, and INT8's throughput as a ratio of FP32's."""
    runs = {"fp32": _newest_sweep(fp32), "int8": _newest_sweep(int8)}
    rows = []
    if runs["fp32"] is not None and runs["int8"] is not None:
        by_level = {
            key: {lv.get("concurrency"): lv for lv in run.levels or []}
            for key, run in runs.items()
            if run is not None
        }
        for level in sorted(set(by_level["fp32"]) & set(by_level["int8"])):
            a, b = by_level["fp32"][level], by_level["int8"][level]
            rate_a, rate_b = a.get("throughput_rps") or 0, b.get("throughput_rps") or 0
            rows.append({
                "concurrency": level,
                "fp32": {"rps": rate_a, "p99": (a.get("latency") or {}).get("p99_ms")},
                "int8": {"rps": rate_b, "p99": (b.get("latency") or {}).get("p99_ms")},
                "ratio": round(rate_b / rate_a, 2) if rate_a else None,
            })  # fmt: skip
    return {"runs": runs, "rows": rows}
