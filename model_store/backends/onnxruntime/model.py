"""Python-based Triton backend named ``onnxruntime``: serves ``model.onnx`` with ONNX Runtime (CPU).

Triton loads this file from ``<backend-directory>/onnxruntime/model.py`` for every
model whose config says ``backend: "onnxruntime"`` (Python-based backends, see
docs/triton.md#python-based-backends). The point is that the very same ``config.pbtxt`` runs on
an NGC Triton image with the real C++ onnxruntime backend, so this file only
reads config fields that backend understands too: ``max_batch_size``,
``input``/``output``, ``default_model_filename`` and the ``parameters``
``intra_op_thread_count`` / ``inter_op_thread_count``.

Requests arrive in groups (dynamic batching). When the model batches
(``max_batch_size > 0``) requests with the same non-batch shapes are
concatenated along axis 0, run once, and the outputs are split back. A request
that is malformed gets its own error response; the others in the group still
succeed.

Triton provides ``triton_python_backend_utils`` inside the stub process only,
so it is imported lazily: the module stays importable (and testable) without
Triton.

Why one file: Triton's Python backend stub imports this ``model.py`` by path,
alone, in its own process, where the rest of ``model_store`` is not on the
import path. It must stay self-contained (numpy, onnx, onnxruntime,
triton_python_backend_utils and the standard library only), so it is never
split into modules.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

try:  # provided by the Python backend stub at run time
    import triton_python_backend_utils as pb_utils
except ImportError:  # pragma: no cover - outside Triton
    pb_utils = None

#: Triton config data types -> numpy.
TRITON_TO_NUMPY: dict[str, Any] = {
    "TYPE_BOOL": np.bool_,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}

#: ONNX Runtime type strings -> Triton config data types.
ONNX_TO_TRITON: dict[str, str] = {
    "tensor(bool)": "TYPE_BOOL",
    "tensor(uint8)": "TYPE_UINT8",
    "tensor(uint16)": "TYPE_UINT16",
    "tensor(uint32)": "TYPE_UINT32",
    "tensor(uint64)": "TYPE_UINT64",
    "tensor(int8)": "TYPE_INT8",
    "tensor(int16)": "TYPE_INT16",
    "tensor(int32)": "TYPE_INT32",
    "tensor(int64)": "TYPE_INT64",
    "tensor(float16)": "TYPE_FP16",
    "tensor(float)": "TYPE_FP32",
    "tensor(double)": "TYPE_FP64",
    "tensor(string)": "TYPE_STRING",
}

#: ONNX TensorProto element types -> Triton config data types (for auto-complete).
_ONNX_ELEM_TO_TRITON: dict[int, str] = {
    1: "TYPE_FP32",
    2: "TYPE_UINT8",
    3: "TYPE_INT8",
    4: "TYPE_UINT16",
    5: "TYPE_INT16",
    6: "TYPE_INT32",
    7: "TYPE_INT64",
    8: "TYPE_STRING",
    9: "TYPE_BOOL",
    10: "TYPE_FP16",
    11: "TYPE_FP64",
    12: "TYPE_UINT32",
    13: "TYPE_UINT64",
}

DEFAULT_MODEL_FILENAME = "model.onnx"
DEFAULT_INTRA_OP_THREADS = 1


class RequestError(ValueError):
    """A request that this model cannot run; becomes that request's error response."""


class TensorSpec:
    """One input or output of the model as the config declares it."""

    def __init__(self, entry: dict[str, Any], batched: bool) -> None:
        self.name: str = entry["name"]
        self.data_type: str = entry.get("data_type", "TYPE_FP32")
        if self.data_type not in TRITON_TO_NUMPY:
            raise ValueError(f"tensor '{self.name}': data type {self.data_type} is not supported")
        self.dtype = np.dtype(TRITON_TO_NUMPY[self.data_type])
        self.dims: list[int] = [int(d) for d in entry.get("dims", [])]
        self.batched = batched

    def expected_shape(self) -> str:
        dims = (["batch"] if self.batched else []) + ["?" if d < 0 else str(d) for d in self.dims]
        return "[" + ", ".join(dims) + "]"

    def check(self, array: np.ndarray, max_batch_size: int) -> None:
        """Raise ``RequestError`` if ``array`` does not fit this spec."""
        if array.dtype != self.dtype and not (
            self.dtype == np.object_ and array.dtype.kind in "OSU"
        ):
            raise RequestError(
                f"input '{self.name}': data type {array.dtype} does not match "
                f"{self.data_type} ({self.dtype}) in the model config"
            )
        shape = list(array.shape)
        if self.batched:
            if not shape:
                raise RequestError(f"input '{self.name}': a batch dimension is required")
            if shape[0] > max_batch_size:
                raise RequestError(
                    f"input '{self.name}': batch size {shape[0]} exceeds "
                    f"max_batch_size {max_batch_size}"
                )
            shape = shape[1:]
        if len(shape) != len(self.dims) or any(
            want >= 0 and got != want for got, want in zip(shape, self.dims, strict=True)
        ):
            raise RequestError(
                f"input '{self.name}': shape {list(array.shape)} does not match "
                f"{self.expected_shape()} in the model config"
            )


