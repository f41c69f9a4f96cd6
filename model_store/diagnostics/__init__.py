"""The Ascend/Triton troubleshooting checklist, run automatically (Django-free).

Each check is a small function of an explicit :class:`DiagnosticsContext` and
returns a :class:`Check`: a state (ok / warning / failing / not_applicable), what
it found in plain words with the concrete values, and what to do about it. All
outside contact goes through the context (environment, ``which``, ``run`` for
subprocesses, the Triton calls, the devices report, ``/dev``), so tests pass plain
functions and temporary directories instead of a real host.

What the checks look for is written up, with its upstream sources, in docs/: the CANN
environment that ``set_env.sh`` gives (docs/cann.md#install-layouts), ATC (docs/atc.md),
the ``npu_ge`` backend library and what it links (docs/ge-backend.md#identity-and-build),
the device nodes and mounts a container needs (docs/ge-backend.md#runtime-environment),
npu-smi's table (docs/npu-smi.md#the-info-table), the GE backend's log phrases
(docs/ge-backend.md#log-phrases) and its reload caveats
(docs/ge-backend.md#statistics-reload-and-unload). None of it has been run on Ascend
hardware by this project (docs/cann.md#what-has-run-on-ascend-hardware).

The submodules, from the bottom up (each imports only those above it):
:mod:`~model_store.diagnostics.triton_log` (Triton's log and the GE error phrases),
:mod:`~model_store.diagnostics.context` (:class:`Check` and :class:`DiagnosticsContext`),
the checks by subject (:mod:`~model_store.diagnostics.device_checks`: NPU device nodes and
npu-smi; :mod:`~model_store.diagnostics.cann_checks`: CANN's environment, ATC, ATC's
Python; :mod:`~model_store.diagnostics.ge_backend_checks`: the GE backend library;
:mod:`~model_store.diagnostics.triton_checks`: Triton reachable, restricted, loading) and
:mod:`~model_store.diagnostics.checklist` (the order they run in, and the summary). Their
public names are re-exported here.

Example:
    >>> ctx = DiagnosticsContext(env={}, triton_url="127.0.0.1:8000",
    ...                          is_live=lambda: False, is_ready=lambda: False,
    ...                          repository_index=lambda: [])
    >>> checks = run_checks(ctx)
    >>> summary_line(checks)  # doctest: +SKIP
    '9 checks: 1 failing, 8 not applicable'
"""

from __future__ import annotations

from model_store.diagnostics.cann_checks import check_atc, check_atc_python, check_cann_env
from model_store.diagnostics.checklist import CHECKS, CheckFn, run_checks, summarize, summary_line
from model_store.diagnostics.context import (
    COMMAND_TIMEOUT,
    STATES,
    TITLES,
    Check,
    CheckState,
    DiagnosticsContext,
    TritonProtocol,
    run_bounded,
)
from model_store.diagnostics.device_checks import (
    MEMORY_WARN_PCT,
    check_davinci_devices,
    check_npu_smi,
)
from model_store.diagnostics.ge_backend_checks import check_npu_ge_backend
from model_store.diagnostics.triton_checks import (
    check_load_failures,
    check_stuck_loading,
    check_triton_access,
    check_triton_reachable,
)
from model_store.diagnostics.triton_log import (
    GE_ADVICE,
    GE_LOG_PHRASES,
    LOG_TAIL_BYTES,
    classify_ge_message,
    read_log_tail,
)

__all__ = [
    "CHECKS",
    "COMMAND_TIMEOUT",
    "GE_ADVICE",
    "GE_LOG_PHRASES",
    "LOG_TAIL_BYTES",
    "MEMORY_WARN_PCT",
    "STATES",
    "TITLES",
    "Check",
    "CheckFn",
    "CheckState",
    "DiagnosticsContext",
    "TritonProtocol",
    "check_atc",
    "check_atc_python",
    "check_cann_env",
    "check_davinci_devices",
    "check_load_failures",
    "check_npu_ge_backend",
    "check_npu_smi",
    "check_stuck_loading",
    "check_triton_access",
    "check_triton_reachable",
    "classify_ge_message",
    "read_log_tail",
    "run_bounded",
    "run_checks",
    "summarize",
    "summary_line",
]
