"""model_store.serving.facts without a Triton: the evidence parsed, and how often it is asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from model_store.serving import facts
from model_store.store import ModelStore

SAMPLES = Path(__file__).resolve().parents[2] / "fakes" / "npu_smi_samples"


def test_the_evidence_becomes_the_serving_part_of_a_report() -> None:
    raw = {
        "python": "3.10.12",
        "isolated": True,
        "uid": 0,
        "backends": {"npu_ge": "library", "acl": "python", "python": "library"},
        "cann": [
            {
                "home": "/usr/local/Ascend/ascend-toolkit/latest",
                "files": {
                    "version.cfg": "toolkit_running_version=[7.7.0.1.238:8.3.RC2]\n",
                    "compiler/version.info": "Version=7.7.0.1.238\n",
                },
            },
        ],
        "pyacl": {
            "importable": True,
            "init": 0,
            "soc": "Ascend910B4-1",
            "device_count": 8,
            "device_count_ret": 0,
        },
        "npu_smi": {
            "path": "/usr/local/sbin/npu-smi",
            "returncode": 0,
            "stdout": (SAMPLES / "910b4-1_x8_npu-smi-25.2.0.txt").read_text(),
        },
    }
    found = facts.summarise(raw, asked_at=5.0)
    assert found["npu_ge"] is True and found["python_ok"] is True and found["isolated"] is True
    assert found["cann"]["version"] == "8.3.RC2"  # the release, not the inner 7.7
    assert found["pyacl"] == {
        "importable": True, "found_by_search": False, "soc": "Ascend910B4-1",
        "device_count": 8, "working": True, "error": None,
    }  # fmt: skip
    assert len(found["npus"]["chips"]) == 8


def test_an_old_stub_python_and_a_failing_pyacl_are_said() -> None:
    raw = {"python": "3.8.10", "backends": {}, "cann": [],
           "pyacl": {"importable": True, "init": 507033, "error": None}, "npu_smi": {}}  # fmt: skip
    found = facts.summarise(raw, asked_at=0.0)
    assert found["python_ok"] is False and found["npu_ge"] is False
    assert found["pyacl"]["working"] is False and "507033" in found["pyacl"]["error"]
    assert found["cann"]["available"] is False and "no CANN folder" in found["cann"]["reason"]
    assert found["npus"]["available"] is False


def test_the_serving_side_is_asked_again_only_when_the_answer_is_old(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ModelStore(tmp_path / "store")
    answers = iter([{"available": False, "reason": "down", "asked_at": 0.0},
                    {"available": True, "asked_at": 100.0, "npu_ge": True}])  # fmt: skip
    asked: list[float] = []

    def ask(_store: Any, _runtime: Any, now: Any) -> dict[str, Any]:
        asked.append(now())
        return next(answers)

    monkeypatch.setattr(facts, "ask_serving_side", ask)
    time_now = [0.0]

    def remembered() -> dict[str, Any]:
        return facts.remembered_serving_facts(store, None, now=lambda: time_now[0])  # type: ignore[arg-type]

    assert remembered()["available"] is False
    time_now[0] = 30.0  # a failed answer is kept for a minute
    assert remembered()["reason"] == "down"
    time_now[0] = 100.0
    assert remembered()["npu_ge"] is True
    time_now[0] = 650.0  # a good one for ten
    assert remembered()["npu_ge"] is True
    assert asked == [0.0, 100.0]
    assert (store.root / ".serving-facts.json").is_file()


def test_a_failed_npu_ge_load_says_triton_needs_a_restart_until_one_loads(tmp_path: Path) -> None:
    """docs/ge-backend.md#statistics-reload-and-unload: one failed GE initialisation blocks
    every later npu_ge load in that Triton; only a load that works again clears the note."""
    from model_store.serving import restart_needed

    store = ModelStore(tmp_path / "store")
    for name, backend in (("ge", "npu_ge"), ("cpu", "onnxruntime")):
        store.model_dir(name).mkdir(parents=True)
        store.config_path(name).write_text(f'name: "{name}"\nbackend: "{backend}"\n')
    assert restart_needed.note_failed_load(store, "cpu", "no file") is False
    assert restart_needed.needs_restart(store) is None
    assert restart_needed.note_failed_load(store, "ge", "GE init failed", now=5.0) is True
    restart_needed.note_failed_load(store, "ge", "a later one", now=9.0)
    assert restart_needed.needs_restart(store) == {
        "model": "ge",
        "reason": "GE init failed",
        "at": 5.0,
    }
    restart_needed.note_loaded(store, "cpu")
    assert restart_needed.needs_restart(store) is not None
    restart_needed.note_loaded(store, "ge")
    assert restart_needed.needs_restart(store) is None
