"""The fake ATC's ``--out_nodes``: node names give ``<op>:<index>`` output names, ONNX output
names keep the three-part form, both together are refused (aclmdlGetOutputNameByIndex.md)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from model_store import spawn
from tests.fakes.acl._fake import read_fake_om
from tests.fakes.toolkit import make_fake_toolkit
from tests.fixtures.triton import mlp_onnx_bytes


def _build(tmp_path: Path, out_nodes: str) -> subprocess.CompletedProcess[str]:
    home = Path(make_fake_toolkit(tmp_path / "Ascend")["ASCEND_TOOLKIT_HOME"])
    model = tmp_path / "mlp.onnx"
    model.write_bytes(mlp_onnx_bytes())  # MatMul, Add, Relu (unnamed: Relu_2) -> y
    return spawn.run(
        [str(home / "bin" / "atc"), f"--model={model}", "--framework=5",
         f"--output={tmp_path / 'm'}", "--soc_version=Ascend310P3", "--input_shape=x:2,4",
         f"--out_nodes={out_nodes}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(("out_nodes", "name"), [("Relu_2:0", "Relu_2:0"), ("y", "Relu_2:0:y")])
def test_the_om_names_its_outputs_as_the_flag_asks(
    tmp_path: Path, out_nodes: str, name: str
) -> None:
    result = _build(tmp_path, out_nodes)
    assert result.returncode == 0, result.stdout + result.stderr
    loaded = read_fake_om(str(tmp_path / "m.om"))
    assert not isinstance(loaded, int)
    header, _ = loaded
    assert [(o["name"], o["onnx_name"]) for o in header["outputs"]] == [(name, "y")]


@pytest.mark.parametrize(
    ("out_nodes", "reason"),
    [("Relu_2:0;y", "not both"), ("Relu_9:0", "is not in the model"), ("pre", "not an output")],
)
def test_bad_out_nodes_fail_with_e10001(tmp_path: Path, out_nodes: str, reason: str) -> None:
    result = _build(tmp_path, out_nodes)
    assert result.returncode == 1
    assert "E10001" in result.stderr and reason in result.stderr, result.stderr
