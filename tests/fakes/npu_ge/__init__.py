"""The npu_ge stand-in: a Python-based Triton backend (``model.py``), installed by copying it
into ``<backend-directory>/npu_ge/`` beside the hub's ``onnxruntime`` backend."""

from pathlib import Path

#: The file to copy as ``<backend-directory>/npu_ge/model.py``.
STANDIN = Path(__file__).resolve().parent / "model.py"
