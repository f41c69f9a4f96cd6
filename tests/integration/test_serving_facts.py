"""The serving side asked from inside a real Triton (model_store.serving.facts).

A real embedded Triton runs the facts probe in its Python backend. Once bare (a CPU host: no
CANN, no pyACL, no npu-smi, no npu_ge), once with the CANN stand-ins in *Triton's*
environment only, of another version than any worker's and on a host of eight 910B4-1: what
comes back is what Triton's side has, and nothing stays loaded or on disk.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from model_store.serving.facts import ask_serving_side
from model_store.store import ModelStore
from tests.fakes.toolkit import make_fake_toolkit
from tests.fixtures.triton import started_triton

pytestmark = pytest.mark.integration


def _ask(tmp_path: Path, env: dict[str, str] | None = None) -> tuple[dict, list, list]:  # type: ignore[type-arg]
    store = ModelStore(tmp_path / "store")
    with started_triton(tmp_path / "triton", store.repository_dir, env=env or {}) as triton:
        runtime = triton.runtime()
        try:
            facts = ask_serving_side(store, runtime, timeout_s=60)
            index = runtime.repository_index()
        finally:
            runtime.close()
    left = sorted(p.name for p in store.repository_dir.iterdir())
    return facts, index, left


def test_a_bare_triton_says_it_has_no_cann_no_pyacl_and_no_npu_ge(tmp_path: Path) -> None:
    facts, index, left = _ask(tmp_path, {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"})
    assert facts["available"] is True, facts
    assert facts["backends"]["python"] == "library"
    assert facts["backends"]["onnxruntime"] == "python"  # ours, Python-based
    assert facts["npu_ge"] is False
    assert facts["cann"]["available"] is False and facts["cann"]["version"] is None
    assert facts["pyacl"]["importable"] is False
    assert facts["npus"]["available"] is False
    assert facts["python"].startswith(f"{sys.version_info.major}.{sys.version_info.minor}")
    assert facts["python_ok"] is True
    assert index == [] and left == []  # the probe unloaded and removed


def test_the_cann_beside_triton_is_reported_not_the_workers(tmp_path: Path) -> None:
    serving = make_fake_toolkit(tmp_path / "serving-Ascend", layout="cann", version="8.3.RC2")
    home = Path(serving["ASCEND_TOOLKIT_HOME"])
    env = {
        "ASCEND_TOOLKIT_HOME": home.as_posix(),
        "PYTHONPATH": (home / "python" / "site-packages").as_posix(),
        "PATH": f"{Path(sys.executable).parent}:{serving['PATH']}",
        "FAKE_NPU_SMI_SAMPLE": "910b4-1_x8_npu-smi-25.2.0.txt",
    }
    # The test process itself (the "worker") has another CANN, or none: never asked.
    assert os.environ.get("ASCEND_TOOLKIT_HOME") != env["ASCEND_TOOLKIT_HOME"]
    facts, index, left = _ask(tmp_path, env)
    assert facts["available"] is True, facts
    assert facts["cann"] == {
        "available": True, "version": "8.3.RC2", "parsed": True, "home": home.as_posix(),
    }  # fmt: skip
    assert facts["pyacl"]["importable"] and facts["pyacl"]["working"], facts["pyacl"]["error"]
    assert facts["pyacl"]["soc"] == "Ascend910B4-1"
    # The stub ignores PYTHONPATH (docs/ascend.md#the-serving-side): pyACL was found by the
    # same search the acl backend makes, in the toolkit home.
    assert facts["isolated"] is True and facts["pyacl"]["found_by_search"] is True
    assert facts["pyacl"]["device_count"] == 8
    chips = facts["npus"]["chips"]
    assert [c["name"] for c in chips] == ["910B4-1"] * 8
    assert index == [] and left == []
