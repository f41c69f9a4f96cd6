"""What one host can do, as seen on that host: its NPUs and which targets can build there.

The report is made by a worker on the host that has the hardware (never by the web process,
which in a compose deployment runs in a container without NPUs or CANN) and stored by the hub
with its time; pages and the API show the stored report and its age. It is plain JSON, made
without Django, so that a node's worker without database access can make it too
(docs/nodes.md#the-probe-report-first-piece).

Example:
    >>> report = build_host_report(dict(os.environ))
    >>> sorted(report)
    ['devices', 'host', 'made_at', 'protocol', 'targets']
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

from model_store.devices import read_devices
from model_store.targets import all_targets

#: Bumped when the report's shape changes in a way an older hub cannot read.
PROTOCOL = 1


def build_host_report(
    env: Mapping[str, str],
    *,
    devices: Callable[[], dict[str, Any]] = read_devices,
    now: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """Probe this host: ``npu-smi`` (docs/npu-smi.md) and each target's toolchain.

    Args:
        env: The environment the host's workers build with (CANN is found through it).
        devices: Reads the NPUs (:func:`model_store.devices.read_devices`).
        now: The clock, for the report's time.

    Returns:
        ``{"protocol", "host", "made_at", "devices", "targets"}``; ``targets`` maps each
        target's name to ``{"available": bool, "reason": str}``.
    """
    targets = {}
    for target in all_targets():
        status = target.status(env)
        targets[target.name] = {"available": status.available, "reason": status.reason}
    return {
        "protocol": PROTOCOL,
        "host": socket.gethostname(),
        "made_at": now(),
        "devices": devices(),
        "targets": targets,
    }
