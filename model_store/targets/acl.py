"""The ``acl`` target: an offline-compiled ``model.om`` (ATC) served through pyACL.

The worker runs ATC (``atc --framework=5 ...``) on the uploaded ONNX; the OM
goes into the version directory and config.pbtxt says ``backend: "acl"``, our
Python-based backend that executes OM files with pyACL (docs/atc.md, docs/pyacl.md).

An OM has fixed shapes, or a dynamic batch limited to the "gears" given at
compile time (``--dynamic_batch_size``). So ``input_shape`` is either fixed or
has -1 on axis 0 with gears, and the config's ``max_batch_size`` is the
largest gear (0 for a fixed-batch OM, whose dims then include the batch).
The backend must pad a batch up to the next gear.

The option vocabulary (SoC, precision and input-format choices, gear limits) and the
shape rules an OM imposes are in :mod:`model_store.targets.acl_options`; the ATC compile
itself, shared with the ``npu_ge`` pre-flight, is in :mod:`model_store.targets.atc_build`.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from typing import Any

from model_store.compile.atc import (
    SOC_PATTERN,
    AtcUnavailable,
    cann_status,
    gear_problems,
)
from model_store.config import DynamicBatching, ModelConfig
from model_store.names import validate_model_name, validate_version
from model_store.onnx_info import OnnxInfo
from model_store.targets.acl_options import (
    _PRECISION_CLASS,
    INPUT_FORMAT_CHOICES,
    MAX_GEARS,
    MIN_GEARS,
    PRECISION_MODES,
    PRECISION_MODES_V2,
    SOC_CHOICES,
    _check_input_format,
    _derived_input_shape,
    _max_batch,
    _shape_findings,
)
from model_store.targets.atc_build import (
    ATC_OPSETS,
    cann_target_status,
    compile_with_atc,
    convert_for_atc,
    make_atc_options,
)
from model_store.targets.base import (
    BuildContext,
    BuildResult,
    Target,
    TargetStatus,
    VerifyPlan,
)
from model_store.targets.batching import instance_count_spec
from model_store.targets.findings import Finding, error, warning
from model_store.targets.options import InvalidOptions, OptionSpec
from model_store.targets.signature import (
    config_tensors,
    signature_findings,
    symbol_sizes,
    warmup_for,
)
from model_store.text import Said, say

ARTIFACT = "model.om"
ATC_WORK_DIR = ".atc-work"
HOW_TO_GET_CANN = say(
    "Install the CANN toolkit on the worker, set ATC_PATH (the atc binary) or "
    "ASCEND_TOOLKIT_HOME (e.g. /usr/local/Ascend/cann from CANN 8.5, "
    "/usr/local/Ascend/ascend-toolkit/latest before) in the worker's environment, and "
    "restart the worker."
)


class AclTarget(Target):
    """Ascend NPU through an ATC-compiled OM and our pyACL backend (``backend: "acl"``)."""

    name = "acl"
    label = say("Ascend NPU (ATC-compiled OM)")
    description = say("An OM compiled by ATC on the worker, served through pyACL.")
    backend = "acl"
    artifact_name = ARTIFACT
    needs_cann = True
    hardware_verified = False
    device = "npu"
    # The OM fixes batch gears, shapes and precision; only where and how Triton schedules it
    # is free (new gears are a new ATC build).
    config_only_options = frozenset(
        {"device_id", "dynamic_batching", "max_queue_delay_us", "instance_count"}
    )

    def option_specs(self) -> list[OptionSpec]:
        """ATC flags (soc_version, input_shape, precision, ...) and serving options."""
        return [
            OptionSpec(
                "soc_version",
                "str",
                None,
                say("Ascend SoC"),
                say(
                    "The chip the OM runs on: 'Ascend' + the Name column of npu-smi info "
                    "(e.g. 310P3 -> Ascend310P3, 910B4-1 -> Ascend910B4-1). An OM only runs on "
                    "the SoC it was built for."
                ),
                choices=SOC_CHOICES,
                required=True,
                pattern=SOC_PATTERN,
            ),
            OptionSpec(
                "input_shape",
                "shape",
                None,
                say("Input shapes"),
                say(
                    "ATC --input_shape, e.g. input:1,3,224,224 (several inputs separated by ';'). "
                    "Automatic: the model's shapes when fixed; with gears, -1 on the batch axis."
                ),
            ),
            OptionSpec(
                "dynamic_batch_size",
                "int_list",
                [],
                say("Batch gears"),
                say(
                    "ATC --dynamic_batch_size: the batch sizes the OM supports, e.g. 1,2,4,8 "
                    "(%(low)s to %(high)s different gears). Needed when the batch axis is "
                    "dynamic; Triton's max batch is then the largest gear.",
                    low=MIN_GEARS,
                    high=MAX_GEARS,
                ),
                minimum=1,
                maximum=2048,
            ),
            OptionSpec(
                "input_format",
                "choice",
                None,
                say("Input format"),
                say(
                    "ATC --input_format (ONNX: NCHW, ND or NCDHW; ATC refuses NHWC). Automatic: "
                    "NCHW when an input has 4 dims, else ND."
                ),
                choices=INPUT_FORMAT_CHOICES,
            ),
            OptionSpec(
                "precision_mode",
                "choice",
                None,
                say("Precision mode"),
                say(
                    "ATC --precision_mode. Empty: ATC's default (force_fp16). Set this or "
                    "precision_mode_v2, not both."
                ),
                choices=PRECISION_MODES,
            ),
            OptionSpec(
                "precision_mode_v2",
                "choice",
                None,
                say("Precision mode (v2)"),
                say(
                    "ATC --precision_mode_v2, the newer form (default fp16; 'origin' keeps "
                    "accuracy). Set this or precision_mode, not both."
                ),
                choices=PRECISION_MODES_V2,
            ),
            OptionSpec(
                "out_nodes",
                "str",
                None,
                say("Output nodes"),
                say(
                    "ATC --out_nodes, e.g. node:0;node2:0 or output names out1;out2. Empty: the "
                    "model's outputs."
                ),
                advanced=True,
            ),
            OptionSpec(
                "op_select_implmode",
                "choice",
                None,
                say("Operator implementation"),
                say("ATC --op_select_implmode. Empty: ATC's default (high_performance)."),
                choices=[
                    ("high_performance", "high_performance"),
                    ("high_precision", "high_precision"),
                ],
                advanced=True,
            ),
            OptionSpec(
                "log",
                "choice",
                "error",
                say("ATC log level"),
                say("ATC --log: how much ATC prints into the build log."),
                choices=[
                    ("error", "error"),
                    ("warning", "warning"),
                    ("info", "info"),
                    ("debug", "debug"),
                    ("null", "null"),
                ],
                advanced=True,
            ),
            OptionSpec(
                "target_opset",
                "int",
                0,
                say("ONNX opset"),
                say(
                    "Convert the model to this opset before ATC (ATC parses 11 to 18). "
                    "0 keeps the model's opset."
                ),
                minimum=0,
                maximum=ATC_OPSETS.stop - 1,
                advanced=True,
            ),
            OptionSpec(
                "device_id",
                "str",
                "0",
                say("NPU device id"),
                say(
                    "The NPU the acl backend runs the OM on, as Triton's container numbers it: "
                    "from 0 over the NPUs mapped into it (with only /dev/davinci3 mapped, that "
                    "NPU is 0); on the host itself, the Device (logical id) column of npu-smi "
                    "info."
                ),
                pattern=r"[0-9]+",
            ),
            OptionSpec(
                "dynamic_batching",
                "bool",
                None,
                say("Dynamic batching"),
                say(
                    "Let Triton merge requests into batches up to the largest gear. Automatic: on "
                    "when gears are set."
                ),
            ),
            OptionSpec(
                "max_queue_delay_us",
                "int",
                100,
                say("Max queue delay (µs)"),
                say("How long a request may wait for others to form a batch."),
                minimum=0,
                maximum=10_000_000,
                advanced=True,
            ),
            instance_count_spec(
                say("Triton instances of the acl backend (each loads the OM on the device).")
            ),
        ]

    def parse_options(
        self, raw: Mapping[str, object], *, info: OnnxInfo | None = None
    ) -> dict[str, Any]:
        """As :meth:`Target.parse_options`, with ATC's reason when input_format is refused."""
        if isinstance(raw, Mapping):
            value = raw.get("input_format")
            if isinstance(value, str) and value.strip():
                _check_input_format(value.strip())
        return super().parse_options(raw, info=info)

    def check_options(self, options: dict[str, Any]) -> None:
        """Precision flags exclude each other; gears as GE checks them; batching needs gears;
        input format; opset range."""
        if options.get("precision_mode") and options.get("precision_mode_v2"):
            raise InvalidOptions(
                say(
                    "Options 'precision_mode' and 'precision_mode_v2' cannot both be set (ATC "
                    "refuses the pair). Keep one; precision_mode_v2 is the newer form."
                )
            )
        _check_input_format(options.get("input_format"))
        gears = options.get("dynamic_batch_size") or []
        problems = gear_problems([[g] for g in gears], "dynamic_batch_size") if gears else []
        if problems:
            # Parsing merges repeats, so a repeat shows up here as one gear too few.
            raise InvalidOptions(
                say(
                    "Option %(problems)s Give %(low)s to %(high)s different "
                    "batch sizes, e.g. 1,2,4,8 (repeats count once).",
                    problems=" ".join(problems),
                    low=MIN_GEARS,
                    high=MAX_GEARS,
                )
            )
        if options.get("dynamic_batching") is True and not gears:
            raise InvalidOptions(
                say(
                    "Option 'dynamic_batching' needs batch gears (dynamic_batch_size): an OM "
                    "without gears has a fixed batch."
                )
            )
        opset = options.get("target_opset")
        if opset and opset not in ATC_OPSETS:
            raise InvalidOptions(
                say(
                    "Option 'target_opset' is %(opset)s; use 0 (keep) or "
                    "%(low)s to %(high)s, the opsets ATC parses.",
                    opset=opset,
                    low=ATC_OPSETS.start,
                    high=ATC_OPSETS.stop - 1,
                )
            )
        for name, dims in (options.get("input_shape") or {}).items():
            if any(d < 1 for d in dims[1:]):
                raise InvalidOptions(
                    say(
                        "Option 'input_shape': %(name)s has %(dims)s; only the batch axis (the "
                        "first) may be -1, and only together with gears.",
                        name=repr(name),
                        dims=str(dims),
                    )
                )
            if dims and dims[0] < 1 and not gears:
                raise InvalidOptions(
                    say(
                        "Option 'input_shape': %(name)s has a dynamic batch (-1) but no gears; "
                        "set dynamic_batch_size, e.g. 1,2,4,8, or fix the batch.",
                        name=repr(name),
                    )
                )

    def resolve_options(self, options: Mapping[str, Any], info: OnnxInfo) -> dict[str, Any]:
        """Derives input_shape and input_format from the model; batching follows the gears."""
        resolved = dict(options)
        gears = resolved.get("dynamic_batch_size") or []
        # Inputs the user left out keep the model's shape; model order is kept (ATC reads it).
        given = resolved.get("input_shape") or {}
        merged = {name: given.get(name, dims) for name, dims in _derived_input_shape(info).items()}
        merged.update({name: dims for name, dims in given.items() if name not in merged})
        resolved["input_shape"] = merged
        if resolved.get("input_format") is None:
            ranks = [len(t.dims or []) for t in info.inputs]
            resolved["input_format"] = "NCHW" if 4 in ranks else "ND"
        if resolved.get("dynamic_batching") is None:
            resolved["dynamic_batching"] = bool(gears)
        return resolved

    def check_model(self, info: OnnxInfo, options: Mapping[str, Any]) -> list[Finding]:
        """Shapes ATC can compile, opset range, non-standard operators."""
        resolved, found = self.findings_from_options(info, options)
        if resolved is None:
            return found
        found += signature_findings(info, _max_batch(resolved), resolved["input_shape"])
        found += _shape_findings(info, resolved)
        opset = info.default_opset
        target_opset = resolved.get("target_opset")
        if opset is not None and not target_opset and opset not in ATC_OPSETS:
            found.append(
                warning(
                    "opset_outside_atc_range",
                    say(
                        "The model uses opset %(opset)s; ATC parses opsets %(low)s to "
                        "%(high)s and may fail with E19010 (no parser for an op).",
                        opset=opset,
                        low=ATC_OPSETS.start,
                        high=ATC_OPSETS.stop - 1,
                    ),
                    say("Set target_opset to 17 (or export with an opset in that range)."),
                )
            )
        custom = sorted(op for op in info.operators if "." in op)
        if custom:
            found.append(
                error(
                    "non_standard_operator",
                    say(
                        "ATC compiles standard ONNX operators only; the model uses %(ops)s.",
                        ops=", ".join(custom[:8]) + (" ..." if len(custom) > 8 else ""),
                    ),
                    say("Export without custom or ONNX Runtime-specific operators."),
                )
            )
        return found

    def build(self, ctx: BuildContext) -> BuildResult:
        """Runs ATC into ``workdir/model.om``.

        Raises:
            AtcUnavailable: CANN is not on this worker (the message says how to set it up).
            AtcFailed: ATC failed; the message carries ATC's error codes explained.
            BuildCancelled: The user cancelled.
            InvalidOptions: The options do not make a valid ATC command.
        """
        options = self.parse_options(ctx.options, info=ctx.info)
        status = cann_status(dict(ctx.env))
        if not status.available:
            raise AtcUnavailable(
                say(
                    "The acl target compiles with ATC from the Ascend CANN toolkit, which this "
                    "worker does not have: %(reason)s %(how)s",
                    reason=status.reason,
                    how=HOW_TO_GET_CANN,
                )
            )
        scratch = ctx.workdir / ATC_WORK_DIR
        scratch.mkdir()
        notes: list[Said] = []
        try:
            model = ctx.source
            target_opset = options.get("target_opset")
            if target_opset and ctx.info.default_opset != target_opset:
                model = scratch / "model.onnx"
            atc_options = make_atc_options(
                soc_version=options["soc_version"],
                input_shape=options["input_shape"],
                input_format=options["input_format"],
                precision_mode=options.get("precision_mode"),
                precision_mode_v2=options.get("precision_mode_v2"),
                dynamic_batch_size=options.get("dynamic_batch_size") or None,
                out_nodes=options.get("out_nodes"),
                op_select_implmode=options.get("op_select_implmode"),
                log=options.get("log") or "error",
            )
            # The command is known before any step runs, so it is the first log line.
            command, om_path = compile_with_atc(
                ctx,
                status,
                model,
                ctx.workdir / "model",
                scratch,
                atc_options,
                before_run=lambda: convert_for_atc(ctx, model, target_opset, notes),
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        final = ctx.workdir / ARTIFACT
        if om_path != final:
            om_path.replace(final)  # ATC may name it model_<os>_<arch>.om
        ctx.progress(1.0)
        return BuildResult(final, ARTIFACT, [command], notes, None)

    def make_config(
        self, name: str, info: OnnxInfo, options: Mapping[str, Any], version: int
    ) -> ModelConfig:
        """``backend: "acl"``, parameter device_id; max_batch_size = largest gear (or 0)."""
        validate_model_name(name)
        validate_version(version)
        resolved = self.parse_options(options, info=info)
        mbs = _max_batch(resolved)
        shape = resolved["input_shape"]
        sizes = symbol_sizes(info, shape)
        inputs = config_tensors(info.inputs, batched=mbs > 0, overrides=shape, sizes=sizes)
        outputs = config_tensors(info.outputs, batched=mbs > 0, overrides=shape, sizes=sizes)
        gears = resolved.get("dynamic_batch_size") or []
        warmups, _ = warmup_for(inputs, min(gears) if gears else 1)
        return ModelConfig(
            name=name,
            backend=self.backend,
            max_batch_size=mbs,
            inputs=inputs,
            outputs=outputs,
            # Triton aims for the gears; the backend pads other batch sizes up to a gear.
            dynamic_batching=DynamicBatching(list(gears), resolved["max_queue_delay_us"])
            if resolved["dynamic_batching"]
            else None,
            instance_count=resolved["instance_count"],
            instance_kind="KIND_CPU",  # a Python-based backend; it picks the NPU itself
            version_policy_specific=[version],
            parameters={"device_id": resolved["device_id"]},
            warmup=warmups,
        )

    def status(self, env: Mapping[str, str]) -> TargetStatus:
        """Available when ATC is found; otherwise "needs CANN" with the reason."""
        return cann_target_status(
            env,
            say("Serving also needs a Triton with the acl backend and pyACL on an Ascend machine."),
        )

    def verify_plan(self, options: Mapping[str, Any], info: OnnxInfo) -> VerifyPlan:
        """Run the OM through pyACL (where present) with the precision ATC compiled for."""
        resolved = self.parse_options(options, info=info)
        gears = resolved.get("dynamic_batch_size") or []
        mode = resolved.get("precision_mode_v2") or resolved.get("precision_mode")
        shapes = {
            name: [min(gears) if d < 0 else d for d in dims]
            for name, dims in resolved["input_shape"].items()
        }
        return VerifyPlan(
            artifact_kind="om",
            precision=_PRECISION_CLASS.get(mode, "fp16"),
            batch=min(gears) if gears else 1,
            input_shapes=shapes,
            note=say("The OM runs through pyACL on the NPU; where pyACL is absent it is not run."),
            device_id=int(resolved.get("device_id") or 0),
        )
