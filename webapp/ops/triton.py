"""The dashboard's handle on Triton, built from settings (one place to construct it)."""

from __future__ import annotations

import os

from django.conf import settings

from model_store.runtime.client import TritonRuntime


def get_runtime(timeout: float | None = None) -> TritonRuntime:
    return TritonRuntime(
        http_url=settings.TRITON_URL,
        grpc_url=settings.TRITON_GRPC_URL,
        metrics_url=settings.TRITON_METRICS_URL,
        timeout=timeout or settings.TRITON_TIMEOUT_SECONDS,
    )


def is_embedded() -> bool:
    """True when `make run` started this Triton (it says so to its children)."""
    return os.environ.get("HUB_TRITON_EMBEDDED") == "1"
