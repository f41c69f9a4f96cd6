"""One container owns the NPU: ``WORKER_NPU``, and what the worker does instead of opening it.

The worker of the Ascend compose files runs with ``WORKER_NPU=off``: its host report takes the
NPUs from npu-smi inside the Triton container (the facts probe), and an OM it cannot run goes to
a trial in Triton (``not_run`` with the reason, which the verify step turns into a trial).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from model_store.ascend.npu_owner import (
    worker_npu_mode,
    worker_runs_npu_smi,
    worker_runs_pyacl,
)
from model_store.host_report import build_host_report
from model_store.serving import facts
from model_store.text import from_json, say
from model_store.verify import _om_runner

SAMPLES = Path(__file__).resolve().parents[2] / "fakes" / "npu_smi_samples"


@pytest.mark.parametrize(
    ("value", "mode"),
    [("", "on"), ("on", "on"), ("1", "on"), ("OFF", "off"), ("no", "off"),
     (" shared ", "shared"), ("sometimes", "off")],
)  # fmt: skip
def test_the_setting_reads_leniently_and_an_unknown_value_leaves_the_npu_alone(
    value: str, mode: str
) -> None:
    assert worker_npu_mode({"WORKER_NPU": value}) == mode
    assert worker_npu_mode({}) == "on"  # make run: one host, one PID namespace


def test_shared_runs_pyacl_but_leaves_npu_smi_to_triton() -> None:
    """npu-smi in a container is supported for root only; the worker is uid 10001."""
    shared = {"WORKER_NPU": "shared"}
    assert worker_runs_pyacl(shared) and not worker_runs_npu_smi(shared)
    off = {"WORKER_NPU": "off"}
    assert not worker_runs_pyacl(off) and not worker_runs_npu_smi(off)


def test_with_the_npu_left_to_triton_an_om_is_not_run_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WORKER_NPU", "off")
    runner, why = _om_runner(None)
    assert runner is None and "WORKER_NPU=off" in str(why) and "Triton" in str(why)


def _serving(table: str, mapping: str | None = None) -> dict[str, Any]:
    smi: dict[str, Any] = {
        "path": "/usr/local/bin/npu-smi",
        "returncode": 0,
        "stdout": (SAMPLES / table).read_text(),
    }
    if mapping is not None:
        smi["mapping"] = {"returncode": 0, "stdout": mapping}
    raw = {"python": "3.10.12", "backends": {"acl": "python"}, "cann": [], "npu_smi": smi,
           "pyacl": {"importable": True, "init": 0, "soc": "Ascend310P3", "device_count": 2,
                     "device_count_ret": 0},
           "device_nodes": [{"path": "/dev/davinci0", "openable": True},
                            {"path": "/dev/davinci_manager", "openable": True}]}  # fmt: skip
    return facts.summarise(raw, asked_at=1.0)


def test_the_host_report_takes_the_npus_from_inside_triton() -> None:
    """The worker's own npu-smi is never run; the chips are the ones the Triton container saw."""

    def never() -> dict[str, Any]:
        raise AssertionError("the worker ran npu-smi itself")

    serving = _serving("310p3_duo_npu-smi-25.2.0.txt")
    report = build_host_report(
        {"PATH": "/nonexistent", "WORKER_NPU": "off"}, devices=never, serving=lambda: serving
    )
    devices = report["devices"]
    assert devices["seen_in"] == "triton" and devices["available"]
    assert [c["name"] for c in devices["npus"]] == ["310P3", "310P3"]
    assert report["serving"]["available"]


def test_a_silent_triton_leaves_no_npus_and_says_why() -> None:
    silent = facts.unavailable(say("The Triton that serves is not live."), 1.0)
    report = build_host_report(
        {"PATH": "/nonexistent", "WORKER_NPU": "off"},
        devices=lambda: {"available": True, "npus": [{"name": "wrong"}]},
        serving=lambda: silent,
    )
    assert report["devices"]["npus"] == [] and report["devices"]["seen_in"] == "triton"
    reason = str(from_json(report["devices"]["reason"]))
    assert "WORKER_NPU=off" in reason and "not live" in reason


def test_pyacls_count_is_compared_with_the_nodes_mapped_into_triton() -> None:
    """The hub's device ids are pyACL's inside Triton's container; two chips counted but one
    /dev/davinciN mapped is worth a note (review point C7)."""
    numbering = _serving("310p3_duo_npu-smi-25.2.0.txt")["numbering"]
    assert numbering == {"nodes": ["/dev/davinci0"], "pyacl_count": 2, "agree": False}


def test_a_worker_without_device_nodes_by_design_is_not_a_failing_check() -> None:
    """The worker of the compose layouts maps no node; its NPU table came from Triton."""
    serving = _serving("310p3_duo_npu-smi-25.2.0.txt")
    report = build_host_report(
        {"PATH": "/nonexistent", "WORKER_NPU": "off"}, devices=dict, serving=lambda: serving
    )
    check = next(c for c in report["diagnostics"] if c["id"] == "davinci_devices")
    assert check["state"] == "not_applicable", check


def test_the_npus_seen_in_triton_are_at_most_a_minute_old() -> None:
    """The serving side's answer is kept SERVING_FACTS_SECONDS (600 s); where it also carries
    the host's npu-smi table, a minute at most."""
    assert facts.ask_every_s({"WORKER_NPU": "off"}, 600.0) == facts.DEVICES_EVERY_S == 60.0
    assert facts.ask_every_s({"WORKER_NPU": "off"}, 20.0) == 20.0
    assert facts.ask_every_s({}, 600.0) == 600.0


def test_a_virtual_npus_node_counts_as_a_chips_node() -> None:
    """A vNPU's /dev/vdavinciN (where no runtime renamed it) is a chip's node, as davinciN."""
    nodes = [{"path": "/dev/vdavinci100"}, {"path": "/dev/davinci_manager"}]
    raw = {"pyacl": {"device_count": 1, "device_count_ret": 0}, "device_nodes": nodes}
    assert facts.device_numbering(raw) == {
        "nodes": ["/dev/vdavinci100"], "pyacl_count": 1, "agree": True,
    }  # fmt: skip
