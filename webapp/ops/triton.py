"""The dashboard's handle on Triton, built from settings (one place to construct it)."""

from __future__ import annotations

import atexit
import functools
import os

from django.conf import settings

from model_store.runtime.client import TritonRuntime


def get_runtime(timeout: float | None = None, *, with_key: bool = True) -> TritonRuntime:
    """The hub's client, carrying TRITON_API_KEY for Triton's restricted repository API.

    ``with_key=False`` asks as anyone on the network would (the diagnostics' probe).
    """
    return TritonRuntime(
        http_url=settings.TRITON_URL,
        grpc_url=settings.TRITON_GRPC_URL,
        metrics_url=settings.TRITON_METRICS_URL,
        timeout=timeout or settings.TRITON_TIMEOUT_SECONDS,
        api_key=settings.TRITON_API_KEY if with_key else None,
    )


def is_embedded() -> bool:
    """True when `make run` started this Triton (it says so to its children)."""
    return os.environ.get("HUB_TRITON_EMBEDDED") == "1"


@functools.lru_cache(maxsize=32)
def _inference_runtime(http: str, grpc: str, metrics: str, timeout: float) -> TritonRuntime:
    runtime = TritonRuntime(http_url=http, grpc_url=grpc, metrics_url=metrics, timeout=timeout)
    _created.append(runtime)
    return runtime


_created: list[TritonRuntime] = []


def inference_runtime() -> TritonRuntime:
    """One long-lived client per process for inference requests.

    The infer endpoint must add little to Triton's own latency, so it reuses one gRPC channel
    (thread-safe, kept open) instead of building a client per request. It gets no
    TRITON_API_KEY: inference is open, and this client never loads or unloads.
    """
    return _inference_runtime(
        settings.TRITON_URL,
        settings.TRITON_GRPC_URL,
        settings.TRITON_METRICS_URL,
        float(settings.INFER_TIMEOUT_SECONDS),
    )


def node_inference_runtime(http: str, grpc: str | None) -> TritonRuntime:
    """The long-lived inference client of another node's Triton (its reported URLs)."""
    return _inference_runtime(http, grpc or "", "", float(settings.INFER_TIMEOUT_SECONDS))


@atexit.register
def _close_inference_runtimes() -> None:
    # Close the cached gRPC channels while the interpreter is still whole; grpc's own
    # finaliser at exit otherwise prints an ignored AttributeError.
    for runtime in _created:
        runtime.close()
