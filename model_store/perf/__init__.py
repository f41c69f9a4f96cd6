"""Performance sweeps of a served model, in the manner of a small ``perf_analyzer``.

* :mod:`model_store.perf.stats`: percentiles, latency summaries and Triton's server-side split
  (pure arithmetic, no I/O);
* :mod:`model_store.perf.sweep`: the sweep itself (threads driving a ``TritonRuntime``), at
  fixed concurrencies (closed loop) or fixed request rates (open loop);
* :mod:`model_store.perf.plan`: what a sweep measures (:class:`SweepPlan`);
* :mod:`model_store.perf.results`: what it yields (:class:`LevelResult`, :class:`SweepResult`)
  and the judgements on it (:func:`best_level`);
* :mod:`model_store.perf.levels`: the measurement of one level (the threads).

Plain Python, no Django: a Celery worker or a script can run a sweep.
"""

from model_store.perf.plan import SweepPlan
from model_store.perf.results import LevelResult, SweepResult, best_level
from model_store.perf.stats import LatencySummary, ServerSplit, percentile, server_split
from model_store.perf.sweep import measure_rate, run_sweep

__all__ = [
    "LatencySummary",
    "LevelResult",
    "ServerSplit",
    "SweepPlan",
    "SweepResult",
    "best_level",
    "measure_rate",
    "percentile",
    "run_sweep",
    "server_split",
]
