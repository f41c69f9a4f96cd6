"""Verification says where the artifact ran, and "not run" (never "failed") when it cannot run.

Finding 8 of "Ascend on first contact": a worker with pyACL but no NPU (or none at all) must
not block publishing with a failure the OM did not cause.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from model_store.ascend.om_runner import NpuUnavailable, run_om
from model_store.verify import VIA_TRITON, ArtifactNotRunnable, verify, verify_with
from tests.unit.targets import models


@pytest.fixture
def mlp_path(tmp_path: Path) -> Path:
    return models.save(models.mlp(), tmp_path / "mlp.onnx")


def _cpu(path: Path):  # -> callable running the model on the CPU
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return lambda feed: dict(zip(names, session.run(None, feed), strict=True))


def test_pyacl_without_an_npu_is_not_run(
    mlp_path: Path, fake_acl: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FAKE_ACL_DEVICE_COUNT", "0")
    om = tmp_path / "model.om"
    om.write_bytes(b"an OM the fake never gets to read")
    with pytest.raises(NpuUnavailable, match=r"acl.rt.set_device\(0\)"):
        run_om(om, {"x": np.zeros((1, 16), np.float32)})

    report = verify(mlp_path, om, "om", precision="fp16")

    assert report.status == "not_run", report.reason
    assert "not executed on this worker" in report.reason and "set_device" in report.reason
    assert report.to_dict()["via"] == ""


def test_a_runner_that_cannot_run_here_is_not_run(mlp_path: Path) -> None:
    def nowhere(_sample: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        raise ArtifactNotRunnable("the serving Triton has no acl backend either")

    report = verify_with(mlp_path, nowhere, precision="fp16", via=VIA_TRITON)
    assert (report.status, report.reason) == (
        "not_run",
        "the serving Triton has no acl backend either",
    )


def test_another_runner_gets_the_same_inputs_and_rules(mlp_path: Path) -> None:
    run = _cpu(mlp_path)
    seen: list[dict[str, np.ndarray]] = []

    def through(sample: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        seen.append(sample)
        return run(sample)

    direct = verify(mlp_path, mlp_path, "onnx", precision="fp32", batch=2)
    report = verify_with(mlp_path, through, precision="fp32", via=VIA_TRITON, batch=2)
    assert (report.status, report.via, report.samples_used) == ("passed", "triton", 4)
    assert direct.via == "worker_cpu" and direct.samples_used == 4

    def off(sample: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {k: v + 1.0 for k, v in run(sample).items()}

    report = verify_with(mlp_path, off, precision="fp32", via=VIA_TRITON, batch=2)
    assert report.status == "failed" and report.via == "triton"
