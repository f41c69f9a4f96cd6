"""What the server page and ``GET /api/v1/server`` show: Triton's identity, health and index."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from model_store.runtime.errors import TritonRequestError, TritonUnavailable
from webapp.nodes import host_reports
from webapp.ops.triton import get_runtime, is_embedded


def triton_summary() -> dict[str, Any]:
    runtime = get_runtime(timeout=3.0)
    summary: dict[str, Any] = {
        "url": settings.TRITON_URL,
        "grpc_url": settings.TRITON_GRPC_URL,
        "metrics_url": settings.TRITON_METRICS_URL,
        "embedded": is_embedded(),
        "live": False,
        "ready": False,
        "name": None,
        "version": None,
        "extensions": [],
        "repository": [],
        "error": None,
    }
    try:
        summary["live"] = runtime.is_live()
        summary["ready"] = runtime.is_ready()
        if summary["live"]:
            meta = runtime.server_metadata()
            summary["name"] = meta.get("name")
            summary["version"] = meta.get("version")
            summary["extensions"] = sorted(meta.get("extensions", []))
            summary["repository"] = runtime.repository_index()
        else:
            summary["error"] = f"Triton at {settings.TRITON_URL} is not reachable."
    except (TritonUnavailable, TritonRequestError) as exc:
        summary["error"] = str(exc)
    return summary


def devices_summary() -> dict[str, Any]:
    """Ascend NPUs from ``npu-smi info`` (docs/npu-smi.md#the-info-table), or why there are none.

    From the newest report of a worker on the host (webapp/nodes/host_reports.py), with its age;
    the web process does not run npu-smi itself. Where the serving Triton's pyACL counted a
    different number of devices (a container numbers only the NPUs mapped into it, from 0;
    docs/ascend.md#the-serving-side), ``pyacl_device_count`` says how many it sees.
    """
    found = host_reports.devices()
    side = host_reports.serving() or {}
    count = (side.get("pyacl") or {}).get("device_count") if side.get("available") else None
    if isinstance(count, int) and count != len(found.get("npus") or []):
        found["pyacl_device_count"] = count
    return found
