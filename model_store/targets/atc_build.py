"""Compiling an ONNX with ATC for a target: the ATC options, the run and what a failure says.

The ``acl`` target's build is this compile; the ``npu_ge`` target runs it once as a pre-flight
check where CANN is installed, so unsupported operators show up in the build log rather than
when Triton loads the model. ATC itself (environment, command line, log reading) is
``model_store.compile.atc``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from model_store.compile import optimise
from model_store.compile.atc import (
    AtcFailed,
    AtcOptions,
    AtcResult,
    AtcUnavailable,
    CannStatus,
    atc_environment,
    build_atc_command,
    cann_status,
    format_command,
    run_atc,
)
from model_store.compile.atc.options import InvalidAtcOptions, atc_path_problem
from model_store.compile.atc.slots import build_slot
from model_store.targets.base import BuildCancelled, BuildContext, TargetStatus
from model_store.targets.options import InvalidOptions
from model_store.text import Message, Said, say

ATC_TIMEOUT_S = 3600.0
# ATC (and GE's ONNX parser) handle ONNX opsets 11 to 18 (docs/atc.md#onnx-opsets).
ATC_OPSETS = range(11, 19)


def cann_target_status(env: Mapping[str, str], serving_note: Said) -> TargetStatus:
    """TargetStatus of an Ascend target from the CANN probe ("needs CANN: ..." when absent)."""
    status = cann_status(dict(env))
    if status.available:
        found = (
            say(
                "CANN %(version)s found (atc: %(atc)s). %(note)s",
                version=status.version,
                atc=status.atc_path,
                note=serving_note,
            )
            if status.version
            else say("CANN found (atc: %(atc)s). %(note)s", atc=status.atc_path, note=serving_note)
        )
        return TargetStatus(True, found)
    return TargetStatus(
        False, say("needs CANN: %(reason)s %(note)s", reason=status.reason, note=serving_note)
    )


def make_atc_options(
    *,
    soc_version: str,
    input_shape: Mapping[str, Sequence[int]] | None,
    input_format: str | None = None,
    precision_mode: str | None = None,
    precision_mode_v2: str | None = None,
    dynamic_batch_size: Sequence[int] | None = None,
    out_nodes: str | None = None,
    op_select_implmode: str | None = None,
    log: str = "error",
    extra: Mapping[str, str] | None = None,
) -> AtcOptions:
    """Builds ``AtcOptions`` and refuses combinations ATC would reject.

    Raises:
        InvalidOptions: With ATC's own validation messages.
    """
    options = AtcOptions(
        soc_version=soc_version,
        input_shape=_shape_text(input_shape) if input_shape else None,
        input_format=input_format,
        precision_mode=precision_mode,
        precision_mode_v2=precision_mode_v2,
        dynamic_batch_size=list(dynamic_batch_size) if dynamic_batch_size else None,
        out_nodes=out_nodes,
        op_select_implmode=op_select_implmode,
        log=log,
        extra=dict(extra or {}),
    )
    problems = options.validate()
    if problems:
        raise InvalidOptions(
            say("The ATC options are not valid: %(problems)s", problems=" ".join(problems))
        )
    return options


def _shape_text(shape: Mapping[str, Sequence[int]]) -> str:
    """``"x:1,3,224,224;y:1,16"``, ATC's --input_shape syntax."""
    return ";".join(f"{name}:{','.join(map(str, dims))}" for name, dims in shape.items())


def _no_step() -> None:
    return None


def compile_with_atc(
    ctx: BuildContext,
    status: CannStatus,
    model: Path,
    output_stem: Path,
    cwd: Path,
    atc_options: AtcOptions,
    *,
    before_run: Callable[[], None] = _no_step,
) -> tuple[str, Path]:
    """Logs the ATC command, runs it streaming its output to ``ctx.log``, returns (command, om).

    ATC writes scratch files (kernel_meta, fusion_result.json) into its working
    directory, so ``cwd`` should be a scratch directory the caller removes.

    Raises:
        AtcFailed: With ATC's messages and their explanations.
        BuildCancelled: If ``ctx.cancelled()`` turned True while ATC ran.
    """
    if status.atc_path is None:
        raise AtcUnavailable(say("ATC is not available: %(reason)s", reason=status.reason))
    for path, what in ((model, "--model"), (output_stem, "--output")):
        problem = atc_path_problem(path, what)
        if problem:
            raise InvalidAtcOptions(problem)
    argv = build_atc_command(status.atc_path, model, output_stem, atc_options)
    command = format_command(argv)
    ctx.log(command)
    before_run()
    ctx.check_cancelled()
    try:
        with build_slot(ctx.env, log=ctx.log, cancelled=ctx.cancelled):
            result = run_atc(
                argv,
                env=atc_environment(status, dict(ctx.env), log=ctx.log),
                cwd=cwd,
                on_line=ctx.log,
                cancelled=ctx.cancelled,
                timeout=ATC_TIMEOUT_S,
            )
    except InterruptedError:
        raise BuildCancelled(
            "The build was cancelled while it waited for ATC; nothing was kept."
        ) from None
    if result.cancelled:
        raise BuildCancelled("The build was cancelled while ATC was running; nothing was kept.")
    if result.timed_out:
        raise AtcFailed(
            f"ATC did not finish within {ATC_TIMEOUT_S / 60:.0f} minutes and was stopped. "
            "Large models with many gears compile slowly; reduce the gears or try again.",
            result,
        )
    if not result.success or result.om_path is None:
        raise AtcFailed(_failure_message(result), result)
    return command, Path(result.om_path)


def _failure_message(result: AtcResult) -> Message:
    """ATC's exit status and up to five of its error codes, each with its explanation
    (one :func:`~model_store.text.say` sentence nesting the explanations, so a job error keeps
    every template for translation)."""
    said = say("ATC failed (exit status %(status)s).", status=result.returncode)
    for message in result.errors[:5]:
        said = say(
            "%(before)s %(code)s: %(text)s -> %(explanation)s",
            before=said,
            code=message.code,
            text=message.text,
            explanation=message.explanation,
        )
    if not result.errors:
        said = say("%(before)s %(summary)s", before=said, summary=result.summary())
    return said


def convert_for_atc(
    ctx: BuildContext, output: Path, target_opset: int | None, notes: list[Said]
) -> None:
    """Writes the opset-converted model to ``output`` when ATC should read that one."""
    if output == ctx.source or not target_opset:
        return
    try:
        optimise.convert_opset(ctx.source, output, target_opset, log=ctx.log)
    except optimise.OptimiseError as exc:
        raise optimise.OptimiseError(
            say(
                "%(error)s. Export the model with opset %(opset)s (ATC parses %(first)s to "
                "%(last)s) or set target_opset to 0.",
                error=exc.message,
                opset=target_opset,
                first=ATC_OPSETS.start,
                last=ATC_OPSETS.stop - 1,
            )
        ) from exc
    notes.append(f"Converted from opset {ctx.info.default_opset} to {target_opset} for ATC.")
