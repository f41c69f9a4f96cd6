"""The JSON report an operator attaches to a bug: versions, host, SoC, and every stage.

Versions: the hub's, Python's, CANN's (and its ops package), the NPU driver's
(``<ascend root>/driver/version.info``, docs/cann.md#install-layouts), npu-smi's, ATC's Python
and Triton's, as far as the stages reached them. Each stage carries its verdict, summary, next
step, time and evidence (ATC's command line and last lines, top-5 with scores...).
"""

from __future__ import annotations

import platform
import socket
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from model_store.ascend.selftest.context import SelftestContext
from model_store.ascend.selftest.runner import exit_status
from model_store.ascend.selftest.stage import Stage
from model_store.compile.atc.environment import version_in_info_file
from model_store.text import say

#: Bumped when the report's shape changes.
REPORT_FORMAT = 1


def driver_version(ascend_root: Path) -> str | None:
    """``Version=`` of the driver's ``version.info``, or None when there is none."""
    return version_in_info_file(ascend_root / "driver" / "version.info")


def versions(ctx: SelftestContext, hub_version: str) -> dict[str, Any]:
    """Every version the run could read; None where it could not."""
    facts = ctx.facts
    cann = facts.cann
    return {
        "hub": hub_version,
        "python": platform.python_version(),
        "cann": cann.version if cann else None,
        "cann_ops": cann.ops_version if cann else None,
        "driver": driver_version(ctx.ascend_root),
        "npu_smi": (facts.devices or {}).get("version"),
        "atc_python": facts.atc_python.get("version"),
        "triton": facts.triton_version,
    }


def build_report(
    ctx: SelftestContext,
    stages: Sequence[Stage],
    *,
    hub_version: str,
    started_at: datetime,
    seconds: float,
) -> dict[str, Any]:
    """The whole run as JSON-ready data (``exit_status`` included)."""
    facts = ctx.facts
    status = exit_status(stages)
    return {
        "report": "ascend_selftest",
        "format": REPORT_FORMAT,
        "verdict": "passed" if status == 0 else "failed",
        "exit_status": status,
        "started_at": started_at.astimezone(UTC).isoformat(timespec="seconds"),
        "seconds": round(seconds, 3),
        "host": {
            "name": socket.gethostname(),
            "os": platform.platform(),
            "machine": platform.machine(),
            "python_executable": sys.executable,
        },
        "versions": versions(ctx, hub_version),
        "atc_python": facts.atc_python or None,
        "cann": facts.cann.as_dict() if facts.cann else None,
        "soc": {"value": facts.soc, "source": str(facts.soc_source) or None},
        "devices_under_test": facts.device_ids,
        "options": {
            "device": ctx.device,
            "triton_url": ctx.triton_url() or None,
            "backends_dir": str(ctx.backends_dir) if ctx.backends_dir else None,
        },
        "serving_cann": ((facts.serving or {}).get("cann") or {}).get("version"),
        "stages": [stage.to_dict() for stage in stages],
        "by_hand": [str(step) for step in BY_HAND],
    }


#: What a program in the worker cannot check, from the review's first-contact checklist
#: (docs/ascend.md): the operator looks at these on the host and attaches what they print.
BY_HAND = (
    say(
        "On the host: %(stat)s and %(which)s; compare with ASCEND_DRIVER_GID and NPU_SMI_PATH in "
        ".env (deploy/ascend-host-env.sh prints both).",
        stat="`stat -c '%U %G %a' /dev/davinci* /dev/davinci_manager /dev/devmm_svm /dev/hisi_hdc`",
        which="`command -v npu-smi`",
    ),
    say(
        "`docker compose exec -u 10001 worker npu-smi info` and the same in the triton "
        "container: npu-smi as a non-root user in a container is not documented upstream."
    ),
    say(
        "A compile on a worker without the NPU driver (it needs the toolkit's devlib), and "
        "several compiles at once with `top` open (ATC_MAX_PARALLEL_BUILDS, TE_PARALLEL_COMPILER)."
    ),
    say(
        "After the npu_ge stage: Triton's log (ASCEND_SLOG_PRINT_TO_STDOUT=1) for GE's messages, "
        "and npu-smi's memory use, which GE does not give back until Triton restarts."
    ),
)
