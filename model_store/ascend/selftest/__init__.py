"""The Ascend self-test an operator runs on a freshly installed host (Django-free).

``python manage.py ascend_selftest`` (webapp/ops/management/commands/ascend_selftest.py)
gathers the hub's settings into a :class:`SelftestContext` and calls :func:`run_selftest`;
docs/selftest.md says what each stage checks and what to do when it fails.

The stages, each proving one link of the chain with the product's own code:
CANN and ATC (:mod:`~model_store.ascend.selftest.toolchain`), the NPUs and their SoC
(:mod:`~model_store.ascend.selftest.hardware`), ATC compiling the bundled demo model
(:mod:`~model_store.ascend.selftest.build`), pyACL running it on each NPU
(:mod:`~model_store.ascend.selftest.npu_run`), Triton serving it through ``acl`` and, where
installed, ``npu_ge``, under temporary names (:mod:`~model_store.ascend.selftest.serving`).
:mod:`~model_store.ascend.selftest.runner` orders them and skips what a failure makes
pointless; :mod:`~model_store.ascend.selftest.report` makes the JSON report and
:mod:`~model_store.ascend.selftest.console` the console lines.

NOT RUN ON ASCEND HARDWARE: tested against the fakes in tests/fakes
(docs/cann.md#what-has-run-on-ascend-hardware).
"""

from __future__ import annotations

from model_store.ascend.selftest.console import result_line, stage_lines
from model_store.ascend.selftest.context import (
    DEFAULT_LOAD_TIMEOUT_S,
    Facts,
    InvalidDevice,
    SelftestContext,
)
from model_store.ascend.selftest.demo import EXPECTED_LABEL, Classification, DemoAssets
from model_store.ascend.selftest.report import build_report
from model_store.ascend.selftest.runner import STAGES, exit_status, run_selftest
from model_store.ascend.selftest.stage import Outcome, Stage, StageSpec, Verdict

__all__ = [
    "DEFAULT_LOAD_TIMEOUT_S",
    "EXPECTED_LABEL",
    "STAGES",
    "Classification",
    "DemoAssets",
    "Facts",
    "InvalidDevice",
    "Outcome",
    "SelftestContext",
    "Stage",
    "StageSpec",
    "Verdict",
    "build_report",
    "exit_status",
    "result_line",
    "run_selftest",
    "stage_lines",
]
