"""The GE backend's rules as findings for ``npu_ge`` models.

Each check reads the model (and the resolved options) and says, before a build, what would
make Triton's load fail on the NPU or serve differently from what the user expects: tensor
types the backend's config auto-complete cannot map, dynamic dims and gears, output names for
dynamic dims, a model that will not fit one file, opsets GE does not parse. The rules and their
sources are in docs/ge-backend.md; :class:`~model_store.targets.npu_ge.NpuGeTarget` runs them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from model_store.compile.atc import MAX_BATCH_GEARS, MIN_BATCH_GEARS
from model_store.onnx_info import Dim, OnnxInfo
from model_store.targets.atc_build import ATC_OPSETS
from model_store.targets.findings import Finding, error, warning
from model_store.targets.signature import effective_dims, is_fixed, symbol_sizes
from model_store.text import Message, say

SUGGESTED_OPSET = 14
# GE's ONNX parser is ATC's: the same opsets.
PARSER_OPSETS = ATC_OPSETS
# Element types the backend's auto-complete maps
# (docs/ge-backend.md#inputs-and-outputs-from-the-onnx).
GE_AUTO_TYPES = frozenset({"FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64"})
MANY_GEARS = 8
# protobuf's limit for one .onnx file; the backend cannot read external data.
SINGLE_FILE_BYTES = 2**31
# An output dim name the backend can evaluate: input axis names, integers, + - * / ( ).
_EXPRESSION_TOKEN = re.compile(r"\s*(?:([A-Za-z_][A-Za-z0-9_]*)|([0-9]+)|([-+*/()]))")


def type_findings(info: OnnxInfo) -> list[Finding]:
    """FP16/BOOL/DOUBLE need explicit IO; strings are not supported at all."""
    found = []
    for tensor in [*info.inputs, *info.outputs]:
        if tensor.triton_type is None or tensor.onnx_type in GE_AUTO_TYPES:
            continue
        if tensor.onnx_type == "STRING":
            found.append(
                error(
                    "string_io",
                    say(
                        "The tensor %(name)r is a string tensor; the GE backend only "
                        "passes numeric tensors.",
                        name=tensor.name,
                    ),
                    say("Do the string processing (e.g. tokenising) outside the model."),
                )
            )
            continue
        found.append(
            warning(
                "io_type_needs_explicit_config",
                say(
                    "The tensor %(name)r is %(type)s; the GE backend cannot "
                    "read this type from the ONNX file itself.",
                    name=tensor.name,
                    type=tensor.onnx_type,
                ),
                say(
                    "The generated config.pbtxt lists every input and output explicitly; keep "
                    "them there when editing the config by hand."
                ),
            )
        )
    return found


def _dynamic_axes(dims: Sequence[Dim] | None) -> list[int]:
    return [axis for axis, dim in enumerate(dims or []) if not is_fixed(dim)]


def shape_findings(info: OnnxInfo, options: Mapping[str, Any]) -> list[Finding]:
    """Static graph vs dynamic dims; which dynamic dims batching can merge."""
    overrides = options.get("input_shapes")
    sizes = symbol_sizes(info, overrides)
    found: list[Finding] = []
    dynamic = {
        t.name: _dynamic_axes(effective_dims(t, overrides, sizes))
        for t in [*info.inputs, *info.outputs]
    }
    if options.get("static_model"):
        loose = sorted(name for name, axes in dynamic.items() if axes)
        if loose:
            found.append(
                error(
                    "static_needs_fixed_shapes",
                    say(
                        "A static GE graph needs every shape fixed, but %(names)s have "
                        "dynamic dims.",
                        names=", ".join(map(repr, loose)),
                    ),
                    say("Give fixed input shapes (option input_shapes), or turn static_model off."),
                )
            )
        return found
    beyond_batch = sorted(name for name, axes in dynamic.items() if any(a > 0 for a in axes))
    if beyond_batch and not options.get("dynamic_dims"):
        found.append(
            warning(
                "dynamic_non_batch_axes",
                say(
                    "%(names)s have dynamic dims beyond the first axis. "
                    "GE supports them only as a dynamic graph: every new shape is compiled on "
                    "first use, and no warm-up request can be made.",
                    names=", ".join(map(repr, beyond_batch)),
                ),
                say(
                    "Fix those dims (option input_shapes) or use shape gears, if the sizes are "
                    "known in advance."
                ),
            )
        )
    if options.get("dynamic_batching"):
        if beyond_batch:
            found.append(
                warning(
                    "batching_not_merged",
                    say(
                        "The GE backend merges requests only when the batch axis is the only "
                        "dynamic axis; with this model, dynamic batching only queues requests."
                    ),
                    say("Fix the other dims (option input_shapes) to let it merge requests."),
                )
            )
        elif not options.get("preferred_batch_sizes"):
            found.append(
                warning(
                    "no_preferred_batch_sizes",
                    say("The GE backend merges requests only when preferred batch sizes are set."),
                    say(
                        "Set preferred_batch_sizes, e.g. %(size)s.",
                        size=options["max_batch_size"],
                    ),
                )
            )
    return found


def output_name_findings(
    info: OnnxInfo, overrides: Mapping[str, Sequence[int]] | None
) -> list[Finding]:
    """Dynamic output dims must be named by input axis names (or arithmetic of them)."""
    sizes = symbol_sizes(info, overrides)
    input_axes = {d for t in info.inputs for d in (t.dims or []) if isinstance(d, str)}
    found = []
    for tensor in info.outputs:
        for axis, dim in enumerate(effective_dims(tensor, overrides, sizes) or []):
            if is_fixed(dim):
                continue
            if not isinstance(dim, str):
                found.append(
                    error(
                        "unnamed_dynamic_output_dim",
                        say(
                            "Axis %(axis)s of output %(name)r is dynamic but has no name; the "
                            "GE backend then fails to load the model ('-1 dim has no name').",
                            axis=axis,
                            name=tensor.name,
                        ),
                        say(
                            "Export with named dynamic axes for the outputs (dynamic_axes in "
                            "torch.onnx.export) that reuse the input axis names."
                        ),
                    )
                )
                continue
            unknown = _unknown_names(dim, input_axes)
            if unknown is not None:
                found.append(
                    error(
                        "output_dim_name_unresolvable",
                        say(
                            "Axis %(axis)s of output %(name)r is named %(dim)r, which is not "
                            "an input axis name or arithmetic of them (%(problem)s); the GE "
                            "backend cannot compute its size.",
                            axis=axis,
                            name=tensor.name,
                            dim=dim,
                            problem=unknown,
                        ),
                        say(
                            "Name it after an input axis (e.g. 'batch') or an expression of "
                            "input axis names with + - * / and parentheses when exporting."
                        ),
                    )
                )
    return found


def _unknown_names(expression: str, input_axes: set[str]) -> Message | None:
    """None when ``expression`` only uses input axis names and + - * / ( ); else the problem."""
    names_used = 0
    position = 0
    text = expression.rstrip()
    while position < len(text):
        match = _EXPRESSION_TOKEN.match(text, position)
        if match is None:
            offending = text[position:].lstrip()[:1]
            return say("character %(character)r is not allowed", character=offending)
        name = match.group(1)
        if name is not None:
            if name not in input_axes:
                return say("%(name)r is not an input axis name", name=name)
            names_used += 1
        position = match.end()
    return None if names_used else say("it names no input axis")


def gear_findings(options: Mapping[str, Any]) -> list[Finding]:
    """GE's own gear checks (at least 2 gears, none twice: E10035, E10039; GE runs them on an
    online graph's gears as ATC does, docs/atc.md#dynamic-batch); gear groups must match the
    number of -1 dims; with batching they must cover every size."""
    text = options.get("dynamic_dims")
    if not text:
        return []
    gears = [[int(v) for v in group.split(",")] for group in text.rstrip(";").split(";")]
    shape = options.get("ge_input_shape") or {}
    slots = [(name, axis) for name, dims in shape.items() for axis, d in enumerate(dims) if d < 0]
    found: list[Finding] = []
    if len(gears) < MIN_BATCH_GEARS:
        found.append(
            error(
                "too_few_gears",
                say(
                    "Shape gears has %(count)s gear; GE needs at least %(minimum)s and "
                    "refuses the model at load with E10035.",
                    count=len(gears),
                    minimum=MIN_BATCH_GEARS,
                ),
                say(
                    "Add a second gear (e.g. 1;8), or remove dynamic_dims and fix that size with "
                    "input_shapes instead."
                ),
            )
        )
    elif len(gears) > MAX_BATCH_GEARS:
        found.append(
            error(
                "too_many_gears",
                say(
                    "Shape gears has %(count)s gears; GE takes at most %(maximum)s.",
                    count=len(gears),
                    maximum=MAX_BATCH_GEARS,
                ),
                say("Keep only the sizes that really occur."),
            )
        )
    repeated = sorted({tuple(g) for g in gears if gears.count(g) > 1})
    if repeated:
        found.append(
            error(
                "repeated_gear",
                say(
                    "Shape gears lists %(gears)s more than once; GE refuses repeated gears at "
                    "load with E10039.",
                    gears="; ".join(",".join(map(str, g)) for g in repeated),
                ),
                say("List every gear once."),
            )
        )
    if not slots:
        return [
            error(
                "gears_without_dynamic_dims",
                say("Shape gears are set, but the gear input shape has no -1 dim to vary."),
                say("Remove dynamic_dims, or give ge_input_shape with -1 for the geared dims."),
            )
        ]
    bad = [g for g in gears if len(g) != len(slots)]
    if bad:
        found.append(
            error(
                "gear_size_mismatch",
                say(
                    "Each gear needs %(count)s value(s), one per -1 dim (%(slots)s), but "
                    "%(gears)s do(es) not.",
                    count=len(slots),
                    slots=str(slots),
                    gears=";".join(",".join(map(str, g)) for g in bad),
                ),
                say("Give one value per -1 dim in every gear, gears separated by ';'."),
            )
        )
    mbs = options.get("max_batch_size") or 0
    if mbs > 0:
        if any(axis != 0 for _, axis in slots):
            found.append(
                error(
                    "gears_with_batching_not_batch_only",
                    say("With max_batch_size > 0, gears may only vary the batch axis."),
                    say("Set max_batch_size to 0, or make -1 appear on axis 0 only."),
                )
            )
        covered = {g[0] for g in gears if len(g) == 1}
        missing = [size for size in range(1, mbs + 1) if size not in covered]
        if missing:
            found.append(
                error(
                    "gears_do_not_cover_batches",
                    say(
                        "Triton may form any batch from 1 to %(max_batch_size)s, but there is "
                        "no gear for %(sizes)s.",
                        max_batch_size=mbs,
                        sizes=", ".join(map(str, missing[:8]))
                        + (" ..." if len(missing) > 8 else ""),
                    ),
                    say("Add those gears or lower max_batch_size to the largest covered size."),
                )
            )
    if len(gears) > MANY_GEARS:
        found.append(
            warning(
                "many_gears",
                say(
                    "%(count)s gears make GE compile %(count)s graphs when the model loads.",
                    count=len(gears),
                ),
                say("Keep only the sizes that really occur."),
            )
        )
    return found


def format_findings(info: OnnxInfo, options: Mapping[str, Any]) -> list[Finding]:
    """External data, opset, non-standard operators."""
    found: list[Finding] = []
    if info.uses_external_data:
        estimate = info.file_size + info.parameter_count * 4
        if estimate >= SINGLE_FILE_BYTES:
            found.append(
                error(
                    "external_data_too_large",
                    say(
                        "The model keeps about %(gib).1f GiB of weights in external "
                        "files; the GE backend reads exactly one .onnx file, which cannot exceed "
                        "2 GiB.",
                        gib=estimate / 2**30,
                    ),
                    say(
                        "Shrink the model (e.g. FP16 or INT8 weights) below 2 GiB, or use the "
                        "acl target (ATC compiles it to an OM)."
                    ),
                )
            )
        else:
            found.append(
                warning(
                    "external_data_merged",
                    say(
                        "The model keeps its weights in external files; the GE backend reads "
                        "one .onnx file, so the build embeds them."
                    ),
                    say("Nothing to do; the served file is self-contained."),
                )
            )
    found += opset_findings(info, options.get("target_opset"))
    custom = sorted(op for op in info.operators if "." in op)
    if custom:
        found.append(
            error(
                "non_standard_operator",
                say(
                    "The GE backend parses standard ONNX operators only; the model uses %(ops)s.",
                    ops=", ".join(custom[:8]) + (" ..." if len(custom) > 8 else ""),
                ),
                say(
                    "Export without custom or ONNX Runtime-specific operators (do not upload "
                    "a model already optimised by ONNX Runtime)."
                ),
            )
        )
    return found


def opset_findings(info: OnnxInfo, target_opset: int | None) -> list[Finding]:
    opset = info.default_opset
    if opset is None:
        return []
    if target_opset and opset != target_opset:
        return [
            warning(
                "opset_conversion",
                say(
                    "The model uses opset %(opset)s; the build converts it to %(target)s "
                    "(GE's docs suggest %(suggested)s). A failed conversion keeps %(opset)s.",
                    opset=opset,
                    target=target_opset,
                    suggested=SUGGESTED_OPSET,
                ),
                say("Export with opset %(target)s to skip the conversion.", target=target_opset),
            )
        ]
    if not target_opset and opset not in PARSER_OPSETS:
        return [
            warning(
                "opset_outside_parser_range",
                say(
                    "The model uses opset %(opset)s; GE's ONNX parser handles opsets "
                    "%(low)s to %(high)s.",
                    opset=opset,
                    low=PARSER_OPSETS.start,
                    high=PARSER_OPSETS.stop - 1,
                ),
                say(
                    "Set target_opset to %(suggested)s or export with that opset.",
                    suggested=SUGGESTED_OPSET,
                ),
            )
        ]
    return []


# Shapes for gears and pre-flight ------------------------------------------------------


def derived_input_shape(
    info: OnnxInfo, overrides: Mapping[str, Sequence[int]] | None
) -> dict[str, list[int]]:
    """Input shapes with -1 for every dynamic dim (graph.ge.inputShape)."""
    sizes = symbol_sizes(info, overrides)
    shape: dict[str, list[int]] = {}
    for tensor in info.inputs:
        dims = effective_dims(tensor, overrides, sizes) or []
        shape[tensor.name] = [d if isinstance(d, int) and d > 0 else -1 for d in dims]
    return shape


def shape_text(shape: Mapping[str, Sequence[int]]) -> str:
    """``"image:-1,3,224,224;mask:-1,1"`` (GE and ATC syntax)."""
    return ";".join(f"{name}:{','.join(map(str, dims))}" for name, dims in shape.items())


def preflight_shape(
    info: OnnxInfo, options: Mapping[str, Any]
) -> tuple[dict[str, list[int]] | None, dict[str, str]]:
    """ATC input shape for the pre-flight: fixed, batch 1, or the gears; None if impossible.

    Operator support does not depend on the batch size, so a dynamic batch axis
    is compiled at batch 1.
    """
    if options.get("dynamic_dims"):
        return dict(options["ge_input_shape"]), {"dynamic_dims": options["dynamic_dims"]}
    shape = derived_input_shape(info, options.get("input_shapes"))
    for dims in shape.values():
        if any(d < 0 for d in dims[1:]):
            return None, {}
        if dims and dims[0] < 0:
            dims[0] = 1
    return shape, {}
