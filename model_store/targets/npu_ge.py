"""The ``npu_ge`` target: one normalised ``model.onnx`` for CANN's GE backend in Triton.

The GE backend compiles the ONNX online when Triton loads it, and it runs the
first ``.onnx`` it finds anywhere under the model directory
(docs/ge-backend.md#how-the-model-file-is-found), so the build writes exactly one
self-contained file (no external data) and nothing else. The rules encoded in
:meth:`NpuGeTarget.check_model` come from the backend's code and docs
(docs/ge-backend.md#config-parameters through
docs/ge-backend.md#inputs-and-outputs-from-the-onnx):

* the config must list inputs/outputs explicitly for FP16/BOOL/DOUBLE tensors
  (its auto-complete maps them to INVALID);
* ``static_model`` needs every shape fixed and excludes dynamic batching;
* requests are merged only when the batch axis is the only dynamic axis and
  ``preferred_batch_size`` is set;
* a dynamic output dim must carry a name that is an input axis name or
  arithmetic of such names, else the load fails with "-1 dim has no name";
* opset 14 is the version its docs suggest; operators must be standard ONNX.

Where CANN is installed, ATC compiles the result once as a pre-flight check,
so unsupported operators show up in the build log instead of at Triton load.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from model_store.compile import optimise
from model_store.compile.atc import SOC_PATTERN, cann_status
from model_store.config import ModelConfig
from model_store.names import validate_model_name, validate_version
from model_store.onnx_info import OnnxInfo, inspect_onnx
from model_store.targets import atc_build
from model_store.targets import npu_ge_checks as checks
from model_store.targets.acl_options import SOC_CHOICES
from model_store.targets.base import BuildContext, BuildResult, Target, TargetStatus, VerifyPlan
from model_store.targets.batching import (
    SCHEDULING_OPTIONS,
    batching_specs,
    dynamic_batching_for,
    instance_count_spec,
    resolve_batching,
)
from model_store.targets.findings import Finding
from model_store.targets.options import InvalidOptions, OptionSpec
from model_store.targets.signature import (
    config_tensors,
    signature_findings,
    symbol_sizes,
    warmup_for,
)
from model_store.text import Said, say

ARTIFACT = "model.onnx"
STEPS_DIR = ".build"
PREFLIGHT_DIR = ".atc-preflight"

_DEVICE_IDS = r"[0-9]+(,[0-9]+)*"
_GEARS = r"[0-9]+(,[0-9]+)*(;[0-9]+(,[0-9]+)*)*"


class NpuGeTarget(Target):
    """Ascend NPU through the Triton GE backend (``backend: "npu_ge"``)."""

    name = "npu_ge"
    label = say("Ascend NPU (Triton GE backend)")
    description = say(
        "A normalised ONNX model that CANN's GE backend compiles on the NPU when Triton loads it."
    )
    backend = "npu_ge"
    artifact_name = ARTIFACT
    needs_cann = True
    hardware_verified = False
    device = "npu"
    # The backend runs the first .onnx it finds anywhere under the model directory, so the
    # directory holds only the serving version
    # (docs/ge-backend.md#one-version-per-model-directory).
    versions_side_by_side = False
    # It reports nothing to Triton's statistics extension
    # (docs/ge-backend.md#statistics-reload-and-unload).
    reports_statistics = False
    # GE compiles the graph when Triton loads it; the file the hub builds depends on shapes,
    # opset and simplification only. Precision, static graphs and gears are config parameters
    # too, but they change what runs, so they go through the pre-flight and verify again.
    config_only_options = SCHEDULING_OPTIONS | {"device_ids"}

    def copies_per_device(
        self, instances: int, *, devices: int = 1, parameters: Mapping[str, str] | None = None
    ) -> tuple[int, Said]:
        """GE sessions per device: ``device_exec_blocks`` when set, else
        ``ceil(instances x instance_exec_blocks / devices)`` (docs/ge-backend.md#config-parameters,
        docs/ge-backend.md#instances-and-devices; read from the backend's code, not measured)."""
        instances = max(1, int(instances))
        params = parameters or {}
        explicit = _positive_int(params.get("device_exec_blocks"))
        if explicit is not None:
            return explicit, say("device_exec_blocks from config.pbtxt: one GE session per block")
        per_instance = _positive_int(params.get("instance_exec_blocks")) or 1
        copies = math.ceil(instances * per_instance / max(1, devices))
        return copies, say(
            "npu_ge: ceil(%(instances)s instances x %(per_instance)s / %(devices)s device(s)) "
            "GE sessions per device, each with its own graph (read from the backend's code, not "
            "measured)",
            instances=instances,
            per_instance=per_instance,
            devices=max(1, devices),
        )

    def option_specs(self) -> list[OptionSpec]:
        """See the module docstring for what each option maps to."""
        return [
            OptionSpec(
                "precision_mode_v2",
                "choice",
                "fp16",
                say("Precision"),
                say(
                    "GE session option ge.exec.precision_mode_v2. GE's default for online "
                    "inference is fp16 (float32 operators run in float16: fast, small accuracy "
                    "loss); 'origin' keeps the model's own precision for accuracy."
                ),
                choices=[
                    ("fp16", say("fp16 (GE default, fastest)")),
                    ("origin", say("origin (keep the model's precision)")),
                    ("mixed_float16", say("mixed_float16 (fp16 where safe)")),
                ],
            ),
            OptionSpec(
                "static_model",
                "bool",
                False,
                say("Static graph"),
                say(
                    "Compile a static GE graph (static_model=1). Only when every input and output "
                    "shape is fixed; it excludes dynamic batching."
                ),
            ),
            OptionSpec(
                "device_ids",
                "str",
                "0",
                say("NPU device ids"),
                say(
                    "Comma-separated device ids the model runs on, e.g. 0 or 0,1, as Triton's "
                    "container numbers them: from 0 over the NPUs mapped into it (with only "
                    "/dev/davinci3 mapped, that NPU is 0); on the host itself, the Device "
                    "(logical id) column of npu-smi info."
                ),
                pattern=_DEVICE_IDS,
            ),
            *batching_specs(),
            instance_count_spec(
                say(
                    "Triton instances; the GE backend sums them to size its executors per device "
                    "(its docs advise at most 8 streams per card)."
                )
            ),
            OptionSpec(
                "input_shapes",
                "shape",
                None,
                say("Fixed input shapes"),
                say(
                    "Fix dynamic input dims before packaging, e.g. input:1,3,224,224 (several "
                    "inputs separated by ';'). Needed for a static graph from a dynamic export."
                ),
                advanced=True,
            ),
            OptionSpec(
                "dynamic_dims",
                "str",
                None,
                say("Shape gears"),
                say(
                    "GE gear mode (graph.ge.dynamicDims with dynamicNodeType=1): sizes for the "
                    "dynamic dims, one group per gear, e.g. 1;2;4;8 for a dynamic batch. Every "
                    "size a request can have must be a gear; many gears lengthen the compile."
                ),
                advanced=True,
                pattern=_GEARS,
            ),
            OptionSpec(
                "ge_input_shape",
                "shape",
                None,
                say("Gear input shapes"),
                say(
                    "graph.ge.inputShape for gear mode, with -1 for geared dims. Automatic: the "
                    "model's input shapes with -1 for every dynamic dim."
                ),
                advanced=True,
            ),
            OptionSpec(
                "target_opset",
                "int",
                checks.SUGGESTED_OPSET,
                say("ONNX opset"),
                say(
                    "Convert the model to this opset when it differs (GE's docs suggest 14; its "
                    "parser takes 11 to 18). 0 keeps the model's opset."
                ),
                minimum=0,
                maximum=checks.PARSER_OPSETS.stop - 1,
                advanced=True,
            ),
            OptionSpec(
                "simplify",
                "bool",
                True,
                say("Simplify graph"),
                say("Run onnxslim (GE's docs recommend a simplified export)."),
            ),
            OptionSpec(
                "atc_preflight",
                "bool",
                True,
                say("ATC pre-flight compile"),
                say(
                    "Where CANN is installed, compile the model once with ATC to catch "
                    "unsupported operators before Triton loads it. Skipped, with a note, when "
                    "CANN is absent or no SoC is chosen."
                ),
            ),
            OptionSpec(
                "soc_version",
                "str",
                None,
                say("Ascend SoC (pre-flight)"),
                say(
                    "The chip ATC compiles the pre-flight check for ('Ascend' + the Name column "
                    "of npu-smi info). GE itself detects the chip at load."
                ),
                choices=SOC_CHOICES,
                pattern=SOC_PATTERN,
            ),
        ]

    def check_options(self, options: dict[str, Any]) -> None:
        """Static graph excludes batching and gears; device ids must be digits and commas."""
        super().check_options(options)
        if options.get("static_model"):
            if options.get("dynamic_batching") is True:
                raise InvalidOptions(
                    say(
                        "Options 'static_model' and 'dynamic_batching' cannot both be on: a "
                        "static GE graph has fixed shapes, so Triton must not form batches. "
                        "Turn one off."
                    )
                )
            if (options.get("max_batch_size") or 0) > 0:
                raise InvalidOptions(
                    say(
                        "Option 'static_model' needs 'max_batch_size' 0: the static graph's "
                        "dims include the batch axis. Set max_batch_size to 0 or turn "
                        "static_model off."
                    )
                )
            if options.get("dynamic_dims"):
                raise InvalidOptions(
                    say(
                        "Options 'static_model' and 'dynamic_dims' (gears) exclude each other; "
                        "gear mode already compiles one static graph per gear. Use one of them."
                    )
                )

        opset = options.get("target_opset")
        opsets = checks.PARSER_OPSETS
        if opset and opset not in opsets:
            raise InvalidOptions(
                say(
                    "Option 'target_opset' is %(opset)s; use 0 (keep the model's opset) or "
                    "%(low)s to %(high)s, the opsets GE parses.",
                    opset=opset,
                    low=opsets.start,
                    high=opsets.stop - 1,
                )
            )

    def resolve_options(self, options: Mapping[str, Any], info: OnnxInfo) -> dict[str, Any]:
        """Static graphs and gear mode default to no batching; gears get an input shape."""
        resolved = dict(options)
        geared_or_static = resolved.get("static_model") or resolved.get("dynamic_dims")
        if geared_or_static and resolved.get("max_batch_size") is None:
            resolved["max_batch_size"] = 0
        resolve_batching(resolved, info, overrides=resolved.get("input_shapes"))
        if resolved.get("dynamic_dims") and not resolved.get("ge_input_shape"):
            resolved["ge_input_shape"] = checks.derived_input_shape(
                info, resolved.get("input_shapes")
            )
        return resolved

    # Checks ---------------------------------------------------------------------

    def check_model(self, info: OnnxInfo, options: Mapping[str, Any]) -> list[Finding]:
        """Every GE rule in the module docstring, as errors and warnings."""
        resolved, found = self.findings_from_options(info, options)
        if resolved is None:
            return found
        overrides = resolved.get("input_shapes")
        found += signature_findings(info, resolved["max_batch_size"], overrides)
        found += checks.type_findings(info)
        found += checks.shape_findings(info, resolved)
        found += checks.output_name_findings(info, overrides)
        found += checks.gear_findings(resolved)
        found += checks.format_findings(info, resolved)
        return found

    # Build ----------------------------------------------------------------------

    def build(self, ctx: BuildContext) -> BuildResult:
        """Writes exactly one self-contained ``workdir/model.onnx``; ATC pre-flight if possible."""
        options = self.parse_options(ctx.options, info=ctx.info)
        steps = ctx.workdir / STEPS_DIR
        steps.mkdir()
        notes: list[Said] = []
        final = ctx.workdir / ARTIFACT
        try:
            current = self._transform(ctx, options, steps, notes)
            ctx.check_cancelled()
            # allow_external=False: the backend reads one file, so weights are embedded.
            optimise.copy_model(current, final, log=ctx.log, allow_external=False)
        finally:
            shutil.rmtree(steps, ignore_errors=True)
        ctx.progress(0.6)
        compiled = inspect_onnx(final)
        commands = self._preflight(ctx, options, final, compiled, notes)
        ctx.progress(1.0)
        return BuildResult(final, ARTIFACT, commands, notes, compiled)

    def _transform(
        self, ctx: BuildContext, options: Mapping[str, Any], steps: Path, notes: list[Said]
    ) -> Path:
        """Fix shapes, convert the opset, simplify; each step into ``steps``."""
        current = ctx.source
        if options.get("input_shapes"):
            ctx.check_cancelled()
            current = optimise.fix_input_shapes(
                current, steps / "shapes.onnx", options["input_shapes"], log=ctx.log
            ).output
        ctx.progress(0.1)
        target_opset = options.get("target_opset")
        if target_opset and ctx.info.default_opset != target_opset:
            ctx.check_cancelled()
            try:
                current = optimise.convert_opset(
                    current, steps / "opset.onnx", target_opset, log=ctx.log
                ).output
                notes.append(f"Converted from opset {ctx.info.default_opset} to {target_opset}.")
            except optimise.OptimiseError as exc:
                # GE may still parse the original opset (11-18), so this is not fatal.
                ctx.log(f"warning: {exc.message!s}; keeping opset {ctx.info.default_opset}")
                notes.append(
                    say(
                        "Opset conversion to %(opset)s failed, so the model keeps opset "
                        "%(kept)s: %(error)s",
                        opset=target_opset,
                        kept=ctx.info.default_opset,
                        error=exc.message,
                    )
                )
        ctx.progress(0.3)
        if options.get("simplify"):
            ctx.check_cancelled()
            try:
                current = optimise.simplify_model(current, steps / "slim.onnx", log=ctx.log).output
            except optimise.OptimiseError as exc:
                ctx.log(f"warning: {exc.message!s}; continuing with the unsimplified graph")
                notes.append(say("Simplification skipped: %(error)s", error=exc.message))
        ctx.progress(0.5)
        return current

    def _preflight(
        self,
        ctx: BuildContext,
        options: Mapping[str, Any],
        model: Path,
        info: OnnxInfo,
        notes: list[Said],
    ) -> list[str]:
        """Compiles ``model`` with ATC where possible; returns the command lines run."""
        if not options.get("atc_preflight"):
            return []
        status = cann_status(dict(ctx.env))
        if not status.available:
            # The reason is a sentence of its own (a message cannot lose its full stop).
            skipped = say(
                "ATC pre-flight skipped: CANN is not available on this worker. %(reason)s "
                "Unsupported operators will only show when Triton loads the model.",
                reason=status.reason,
            )
            ctx.log(str(skipped))
            notes.append(skipped)
            return []
        if not options.get("soc_version"):
            note = "ATC pre-flight skipped: no Ascend SoC was chosen (option soc_version)."
            ctx.log(note)
            notes.append(note)
            return []
        shape, extra = checks.preflight_shape(info, options)
        if shape is None:
            note = (
                "ATC pre-flight skipped: the model has dynamic dims other than the batch axis "
                "and no gears, and ATC needs fixed shapes or gears to compile."
            )
            ctx.log(note)
            notes.append(note)
            return []
        scratch = ctx.workdir / PREFLIGHT_DIR
        scratch.mkdir()
        try:
            atc_options = atc_build.make_atc_options(
                soc_version=options["soc_version"],
                input_shape=shape,
                input_format="ND" if extra else None,
                precision_mode_v2=options.get("precision_mode_v2"),
                extra=extra,
            )
            command, _ = atc_build.compile_with_atc(
                ctx, status, model, scratch / "preflight", scratch, atc_options
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        notes.append("ATC pre-flight compile succeeded (the OM was discarded).")
        return [command]

    # Config ---------------------------------------------------------------------

    def make_config(
        self, name: str, info: OnnxInfo, options: Mapping[str, Any], version: int
    ) -> ModelConfig:
        """``backend: "npu_ge"`` with device_ids, static_model and session./graph. parameters."""
        validate_model_name(name)
        validate_version(version)
        resolved = self.parse_options(options, info=info)
        mbs = resolved["max_batch_size"]
        overrides = resolved.get("input_shapes")
        sizes = symbol_sizes(info, overrides)
        # Order matters: the backend attaches ONNX dim names to config IO by position.
        inputs = config_tensors(info.inputs, batched=mbs > 0, overrides=overrides, sizes=sizes)
        outputs = config_tensors(info.outputs, batched=mbs > 0, overrides=overrides, sizes=sizes)
        parameters = {
            "device_ids": resolved["device_ids"],
            "session.ge.exec.precision_mode_v2": resolved["precision_mode_v2"],
        }
        if resolved.get("static_model"):
            parameters["static_model"] = "1"
        if resolved.get("dynamic_dims"):
            parameters["graph.ge.inputShape"] = checks.shape_text(resolved["ge_input_shape"])
            parameters["graph.ge.dynamicDims"] = resolved["dynamic_dims"]
            parameters["graph.ge.dynamicNodeType"] = "1"
        warmups, _ = warmup_for(inputs, 1)
        return ModelConfig(
            name=name,
            backend=self.backend,
            max_batch_size=mbs,
            inputs=inputs,
            outputs=outputs,
            # Never with a static graph (check_options refuses it; this is the backstop).
            dynamic_batching=None
            if resolved.get("static_model")
            else dynamic_batching_for(resolved),
            instance_count=resolved["instance_count"],
            instance_kind="KIND_CPU",  # ignored by the backend, which only sums the counts
            version_policy_specific=[version],
            parameters=parameters,
            warmup=warmups,
        )

    def status(self, env: Mapping[str, str]) -> TargetStatus:
        """Available when CANN is found; otherwise "needs CANN" with the reason."""
        return atc_build.cann_target_status(
            env,
            say(
                "Packaging works without it, but the ATC pre-flight check is skipped and the "
                "model needs a Triton with the npu_ge backend on an Ascend machine."
            ),
        )

    def verify_plan(self, options: Mapping[str, Any], info: OnnxInfo) -> VerifyPlan:
        """The packaged ONNX runs on the CPU: this checks the graph changes, not GE's numerics."""
        resolved = self.parse_options(options, info=info)
        mbs = resolved["max_batch_size"]
        return VerifyPlan(
            artifact_kind="onnx",
            precision="fp32",
            batch=min(2, mbs) if mbs > 0 else 1,
            input_shapes=resolved.get("input_shapes"),
            note=say(
                "The packaged ONNX is compared with the source on this worker's CPU, which "
                "checks the opset conversion and simplification; GE's own precision "
                "(%(precision)s) on the NPU is not measured here.",
                precision=resolved["precision_mode_v2"],
            ),
        )


def _positive_int(value: object) -> int | None:
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None
