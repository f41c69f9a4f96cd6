"""The ``acl`` target's option vocabulary and the shape rules an OM imposes.

The choices the acl target offers for ATC's flags (SoCs, precision modes, input formats),
the gear limits of ``--dynamic_batch_size``, how each precision setting is verified, and the
helpers :class:`~model_store.targets.acl.AclTarget` uses to check and derive its options
from the model (fixed dims, the batch axis with gears, ``max_batch_size``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from model_store.compile.atc import INPUT_FORMATS
from model_store.onnx_info import OnnxInfo
from model_store.targets.base import Precision
from model_store.targets.findings import Finding, error
from model_store.targets.options import InvalidOptions
from model_store.text import Said, say

# ATC's --dynamic_batch_size takes 2 to 100 gears (docs/atc.md#dynamic-batch).
MIN_GEARS, MAX_GEARS = 2, 100
# ATC's --input_format for ONNX: NCHW, ND or NCDHW; NHWC is E10001 (docs/atc.md#options).
INPUT_FORMAT_CHOICES: list[tuple[str, Said]] = [
    ("NCHW", "NCHW"),
    ("ND", say("ND (any other layout, NHWC included)")),
    ("NCDHW", "NCDHW"),
]

# Suggestions for "Ascend" + the Name column of `npu-smi info` (docs/atc.md#soc-versions): the
# option takes any name of that form (SOC_PATTERN), such as a host's Ascend910B4-1 or a newer
# chip; ATC decides whether it has the platform file for it.
SOC_CHOICES: list[tuple[str, str]] = [
    ("Ascend310P3", "Ascend310P3 (Atlas 300I Pro / Duo)"),
    ("Ascend310P1", "Ascend310P1"),
    ("Ascend310P5", "Ascend310P5"),
    ("Ascend310P7", "Ascend310P7"),
    ("Ascend310B1", "Ascend310B1 (Atlas 200I / 500 A2; compose does not cover this board)"),
    ("Ascend310B2", "Ascend310B2"),
    ("Ascend310B3", "Ascend310B3"),
    ("Ascend310B4", "Ascend310B4"),
    ("Ascend310", "Ascend310 (Atlas 300I; CANN up to 8.2)"),
    ("Ascend910B1", "Ascend910B1"),
    ("Ascend910B2", "Ascend910B2"),
    ("Ascend910B2C", "Ascend910B2C"),
    ("Ascend910B3", "Ascend910B3"),
    ("Ascend910B4", "Ascend910B4"),
    ("Ascend910B4-1", "Ascend910B4-1 (single die, 64 GB)"),
    ("Ascend910A", "Ascend910A"),
    ("Ascend910ProA", "Ascend910ProA"),
    ("Ascend910ProB", "Ascend910ProB"),
    ("Ascend910PremiumA", "Ascend910PremiumA"),
    ("Ascend910_9391", "Ascend910_9391 (A3)"),
    ("Ascend910_9392", "Ascend910_9392 (A3)"),
    ("Ascend910_9381", "Ascend910_9381 (A3)"),
    ("Ascend910_9382", "Ascend910_9382 (A3)"),
    ("Ascend910_9372", "Ascend910_9372 (A3)"),
    ("Ascend910_9362", "Ascend910_9362 (A3)"),
    ("Ascend910_9363", "Ascend910_9363 (A3)"),
]
PRECISION_MODES: list[tuple[str, Said]] = [
    ("force_fp16", say("force_fp16 (ATC default: float32 operators run in float16)")),
    ("allow_fp32_to_fp16", say("allow_fp32_to_fp16 (float16 only where the operator has no fp32)")),
    ("must_keep_origin_dtype", say("must_keep_origin_dtype (keep the model's precision)")),
    ("allow_mix_precision", say("allow_mix_precision (fp16 where safe)")),
]
PRECISION_MODES_V2: list[tuple[str, Said]] = [
    ("fp16", say("fp16 (default)")),
    ("origin", say("origin (keep the model's precision)")),
    ("mixed_float16", say("mixed_float16 (fp16 where safe)")),
]
# How each precision setting should be verified (see model_store.verification_compare.TOLERANCES).
_PRECISION_CLASS: dict[str | None, Precision] = {
    None: "fp16",
    "force_fp16": "fp16",
    "allow_fp32_to_fp16": "fp16",
    "must_keep_origin_dtype": "fp32",
    "allow_mix_precision": "mixed",
    "fp16": "fp16",
    "origin": "fp32",
    "mixed_float16": "mixed",
}


# Findings and shapes ---------------------------------------------------------------


def _check_input_format(value: object) -> None:
    """Refuses an --input_format ATC does not take for ONNX, saying why and what to use."""
    if value is not None and value not in INPUT_FORMATS:
        raise InvalidOptions(
            say(
                "Option 'input_format' is %(value)s; for an ONNX model ATC takes "
                "%(formats)s and refuses anything else with E10001. Use ND for "
                "an input that is not NCHW (an NHWC image input included).",
                value=repr(str(value)[:20]),
                formats=", ".join(INPUT_FORMATS),
            )
        )


def _max_batch(options: Mapping[str, Any]) -> int:
    """Triton's max_batch_size for an OM: the largest gear, or 0 for a fixed batch."""
    gears = options.get("dynamic_batch_size") or []
    return max(gears) if gears else 0


def _derived_input_shape(info: OnnxInfo) -> dict[str, list[int]]:
    """The model's input shapes with -1 for every dynamic dim.

    -1 on the batch axis is what ATC wants together with gears; any other -1
    is reported by check_model (ATC needs those fixed).
    """
    return {
        tensor.name: [d if isinstance(d, int) and d > 0 else -1 for d in tensor.dims or []]
        for tensor in info.inputs
    }


def _shape_findings(info: OnnxInfo, options: Mapping[str, Any]) -> list[Finding]:
    """ATC needs fixed dims, except the batch axis together with gears."""
    gears = options.get("dynamic_batch_size") or []
    shape: Mapping[str, Sequence[int]] = options["input_shape"]
    found: list[Finding] = []
    for name, dims in shape.items():
        if any(d < 0 for d in dims[1:]):
            # The example keeps -1 on the batch axis when gears will vary it.
            example = [
                str(d) if d > 0 or (axis == 0 and gears) else "1" for axis, d in enumerate(dims)
            ]
            found.append(
                error(
                    "acl_dynamic_dims",
                    say(
                        "Input %(name)r has dynamic dims beyond the batch axis (%(dims)s); "
                        "an OM needs them fixed.",
                        name=name,
                        dims=str(dims),
                    ),
                    say(
                        "Give input_shape with fixed sizes for those dims, e.g. %(example)s.",
                        example=f"{name}:{','.join(example)}",
                    ),
                )
            )
        if dims and dims[0] < 0 and not gears:
            found.append(
                error(
                    "acl_needs_gears",
                    say(
                        "Input %(name)r has a dynamic batch axis, but no batch gears are set.",
                        name=name,
                    ),
                    say(
                        "Set dynamic_batch_size (e.g. 1,2,4,8), or fix the batch in "
                        "input_shape (e.g. %(example)s).",
                        example=f"{name}:{','.join('1' if d < 0 else str(d) for d in dims)}",
                    ),
                )
            )
    return found
