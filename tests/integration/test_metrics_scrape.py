"""parse_scrape / rates against the real embedded Triton's metrics endpoint."""

from __future__ import annotations

import time

import numpy as np
import pytest

from model_store.runtime.metrics import Scrape, parse_scrape, rates
from tests.fixtures.triton import (
    TritonHandle,
    mlp_config_pbtxt,
    mlp_onnx_bytes,
    wait_for_state,
    write_model,
)
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.integration

N = 20


def _scrape(handle: TritonHandle) -> Scrape:
    return parse_scrape(handle.runtime.scrape_metrics(), at=time.monotonic())


def _scrape_until_success(
    handle: TritonHandle, key: tuple[str, str], expected: float, timeout: float = 10.0
) -> Scrape:
    """Scrape until ``key``'s success counter reaches ``expected`` (bounded; in case of lag)."""
    series = None

    def reached() -> Scrape | None:
        nonlocal series
        scrape = _scrape(handle)
        series = scrape.series.get(key)
        return scrape if series is not None and series.get("success") == expected else None

    return wait_until(
        reached, timeout, interval=0.1,
        message=lambda: f"{key} success never reached {expected}: {series}",
    )  # fmt: skip


def test_rates_count_exactly_the_requests_sent(
    embedded_triton: TritonHandle, model_name: str
) -> None:
    runtime = embedded_triton.runtime
    write_model(
        embedded_triton.repository, model_name, {1: mlp_onnx_bytes()}, mlp_config_pbtxt(model_name)
    )
    runtime.load(model_name)
    wait_for_state(runtime, model_name, "READY", version="1")
    key = (model_name, "1")

    before = _scrape_until_success(embedded_triton, key, 0)
    x = np.random.default_rng(3).standard_normal((1, 4)).astype(np.float32)
    for _ in range(N):
        runtime.infer(model_name, {"x": x})
    after = _scrape_until_success(embedded_triton, key, N)

    r = rates(before, after)[key]
    dt = after.at - before.at
    assert r.requests_per_s * dt == pytest.approx(N)
    assert r.inferences_per_s * dt == pytest.approx(N)  # batch 1 each
    assert r.failures_per_s == 0.0
    assert r.reset is False
    assert r.avg_batch is not None and 1.0 <= r.avg_batch <= 1.0 + 1e-9
    assert r.pending == 0
    parts = [
        r.avg_queue_ms,
        r.avg_compute_input_ms,
        r.avg_compute_infer_ms,
        r.avg_compute_output_ms,
    ]
    assert r.avg_request_ms is not None and r.avg_request_ms > 0
    assert all(p is not None and p >= 0 for p in parts), parts
    assert r.avg_compute_infer_ms is not None and r.avg_compute_infer_ms > 0
    assert sum(p for p in parts if p is not None) <= r.avg_request_ms + 1e-6