def _parameter(config: dict[str, Any], key: str, default: str = "") -> str:
    value = config.get("parameters", {}).get(key)
    if isinstance(value, dict):
        return str(value.get("string_value", default))
    return default if value is None else str(value)


def _thread_count(config: dict[str, Any], key: str, default: int) -> int:
    raw = _parameter(config, key, "")
    if not raw:
        return default
    try:
        count = int(raw)
    except ValueError as exc:
        raise ValueError(f"parameter {key} must be an integer, got {raw!r}") from exc
    if count < 0:
        raise ValueError(f"parameter {key} must not be negative, got {count}")
    return count


def _to_onnx_input(array: np.ndarray) -> np.ndarray:
    """Triton hands BYTES tensors over as object arrays of ``bytes``; ORT wants ``str``."""
    if array.dtype == np.object_ or array.dtype.kind == "S":
        flat = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in array.ravel()]
        return np.array(flat, dtype=np.object_).reshape(array.shape)
    return array


class TritonPythonModel:
    """The backend's model class; Triton makes one per model instance."""

    @staticmethod
    def auto_complete_config(auto_complete_model_config: Any) -> Any:
        """Fill ``input``/``output`` from the ONNX file when the config lists none.

        Triton does not pass the model's location to ``auto_complete_config``.
        The stub process it starts for this step does get it as its first
        argument (``<model dir>/<version>/model.py``, seen with Triton 2.51), so
        the ONNX file is looked for next to that path. If that ever fails the
        config is returned unchanged and the load then reports the missing
        inputs/outputs; our config writer always lists them anyway.
        """
        config = auto_complete_model_config.as_dict()
        if config.get("input") and config.get("output"):
            return auto_complete_model_config
        path = _model_file_from_stub_argv(config)
        if path is None:
            return auto_complete_model_config
        import onnx

        try:
            graph = onnx.load(str(path), load_external_data=False).graph
        except Exception:
            # A broken file is reported precisely by initialize(); stay quiet here.
            return auto_complete_model_config
        initializers = {i.name for i in graph.initializer}
        batched = int(config.get("max_batch_size", 0)) > 0
        for kind, values in (("input", graph.input), ("output", graph.output)):
            if config.get(kind):
                continue
            for value in values:
                if value.name in initializers:
                    continue
                tensor_type = value.type.tensor_type
                dims = [
                    d.dim_value if d.HasField("dim_value") else -1 for d in tensor_type.shape.dim
                ]
                if batched and dims:
                    dims = dims[1:]
                entry = {
                    "name": value.name,
                    "data_type": _ONNX_ELEM_TO_TRITON.get(tensor_type.elem_type, "TYPE_FP32"),
                    "dims": dims,
                }
                if kind == "input":
                    auto_complete_model_config.add_input(entry)
                else:
                    auto_complete_model_config.add_output(entry)
        return auto_complete_model_config

    def initialize(self, args: dict[str, str]) -> None:
        import onnxruntime as ort

        self.config: dict[str, Any] = json.loads(args["model_config"])
        self.model_name: str = self.config.get("name", args.get("model_name", "?"))
        self.max_batch_size = int(self.config.get("max_batch_size", 0))
        batched = self.max_batch_size > 0
        self.inputs = [TensorSpec(e, batched) for e in self.config.get("input", [])]
        self.outputs = [TensorSpec(e, batched) for e in self.config.get("output", [])]

        # For Python-based backends ``model_repository`` is the model's own
        # directory (<repo>/<name>), not the repository root.
        path = (
            Path(args["model_repository"])
            / str(args["model_version"])
            / _model_filename(self.config)
        )
        if not path.is_file():
            raise FileNotFoundError(f"model file {path} not found")

        options = ort.SessionOptions()
        options.intra_op_num_threads = _thread_count(
            self.config, "intra_op_thread_count", DEFAULT_INTRA_OP_THREADS
        )
        options.inter_op_num_threads = _thread_count(self.config, "inter_op_thread_count", 1)
        # Several Triton instances and models share a few cores: spinning
        # threads would burn CPU between requests.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            self.session = ort.InferenceSession(
                str(path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise RuntimeError(f"onnxruntime could not load {path}: {exc}") from exc
        self._check_signature()

    def _check_signature(self) -> None:
        """Fail the load (not the first request) when config and ONNX file disagree."""
        onnx_inputs = {i.name: i for i in self.session.get_inputs()}
        onnx_outputs = {o.name: o for o in self.session.get_outputs()}
        if not self.outputs:
            raise ValueError("the model config declares no outputs")
        config_inputs = {spec.name for spec in self.inputs}
        for spec in self.inputs:
            if spec.name not in onnx_inputs:
                raise ValueError(
                    f"config input '{spec.name}' is not an input of the ONNX model "
                    f"(it has {sorted(onnx_inputs)})"
                )
            self._check_type(spec, onnx_inputs[spec.name].type, "input")
        missing = sorted(set(onnx_inputs) - config_inputs)
        if missing:
            raise ValueError(f"the model config does not declare ONNX input(s) {missing}")
        for spec in self.outputs:
            if spec.name not in onnx_outputs:
                raise ValueError(
                    f"config output '{spec.name}' is not an output of the ONNX model "
                    f"(it has {sorted(onnx_outputs)})"
                )
            self._check_type(spec, onnx_outputs[spec.name].type, "output")

    @staticmethod
    def _check_type(spec: TensorSpec, onnx_type: str, kind: str) -> None:
        expected = ONNX_TO_TRITON.get(onnx_type)
        if expected is not None and expected != spec.data_type:
            raise ValueError(
                f"config {kind} '{spec.name}' is {spec.data_type} "
                f"but the ONNX model has {onnx_type}"
            )

    # ----------------------------------------------------------------- execution

    def execute(self, requests: list[Any]) -> list[Any]:
        responses: list[Any] = [None] * len(requests)
        batching = self.max_batch_size > 0
        groups: dict[tuple[object, ...], list[tuple[int, dict[str, np.ndarray], list[str]]]] = {}
        for index, request in enumerate(requests):
            try:
                feeds = self._read_inputs(request)
                wanted = self._requested_outputs(request)
            except RequestError as exc:
                responses[index] = self._error(str(exc))
                continue
            # Only requests with identical non-batch shapes can share one run
            # (the batcher normally guarantees it; variable dims make it explicit).
            shapes = tuple(
                (name, arr.shape[1:] if batching else arr.shape)
                for name, arr in sorted(feeds.items())
            )
            # Without batching every request runs on its own.
            key: tuple[object, ...] = shapes if batching else (index, shapes)
            groups.setdefault(key, []).append((index, feeds, wanted))

        for members in groups.values():
            self._run_group(members, responses)
        return responses

    def _read_inputs(self, request: Any) -> dict[str, np.ndarray]:
        feeds: dict[str, np.ndarray] = {}
        for spec in self.inputs:
            tensor = pb_utils.get_input_tensor_by_name(request, spec.name)
            if tensor is None:
                raise RequestError(f"input '{spec.name}' is missing from the request")
            array = tensor.as_numpy()
            spec.check(array, self.max_batch_size)
            feeds[spec.name] = array
        return feeds

    def _requested_outputs(self, request: Any) -> list[str]:
        known = [spec.name for spec in self.outputs]
        names = list(request.requested_output_names() or [])
        unknown = [n for n in names if n not in known]
        if unknown:
            raise RequestError(f"unknown output(s) {unknown}; the model has {known}")
        return names or known

    def _run_group(
        self,
        members: list[tuple[int, dict[str, np.ndarray], list[str]]],
        responses: list[Any],
    ) -> None:
        wanted = sorted({name for _, _, names in members for name in names})
        if len(members) == 1:
            feeds = members[0][1]
            sizes = None
        else:
            feeds = {
                name: np.concatenate([m[1][name] for m in members], axis=0)
                for name in members[0][1]
            }
            sizes = [len(next(iter(m[1].values()))) for m in members]
        try:
            results = self.session.run(
                wanted, {name: _to_onnx_input(arr) for name, arr in feeds.items()}
            )
        except Exception as exc:  # ORT raises several unrelated types
            message = f"onnxruntime failed to run model '{self.model_name}': {exc}"
            for index, _, _ in members:
                responses[index] = self._error(message)
            return
        by_name = dict(zip(wanted, results, strict=True))
        specs = {spec.name: spec for spec in self.outputs}
        offset = 0
        for position, (index, _, names) in enumerate(members):
            tensors = []
            for name in names:
                array = by_name[name]
                if sizes is not None:
                    array = array[offset : offset + sizes[position]]
                dtype = specs[name].dtype
                if dtype != np.object_ and array.dtype != dtype:
                    array = array.astype(dtype)
                tensors.append(pb_utils.Tensor(name, np.ascontiguousarray(array)))
            if sizes is not None:
                offset += sizes[position]
            responses[index] = pb_utils.InferenceResponse(output_tensors=tensors)

    @staticmethod
    def _error(message: str) -> Any:
        return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(message))

    def finalize(self) -> None:
        self.session = None


def _model_filename(config: dict[str, Any]) -> str:
    return str(config.get("default_model_filename") or DEFAULT_MODEL_FILENAME)


def _model_file_from_stub_argv(config: dict[str, Any]) -> Path | None:
    """The ONNX file of the version being loaded, from the stub's command line (Linux only)."""
    try:
        argv = Path("/proc/self/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if len(argv) < 2 or not argv[1]:
        return None
    path = Path(os.fsdecode(argv[1])).parent / _model_filename(config)
    return path if path.is_file() else None
