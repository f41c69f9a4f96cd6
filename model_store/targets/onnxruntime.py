"""The ``onnxruntime`` target: an optimised ``model.onnx`` served by ONNX Runtime on the CPU.

The version directory holds ``model.onnx`` (plus ``model.onnx.data`` for
models over 2 GiB) and config.pbtxt says ``backend: "onnxruntime"``, which the
embedded Triton runs through our Python-based backend and any NGC Triton runs
through its C++ onnxruntime backend, unchanged.

Build: [fix input shapes] -> [simplify (onnxslim)] -> [FP16] -> ONNX Runtime
offline optimisation -> ``workdir/model.onnx``. FP16 comes before the ONNX
Runtime pass (not after) so that ONNX Runtime fuses only what it has kernels
for at the final precision.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from model_store.compile import optimise
from model_store.config import ModelConfig
from model_store.names import validate_model_name, validate_version
from model_store.onnx_info import OnnxInfo, inspect_onnx
from model_store.targets.base import BuildContext, BuildResult, Target, TargetStatus, VerifyPlan
from model_store.targets.batching import (
    SCHEDULING_OPTIONS,
    batching_specs,
    dynamic_batching_for,
    instance_count_spec,
)
from model_store.targets.findings import Finding, warning
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


class OnnxRuntimeTarget(Target):
    """CPU serving with ONNX Runtime; the embedded default."""

    name = "onnxruntime"
    label = say("CPU (ONNX Runtime)")
    description = say("An optimised ONNX model served by ONNX Runtime on the CPU.")
    backend = "onnxruntime"
    artifact_name = ARTIFACT
    needs_cann = False
    hardware_verified = True
    # The optimised file keeps its dynamic batch axis whatever Triton batches it to (fixed
    # input shapes, which would change that, are a build option).
    config_only_options = SCHEDULING_OPTIONS

    def option_specs(self) -> list[OptionSpec]:
        """simplify, ort_optimization_level, fp16, input_shapes, batching, instance_count."""
        return [
            OptionSpec(
                "simplify",
                "bool",
                True,
                say("Simplify graph"),
                say(
                    "Run onnxslim: fold constants, remove dead and no-op nodes. Safe for almost "
                    "every model; turn off if the build fails in this step."
                ),
            ),
            OptionSpec(
                "ort_optimization_level",
                "choice",
                "basic",
                say("ONNX Runtime optimisation"),
                say(
                    "Offline graph optimisation saved into the file. 'basic' uses standard ONNX "
                    "operators only, so the file runs on any onnxruntime backend, including the "
                    "C++ one in NGC Triton images. 'extended' adds ONNX Runtime's fused contrib "
                    "operators, which need an ONNX Runtime at least as new as this worker's at "
                    "serve time. 'all' also adds layouts tuned to this worker's CPU; use it only "
                    "when the serving CPU is the same."
                ),
                choices=[
                    ("disabled", say("Disabled (save the graph as is)")),
                    ("basic", say("Basic (constant folding, redundant nodes)")),
                    ("extended", say("Extended (adds fused operators)")),
                    ("all", say("All (adds CPU-specific layouts; risky on other machines)")),
                ],
            ),
            OptionSpec(
                "fp16",
                "bool",
                False,
                say("FP16 weights and compute"),
                say(
                    "Convert float32 weights and operators to float16; inputs and outputs stay "
                    "float32. Halves the file; on most x86 CPUs it is slower, and results differ "
                    "slightly (verified with FP16 tolerances)."
                ),
            ),
            OptionSpec(
                "input_shapes",
                "shape",
                None,
                say("Fixed input shapes"),
                say(
                    "Fix dynamic input dims, e.g. input:1,3,224,224 (several inputs separated "
                    "by ';'). Fixing the first axis turns batching off."
                ),
                advanced=True,
            ),
            *batching_specs(),
            instance_count_spec(
                say(
                    "Model instances Triton runs in parallel on the CPU (each uses its own "
                    "threads). 1 is right for most machines."
                )
            ),
        ]

    def check_options(self, options: dict[str, Any]) -> None:
        """Batching rules, and fixed shapes must really be fixed (no -1)."""
        super().check_options(options)
        for name, dims in (options.get("input_shapes") or {}).items():
            if any(d < 1 for d in dims):
                raise InvalidOptions(
                    say(
                        "Option 'input_shapes': %(name)s has %(dims)s; fixed shapes need every "
                        "dim >= 1 (leave an input out to keep its dims dynamic).",
                        name=repr(name),
                        dims=str(dims),
                    )
                )

    def check_model(self, info: OnnxInfo, options: Mapping[str, Any]) -> list[Finding]:
        """Signature problems, plus warnings about FP16 on CPU and CPU-specific layouts."""
        resolved, found = self.findings_from_options(info, options)
        if resolved is None:
            return found
        found += signature_findings(info, resolved["max_batch_size"], resolved["input_shapes"])
        if resolved["ort_optimization_level"] == "all":
            found.append(
                warning(
                    "cpu_specific_optimisation",
                    say(
                        "Optimisation level 'all' writes layout transformations chosen for this "
                        "worker's CPU into the model file."
                    ),
                    say(
                        "Use 'extended' unless Triton runs on the same kind of CPU as this worker."
                    ),
                )
            )
        if resolved["fp16"]:
            found.append(
                warning(
                    "fp16_on_cpu",
                    say(
                        "FP16 halves the model size, but most x86 CPUs have no fast FP16 "
                        "arithmetic, so inference is usually slower than in FP32."
                    ),
                    say(
                        "Keep FP32 unless the file size matters more than speed; the FP16 "
                        "result is verified with looser tolerances."
                    ),
                )
            )
        return found

    def build(self, ctx: BuildContext) -> BuildResult:
        """Writes ``workdir/model.onnx`` (and ``model.onnx.data`` only for > 2 GiB models)."""
        options = self.parse_options(ctx.options, info=ctx.info)
        steps = ctx.workdir / STEPS_DIR
        steps.mkdir()
        notes: list[Said] = []
        try:
            current = self._prepare(ctx, options, steps, notes)
            final = ctx.workdir / ARTIFACT
            level = options["ort_optimization_level"]
            ctx.check_cancelled()
            if level == "disabled":
                optimise.copy_model(current, final, log=ctx.log)
            else:
                optimise.ort_optimise(current, final, level, log=ctx.log)
                notes.append(f"ONNX Runtime offline optimisation at level '{level}'.")
            ctx.progress(0.95)
        finally:
            shutil.rmtree(steps, ignore_errors=True)
        compiled = inspect_onnx(final)
        ctx.progress(1.0)
        return BuildResult(final, ARTIFACT, [], notes, compiled)

    def _prepare(
        self, ctx: BuildContext, options: Mapping[str, Any], steps: Path, notes: list[Said]
    ) -> Path:
        """Shape fixing, simplification and FP16, each into ``steps``; returns the last file."""
        current = ctx.source
        if options["input_shapes"]:
            ctx.check_cancelled()
            current = optimise.fix_input_shapes(
                current, steps / "shapes.onnx", options["input_shapes"], log=ctx.log
            ).output
            notes.append("Input shapes fixed: " + _shapes_text(options["input_shapes"]) + ".")
        ctx.progress(0.1)
        if options["simplify"]:
            ctx.check_cancelled()
            try:
                current = optimise.simplify_model(current, steps / "slim.onnx", log=ctx.log).output
            except optimise.OptimiseError as exc:
                # Simplification is an optimisation: its failure must not block serving.
                ctx.log(f"warning: {exc.message!s}; continuing with the unsimplified graph")
                notes.append(say("Simplification skipped: %(error)s", error=exc.message))
        ctx.progress(0.5)
        if options["fp16"]:
            ctx.check_cancelled()
            current = optimise.to_fp16(current, steps / "fp16.onnx", log=ctx.log).output
            notes.append("Converted to FP16 (inputs and outputs stay FP32).")
        ctx.progress(0.7)
        return current

    def make_config(
        self, name: str, info: OnnxInfo, options: Mapping[str, Any], version: int
    ) -> ModelConfig:
        """``backend: "onnxruntime"``, KIND_CPU instances, batching and one warm-up request."""
        validate_model_name(name)
        validate_version(version)
        resolved = self.parse_options(options, info=info)
        mbs = resolved["max_batch_size"]
        overrides = resolved["input_shapes"]
        sizes = symbol_sizes(info, overrides)
        inputs = config_tensors(info.inputs, batched=mbs > 0, overrides=overrides, sizes=sizes)
        outputs = config_tensors(info.outputs, batched=mbs > 0, overrides=overrides, sizes=sizes)
        warmups, _ = warmup_for(inputs, 1)
        return ModelConfig(
            name=name,
            backend=self.backend,
            max_batch_size=mbs,
            inputs=inputs,
            outputs=outputs,
            dynamic_batching=dynamic_batching_for(resolved),
            instance_count=resolved["instance_count"],
            instance_kind="KIND_CPU",
            version_policy_specific=[version],
            warmup=warmups,
        )

    def status(self, env: Mapping[str, str]) -> TargetStatus:
        """Always available: ONNX Runtime is a dependency of the hub."""
        return TargetStatus(True, "Runs on the CPU with ONNX Runtime; nothing else is needed.")

    def verify_plan(self, options: Mapping[str, Any], info: OnnxInfo) -> VerifyPlan:
        """Run both files on the CPU; FP16 builds get FP16 tolerances."""
        resolved = self.parse_options(options, info=info)
        mbs = resolved["max_batch_size"]
        return VerifyPlan(
            artifact_kind="onnx",
            precision="fp16" if resolved["fp16"] else "fp32",
            batch=min(2, mbs) if mbs > 0 else 1,
            input_shapes=resolved["input_shapes"],
            note=say("Source and built model both run with ONNX Runtime on this worker's CPU."),
        )


def _shapes_text(shapes: Mapping[str, list[int]]) -> str:
    """``"x:1,3,224,224; y:1,16"``."""
    return "; ".join(f"{name}:{','.join(map(str, dims))}" for name, dims in shapes.items())
