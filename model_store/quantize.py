"""INT8 static quantisation of an ONNX model with ONNX Runtime, calibrated on real inputs.

ONNX Runtime's ``quantize_static`` in the QDQ format (QuantizeLinear/DequantizeLinear pairs
around each quantised operator, the form its CPU provider and other runtimes read), weights
per channel, calibrated on the inputs given. What is quantised must then pass the hub's
accuracy gate against the FP32 source on *other* inputs from the same source: :func:`split`
keeps the two sets apart.

Refused plainly, before any work: a model that is already quantised, one with no float weights
to quantise, inputs whose type static quantisation cannot calibrate, and too few inputs to both
calibrate and check. No Django here; the hub's job is webapp's.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import onnx

from model_store.cpu_features import int8_saturates
from model_store.errors import ModelStoreError
from model_store.text import Said, say

#: Fewer inputs than this cannot both calibrate and leave enough aside to check.
MIN_INPUTS = 32
#: The share of inputs kept aside for the check (64 inputs: 48 calibrate, 16 check).
HELD_OUT_FRACTION = 0.25
_QUANTISED_OPS = frozenset(
    {"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "ConvInteger",
     "MatMulInteger", "DynamicQuantizeLinear"}
)  # fmt: skip
_FLOAT_TYPES = frozenset(
    {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE}
)
_CALIBRATABLE_INPUTS = _FLOAT_TYPES | {
    onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.BOOL,
}  # fmt: skip


class QuantizeRefused(ModelStoreError):
    """This model or these inputs cannot be quantised; the message says why and what to do."""

    code = "not_quantizable"

    def __init__(self, message: Said, code: str = "not_quantizable") -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Plan:
    """How to quantise: what a person may choose, with the defaults that passed the gate on
    the demo EfficientNet-Lite0 (bench/README.md)."""

    calibration: Literal["minmax", "percentile", "entropy"] = "minmax"
    activations: Literal["int8", "uint8"] = "int8"
    per_channel: bool = True
    #: Nodes left in float (names from the model), when plain QDQ costs too much accuracy.
    exclude_nodes: tuple[str, ...] = ()
    #: Activations and weights both uint8 (U8U8), whose products cannot saturate on an x86
    #: CPU without VNNI as U8S8's do; None: decided by this machine's CPU
    #: (:func:`model_store.cpu_features.int8_saturates`). On such a CPU it measured better
    #: than ONNX Runtime's other remedy, 7-bit weights (``reduce_range``): the demo's held-out
    #: cosine 0.993 against 0.986, top-1 agreement 16/16 against 15/16.
    u8u8: bool | None = None


@dataclass
class Result:
    path: Path
    source_bytes: int
    quantized_bytes: int
    calibration_inputs: int
    seconds: float
    quantized_nodes: int
    excluded_nodes: list[str] = field(default_factory=list)
    activations: str = "int8"
    weights: str = "int8"

    def to_dict(self) -> dict[str, Any]:
        return {
            "source_bytes": self.source_bytes,
            "quantized_bytes": self.quantized_bytes,
            "calibration_inputs": self.calibration_inputs,
            "seconds": round(self.seconds, 2),
            "quantized_nodes": self.quantized_nodes,
            "excluded_nodes": self.excluded_nodes,
            "activations": self.activations,
            "weights": self.weights,
        }


def split(count: int) -> tuple[list[int], list[int]]:
    """Which of ``count`` inputs calibrate and which are kept aside to check, by position
    (inputs come oldest first, so the check uses the newest): never the same input in both.

    Raises:
        QuantizeRefused: Fewer than :data:`MIN_INPUTS`, saying how many are needed.
    """
    if count < MIN_INPUTS:
        raise QuantizeRefused(
            say("%(count)s inputs are too few to calibrate INT8 and check it on others: at "
                "least %(needed)s are needed (%(more)s more).", count=count, needed=MIN_INPUTS,
                more=MIN_INPUTS - count),
            "too_few_inputs",
        )  # fmt: skip
    held = max(1, round(count * HELD_OUT_FRACTION))
    return list(range(count - held)), list(range(count - held, count))


def check_quantizable(model: onnx.ModelProto) -> None:
    """Raises :class:`QuantizeRefused` for a model static quantisation cannot take."""
    ops = {node.op_type for node in model.graph.node}
    if ops & _QUANTISED_OPS or any(
        init.data_type in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)
        for init in model.graph.initializer
    ):
        raise QuantizeRefused(
            say("This version is quantised already (it has %(ops)s): quantise its FP32 "
                "source instead.", ops=", ".join(sorted(ops & _QUANTISED_OPS)) or "INT8 weights"),
            "already_quantized",
        )  # fmt: skip
    if not any(
        init.data_type in _FLOAT_TYPES and len(init.dims) >= 1 for init in model.graph.initializer
    ):
        raise QuantizeRefused(
            say("This model has no float weights, so there is nothing for INT8 to quantise."),
            "no_float_weights",
        )
    initializers = {init.name for init in model.graph.initializer}
    for tensor in model.graph.input:
        if tensor.name in initializers:
            continue
        kind = tensor.type.tensor_type.elem_type
        if kind not in _CALIBRATABLE_INPUTS:
            raise QuantizeRefused(
                say("Input %(name)s is of type %(type)s, which static quantisation cannot "
                    "calibrate (float, integer or boolean inputs only).", name=tensor.name,
                    type=onnx.TensorProto.DataType.Name(kind)),
                "input_type",
            )  # fmt: skip


def quantize(
    source: Path, dest: Path, calibration: Sequence[dict[str, np.ndarray]], plan: Plan
) -> Result:
    """Quantise ``source`` into ``dest`` (QDQ, INT8 weights) on the ``calibration`` inputs.

    Raises:
        QuantizeRefused: The model cannot be quantised (see :func:`check_quantizable`), or no
            calibration inputs were given.
    """
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    check_quantizable(onnx.load(str(source), load_external_data=False))
    if not calibration:
        raise QuantizeRefused(say("No calibration inputs were given."), "too_few_inputs")
    started = time.monotonic()

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._items: Iterator[dict[str, np.ndarray]] = iter(calibration)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._items, None)

    methods = {
        "minmax": CalibrationMethod.MinMax,
        "percentile": CalibrationMethod.Percentile,
        "entropy": CalibrationMethod.Entropy,
    }
    u8u8 = int8_saturates() if plan.u8u8 is None else plan.u8u8
    activations = "uint8" if u8u8 else plan.activations
    weights = "uint8" if u8u8 else "int8"
    types = {"int8": QuantType.QInt8, "uint8": QuantType.QUInt8}
    with tempfile.TemporaryDirectory(prefix="hub-quantize-", dir=dest.parent) as scratch:
        prepared = Path(scratch) / "prepared.onnx"
        # Shape inference and folding first, as ONNX Runtime advises before quantising.
        quant_pre_process(str(source), str(prepared))
        quantize_static(
            str(prepared),
            str(dest),
            Reader(),
            quant_format=QuantFormat.QDQ,
            per_channel=plan.per_channel,
            activation_type=types[activations],
            weight_type=types[weights],
            calibrate_method=methods[plan.calibration],
            nodes_to_exclude=list(plan.exclude_nodes) or None,
        )
    quantized = onnx.load(str(dest), load_external_data=False)
    return Result(
        path=dest,
        source_bytes=source.stat().st_size,
        quantized_bytes=dest.stat().st_size,
        calibration_inputs=len(calibration),
        seconds=time.monotonic() - started,
        quantized_nodes=sum(1 for n in quantized.graph.node if n.op_type == "QuantizeLinear"),
        excluded_nodes=list(plan.exclude_nodes),
        activations=activations,
        weights=weights,
    )
