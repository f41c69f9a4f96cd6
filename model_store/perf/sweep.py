"""Drive one model version at increasing load and measure each level.

Two modes, as ``perf_analyzer`` has them:

* closed loop (``SweepPlan(levels=...)``, the default): for each concurrency level ``c``,
  ``c`` threads send requests back to back (like ``--concurrency-range``);
* open loop (``SweepPlan(rates=...)``): for each rate ``r``, request ``i`` of the window is
  *scheduled* at ``t0 + i / r`` whatever the server does (like ``--request-rate-range`` with
  the constant distribution). A pool of sender threads, grown on demand up to
  ``max_in_flight``, sends each request at its time; when every sender is busy at a request's
  time it is sent as soon as one frees up and counted as ``late``, never dropped. Latency is
  measured from the scheduled time, not the actual send, so the time a request waited in the
  client because the server fell behind counts: measuring from the send would hide exactly the
  slow periods (coordinated omission). Requests still unsent one ``step_seconds`` after the
  window ends are counted as ``unsent`` rather than waited for (the level is then saturated).
  :func:`measure_rate` measures one rate, for a tuner.

A level has two phases:

1. warmup (``warmup_seconds``): requests are sent but their successes are not counted, so
   connection set-up and cold caches do not skew the numbers;
2. measurement (``step_seconds``): every thread waits at a barrier first, so no request is in
   flight when Triton's statistics are read; the window then runs until the deadline and each
   thread finishes the request it has started. Statistics are read again once every thread
   has stopped, so the server-side success delta covers exactly the measured requests.

In open loop the warmup runs on the same schedule; then the senders finish what is in flight
(the schedule pauses), statistics are read and the measured schedule starts afresh, so the
statistics window again holds exactly the measured requests, and the senders the warmup needed
are already running (and connected) when the window starts.

Cancellation, the failure limit and the overall time limit are checked by the calling thread
while the workers run; workers only look at an Event between requests, so a stop takes effect
within one request. Every thread started is joined before :func:`run_sweep` returns or
raises.

The plan is in :mod:`model_store.perf.plan`, the results and the judgements on them in
:mod:`model_store.perf.results`, the measurement of one level in :mod:`model_store.perf.levels`;
this module walks the levels and holds the entry points.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from model_store.perf.levels import StatsReader, _run_level, _run_rate_level, _ServerStats
from model_store.perf.plan import MAX_CONCURRENCY, SweepPlan
from model_store.perf.results import LevelResult, SweepResult, _saturated
from model_store.runtime.client import Protocol, TritonRuntime
from model_store.runtime.errors import TritonRequestError, TritonUnavailable

__all__ = ["measure_rate", "run_sweep"]


def _never() -> bool:
    return False


def _ignore(level: LevelResult, fraction_done: float) -> None:
    return None


def _noop() -> None:
    return None


def _sweep(
    model: str,
    version: str,
    plan: SweepPlan,
    *,
    infer: Callable[[], object],
    read_stats: StatsReader,
    release: Callable[[], None] = _noop,
    is_cancelled: Callable[[], bool] = _never,
    on_level: Callable[[LevelResult, float], None] = _ignore,
) -> SweepResult:
    """The sweep loop, independent of Triton: ``infer`` sends one request (raising
    ``TritonRequestError``/``TritonUnavailable`` on failure), ``read_stats`` returns a
    statistics response or None, ``release`` runs in each worker thread as it ends."""
    result = SweepResult(model=model, version=version, plan=plan)
    stats = _ServerStats(read_stats, version)
    sweep_start = time.monotonic()
    points = plan.points
    for index, point in enumerate(points):
        if is_cancelled():
            result.stopped = "cancelled"
            break
        elapsed = time.monotonic() - sweep_start
        if elapsed + plan.warmup_seconds + plan.step_seconds > plan.max_total_seconds:
            result.stopped = "time_limit"
            break
        if plan.rates is None:
            level = _run_level(int(point), plan, version, stats, infer, release, is_cancelled)
        else:
            level = _run_rate_level(point, plan, version, stats, infer, release, is_cancelled)
        if level is None:
            result.stopped = "cancelled"
            break
        result.levels.append(level)
        on_level(level, (index + 1) / len(points))
        if level.failed > plan.max_failures_per_level:
            result.stopped = "failures"
            break
        previous = result.levels[-2] if len(result.levels) > 1 else None
        saturated = _saturated(previous, level)
        if plan.stop_on_saturation and saturated:
            result.stopped = "saturated"
            break
    return result


class _ThreadRuntimes:
    """A private ``TritonRuntime`` per worker thread, built from the caller's addresses.

    Private because ``TritonRuntime`` fixes its request timeout at construction and the plan
    has its own; per thread so that each worker has its own connection (as perf_analyzer's
    workers do) and can close it itself when it ends.
    """

    def __init__(self, runtime: TritonRuntime, timeout: float) -> None:
        self._runtime = runtime
        self._timeout = timeout
        self._local = threading.local()

    def get(self) -> TritonRuntime:
        runtime: TritonRuntime | None = getattr(self._local, "runtime", None)
        if runtime is None:
            runtime = self._local.runtime = TritonRuntime(
                self._runtime.http_url,
                self._runtime.grpc_url,
                timeout=self._timeout,
                connection_timeout=self._runtime.connection_timeout,
            )
        return runtime

    def release(self) -> None:
        runtime: TritonRuntime | None = getattr(self._local, "runtime", None)
        self._local.runtime = None
        if runtime is not None:
            runtime.close()


def run_sweep(
    runtime: TritonRuntime,
    model: str,
    version: int | str,
    inputs: dict[str, np.ndarray],
    plan: SweepPlan,
    *,
    protocol: str = "grpc",
    is_cancelled: Callable[[], bool] = _never,
    on_level: Callable[[LevelResult, float], None] = _ignore,
) -> SweepResult:
    """Sweep ``model`` ``version`` with ``inputs`` (one request's tensors) following ``plan``.

    ``protocol="grpc"`` falls back to HTTP when the runtime has no gRPC address.
    ``is_cancelled`` is polled from the calling thread only (every 50 ms), so it may use
    thread-bound resources such as a database connection. ``on_level(level, fraction_done)``
    runs after each measured level, ``fraction_done`` being measured levels / planned levels.
    """
    if protocol not in ("grpc", "http"):
        raise ValueError(f"unknown protocol {protocol!r}; use 'grpc' or 'http'")
    chosen: Protocol = "grpc" if protocol == "grpc" and runtime.grpc_url else "http"
    version = str(version)
    clients = _ThreadRuntimes(runtime, plan.request_timeout)

    def infer() -> object:
        return clients.get().infer(model, inputs, version=version, protocol=chosen)

    def read_stats() -> Mapping[str, Any] | None:
        try:
            return runtime.statistics(model, version)
        except (TritonUnavailable, TritonRequestError):
            return None  # no split for this level, but the client-side numbers still stand

    return _sweep(
        model,
        version,
        plan,
        infer=infer,
        read_stats=read_stats,
        release=clients.release,
        is_cancelled=is_cancelled,
        on_level=on_level,
    )


def measure_rate(
    runtime: TritonRuntime,
    model: str,
    version: int | str,
    inputs: dict[str, np.ndarray],
    rate_rps: float,
    *,
    seconds: float = 3.0,
    warmup_seconds: float = 0.5,
    max_in_flight: int = MAX_CONCURRENCY,
    request_timeout: float = 10.0,
    max_failures: int = 50,
    protocol: str = "grpc",
    is_cancelled: Callable[[], bool] = _never,
) -> LevelResult | None:
    """One open-loop level at ``rate_rps`` (what a tuner asks: "what p99 at this rate?").

    None when cancelled. Raises ValueError for arguments a :class:`SweepPlan` refuses.
    """
    plan = SweepPlan(
        rates=(rate_rps,),
        step_seconds=seconds,
        warmup_seconds=warmup_seconds,
        max_in_flight=max_in_flight,
        request_timeout=request_timeout,
        max_failures_per_level=max_failures,
        # One level: the limit only has to admit it (the level bounds itself).
        max_total_seconds=min(3600.0, warmup_seconds + 2 * seconds + 1.0),
        stop_on_saturation=False,
    )
    result = run_sweep(
        runtime, model, version, inputs, plan, protocol=protocol, is_cancelled=is_cancelled
    )
    return result.levels[0] if result.levels else None
