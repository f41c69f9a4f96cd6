"""A FAKE ``npu_ge`` backend for Triton (tests only): not CANN's GE backend.

Installed as ``<backend-directory>/npu_ge/model.py``, it makes Triton load models whose config
says ``backend: "npu_ge"`` as a Python-based backend, and behaves at that boundary as the real
one does where the hub depends on it (docs/ge-backend.md, the pinned GE backend source):

* **The model file**: the first ``.onnx`` found anywhere in the model's directory, whatever the
  version folders say (``How the model file is found``); it runs on the CPU with ONNX Runtime,
  through the hub's own ``onnxruntime`` backend beside it in the backend directory.
* **Initialisation in turns, and the wedge**: the real backend initialises every ``npu_ge``
  model of one Triton process in turn, and a load that fails never passes its turn on, so every
  later ``npu_ge`` load in that Triton waits for ever (``Statistics, reload and unload``). Here
  a model that GE could not compile (one with a node of type ``NotOnAscend``, the fake ATC's
  marker for an operator without an Ascend kernel, or any model while ``FAKE_NPU_GE_FAIL=1``)
  fails its load and leaves a note for that Triton process; every later ``npu_ge`` load in the
  same Triton then sleeps in a loop, as upstream's ``sleep(1)``, until Triton is restarted.
* Statistics are Triton's Python backend's own (the real backend reports none); the stand-in
  says nothing about speed or NPU memory.
"""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

#: The marker node type (tests/fakes/atc uses the same one for EZ3003).
NOT_ON_ASCEND = "NotOnAscend"


def _tritonserver_pid() -> int:
    """The Triton process the stub serves: the note is per Triton, as upstream's statics are."""
    return os.getppid()


def _note_path() -> Path:
    folder = Path(os.environ.get("FAKE_NPU_GE_STATE_DIR") or tempfile.gettempdir())
    return folder / f"fake-npu-ge-{_tritonserver_pid()}.json"


def _onnxruntime_backend() -> Any:
    """The hub's onnxruntime backend beside this one, which runs the ONNX file."""
    path = Path(__file__).resolve().parent.parent / "onnxruntime" / "model.py"
    spec = importlib.util.spec_from_file_location("_npu_ge_runs_onnx", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _first_onnx(model_dir: Path) -> Path:
    found = sorted(model_dir.rglob("*.onnx"))
    if not found:
        raise RuntimeError(f"npu_ge: no .onnx file under {model_dir}")
    return found[0]


def _cannot_compile(path: Path) -> bool:
    if os.environ.get("FAKE_NPU_GE_FAIL") == "1":
        return True
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return any(node.op_type == NOT_ON_ASCEND for node in graph.node)


_BASE = _onnxruntime_backend().TritonPythonModel


class TritonPythonModel(_BASE):  # type: ignore[misc, valid-type]
    def initialize(self, args: dict[str, str]) -> None:
        note = _note_path()
        while note.exists():  # a load failed before in this Triton: its turn never comes
            time.sleep(1)
        model_dir = Path(args["model_repository"])
        path = _first_onnx(model_dir)
        if _cannot_compile(path):
            note.write_text(json.dumps({"model": model_dir.name, "at": time.time()}))
            raise RuntimeError(
                f"npu_ge (fake): GE could not compile {path.name}: EZ3003 no supported Ops "
                "kernel and engine for an operator; later npu_ge loads in this Triton wait"
            )
        config = json.loads(args["model_config"])
        config["default_model_filename"] = path.name
        super().initialize(
            {
                **args,
                "model_config": json.dumps(config),
                "model_repository": str(path.parent.parent),
                "model_version": path.parent.name,
            }
        )
