"""How many CPUs this process may really use, in a container as on a bare host.

``os.cpu_count()`` is the host's core count: a container limited to two CPUs on a 192-core
server still sees 192, and sizing worker pools from it over-subscribes the quota (the kernel
then throttles the whole container for the rest of each period). The usable count is the
smaller of two limits (docs/atc.md#options):

- the CPU affinity mask, ``os.sched_getaffinity(0)`` (``docker run --cpuset-cpus``,
  ``taskset``);
- the CFS bandwidth quota of the process's cgroup (``docker run --cpus``, compose ``cpus:``),
  quota / period rounded up: cgroup v2's ``cpu.max`` ("``$MAX $PERIOD``", ``max`` for no
  limit; the kernel's ``Documentation/admin-guide/cgroup-v2.rst``) or cgroup v1's
  ``cpu.cfs_quota_us`` and ``cpu.cfs_period_us`` (quota ``-1`` for no limit; the kernel's
  ``Documentation/scheduler/sched-bwc.rst``).

Only the files at the cgroup root are read, which is where a container sees its own cgroup
(Docker's default private cgroup namespace on v2, the bind mount of its own hierarchy on v1).
A file that is missing or unreadable means no limit from it. Standard library only.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

#: Where cgroupfs is mounted; tests pass a folder of fake files instead.
CGROUP_ROOT = Path("/sys/fs/cgroup")


def usable_cpus(cgroup_root: Path = CGROUP_ROOT) -> int:
    """The CPUs this process may use: the least of its affinity mask and its cgroup's CPU
    quota (rounded up), at least 1; ``os.cpu_count()`` where neither can be read."""
    limits = [n for n in (_affinity(), cgroup_cpu_limit(cgroup_root)) if n is not None]
    if not limits:
        return os.cpu_count() or 1
    return max(1, min(limits))


def cgroup_cpu_limit(cgroup_root: Path = CGROUP_ROOT) -> int | None:
    """The CPU quota of the cgroup at ``cgroup_root`` in whole CPUs (rounded up, at least 1),
    or None when there is none or it cannot be read. cgroup v2 first, then v1."""
    v2 = _read(cgroup_root / "cpu.max")
    if v2 is not None:
        fields = v2.split()
        if not fields or fields[0] == "max":
            return None
        period = _number(fields[1]) if len(fields) > 1 else 100_000
        return _cpus(_number(fields[0]), period)
    # v1: the cpu controller is mounted as cpu,cpuacct (and linked as cpu) on most hosts.
    for folder in ("cpu", "cpu,cpuacct", "cpuacct,cpu", ""):
        base = cgroup_root / folder if folder else cgroup_root
        quota = _read(base / "cpu.cfs_quota_us")
        if quota is None:
            continue
        return _cpus(_number(quota), _number(_read(base / "cpu.cfs_period_us") or ""))
    return None


def _cpus(quota: int | None, period: int | None) -> int | None:
    if quota is None or period is None or quota <= 0 or period <= 0:
        return None  # -1 (v1's "no limit") or a value we cannot read
    return max(1, math.ceil(quota / period))


def _affinity() -> int | None:
    getaffinity = getattr(os, "sched_getaffinity", None)
    if getaffinity is None:  # not on Linux
        return None
    try:
        return len(getaffinity(0)) or None
    except OSError:
        return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _number(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None
