"""model_store.cpu_quota: the CPUs a process may use, from fake cgroup files in tmp_path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from model_store import cpu_quota
from model_store.compile.atc import environment


@pytest.fixture
def many_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 64-core host whose affinity mask allows every core."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(64)), raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)


def _write(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


@pytest.mark.usefixtures("many_cores")
@pytest.mark.parametrize(
    ("text", "expected"),
    [("200000 100000", 2), ("150000 100000", 2), ("50000 100000", 1), ("400000", 4)],
)
def test_cgroup_v2_quota_is_rounded_up(tmp_path: Path, text: str, expected: int) -> None:
    _write(tmp_path, "cpu.max", text)
    assert cpu_quota.cgroup_cpu_limit(tmp_path) == expected
    assert cpu_quota.usable_cpus(tmp_path) == expected


@pytest.mark.usefixtures("many_cores")
def test_cgroup_v2_max_is_no_limit(tmp_path: Path) -> None:
    _write(tmp_path, "cpu.max", "max 100000")
    assert cpu_quota.cgroup_cpu_limit(tmp_path) is None
    assert cpu_quota.usable_cpus(tmp_path) == 64


@pytest.mark.usefixtures("many_cores")
@pytest.mark.parametrize("folder", ["cpu", "cpu,cpuacct", ""])
def test_cgroup_v1_quota(tmp_path: Path, folder: str) -> None:
    _write(tmp_path, f"{folder}/cpu.cfs_quota_us".lstrip("/"), "300000")
    _write(tmp_path, f"{folder}/cpu.cfs_period_us".lstrip("/"), "100000")
    assert cpu_quota.cgroup_cpu_limit(tmp_path) == 3
    assert cpu_quota.usable_cpus(tmp_path) == 3


@pytest.mark.usefixtures("many_cores")
def test_cgroup_v1_minus_one_is_no_limit(tmp_path: Path) -> None:
    _write(tmp_path, "cpu/cpu.cfs_quota_us", "-1")
    _write(tmp_path, "cpu/cpu.cfs_period_us", "100000")
    assert cpu_quota.cgroup_cpu_limit(tmp_path) is None
    assert cpu_quota.usable_cpus(tmp_path) == 64


@pytest.mark.usefixtures("many_cores")
@pytest.mark.parametrize("text", ["", "garbage", "abc 100000", "200000 0", "200000 x"])
def test_unparsable_files_mean_no_limit(tmp_path: Path, text: str) -> None:
    _write(tmp_path, "cpu.max", text)
    assert cpu_quota.cgroup_cpu_limit(tmp_path) is None
    assert cpu_quota.usable_cpus(tmp_path) == 64


@pytest.mark.usefixtures("many_cores")
def test_unreadable_or_missing_files_mean_no_limit(tmp_path: Path) -> None:
    assert cpu_quota.cgroup_cpu_limit(tmp_path / "absent") is None
    # A folder where the file should be: reading it fails with an OSError, as an unreadable
    # file does (a permission test would not fail as root).
    (tmp_path / "cpu.max").mkdir()
    assert cpu_quota.cgroup_cpu_limit(tmp_path) is None
    assert cpu_quota.usable_cpus(tmp_path) == 64


def test_the_affinity_mask_wins_when_smaller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2}, raising=False)
    _write(tmp_path, "cpu.max", "800000 100000")
    assert cpu_quota.usable_cpus(tmp_path) == 3
    _write(tmp_path, "cpu.max", "100000 100000")
    assert cpu_quota.usable_cpus(tmp_path) == 1


def test_falls_back_to_cpu_count_when_nothing_can_be_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 12)
    assert cpu_quota.usable_cpus(tmp_path) == 12
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert cpu_quota.usable_cpus(tmp_path) == 1


def test_this_process_gets_at_least_one_cpu() -> None:
    # The real files of the machine running the tests, whatever they say.
    assert 1 <= cpu_quota.usable_cpus() <= (os.cpu_count() or 1)


def test_te_parallel_compiler_follows_the_containers_quota(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 2-CPU container on a 64-core host gets 1 compiler (2 x 0.8), not 32 (64 x 0.8)."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(64)), raising=False)
    _write(tmp_path, "cpu.max", "200000 100000")
    monkeypatch.setattr(environment, "usable_cpus", lambda: cpu_quota.usable_cpus(tmp_path))
    assert environment.parallel_compilers({}) == 1
    _write(tmp_path, "cpu.max", "max 100000")
    assert environment.parallel_compilers({}) == 32
