"""The stages in order, what each needs, and running them.

A stage runs only when every stage it needs has passed; otherwise it is skipped with
"skipped: needs <stage>" and ``blocked_by`` set, which fails the self-test (it proved nothing).
A stage that raises becomes a failed stage naming the exception, never a crash; only
:class:`~model_store.ascend.selftest.context.InvalidDevice` (a usage error) and Ctrl-C stop
the run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from model_store.ascend.selftest.build import compile_demo
from model_store.ascend.selftest.context import InvalidDevice, SelftestContext
from model_store.ascend.selftest.hardware import check_npus, detect_soc
from model_store.ascend.selftest.npu_run import run_on_npus
from model_store.ascend.selftest.serving import same_top1, serve_acl, serve_npu_ge
from model_store.ascend.selftest.serving_side import check_serving_side
from model_store.ascend.selftest.stage import Stage, StageSpec
from model_store.ascend.selftest.toolchain import check_atc_interpreter, check_cann
from model_store.text import say

#: Every stage, in the order an operator would work through them.
STAGES: tuple[StageSpec, ...] = (
    StageSpec("cann", say("CANN environment and version"), (), check_cann),
    StageSpec("atc_python", say("ATC's Python and packages"), ("cann",), check_atc_interpreter),
    # npu-smi needs only the driver: with a broken CANN the report keeps the hardware evidence.
    StageSpec("npus", say("NPUs (npu-smi)"), (), check_npus),
    StageSpec("soc", say("SoC"), ("npus",), detect_soc),
    StageSpec("serving_side", say("The Triton that serves"), (), check_serving_side),
    StageSpec("atc_compile", say("ATC compiles the demo model"), ("cann", "soc"), compile_demo),
    StageSpec("pyacl", say("pyACL runs it on each NPU"), ("atc_compile",), run_on_npus),
    StageSpec("triton_acl", say("Triton serves it (acl)"), ("atc_compile",), serve_acl),
    StageSpec("triton_npu_ge", say("Triton serves it (npu_ge)"), ("npus",), serve_npu_ge),
    StageSpec("same_top1", say("Same top-1 everywhere"), ("pyacl", "triton_acl"), same_top1),
)

BUG_HINT = say(
    "This is a bug in the self-test, not necessarily in your set-up; the other stages still "
    "ran. Attach the JSON report (--json FILE) to a bug report."
)


def _blocked(spec: StageSpec, done: dict[str, Stage]) -> Stage | None:
    for need in spec.needs:
        stage = done.get(need)
        if stage is None or stage.verdict != "passed":
            title = stage.title if stage else need
            summary = say("skipped: needs %(stage)s", stage=title)
            return Stage(spec.id, spec.title, "skipped", summary, blocked_by=need)
    return None


def run_selftest(
    ctx: SelftestContext,
    *,
    stages: Sequence[StageSpec] = STAGES,
    on_stage: Callable[[Stage], None] = lambda _: None,
    clock: Callable[[], float] = time.monotonic,
) -> list[Stage]:
    """Runs ``stages`` in order; ``on_stage`` gets each result as soon as it is known.

    Raises:
        InvalidDevice: ``ctx.device`` names no NPU of this host (found by the npus or soc
            stage); the stages before it have run, nothing after.
    """
    done: dict[str, Stage] = {}
    for spec in stages:
        stage = _blocked(spec, done)
        if stage is None:
            started = clock()
            try:
                outcome = spec.run(ctx)
            except InvalidDevice:
                raise
            except Exception as exc:
                stage = Stage(
                    spec.id, spec.title, "failed",
                    say(
                        "the stage itself failed: %(error)s: %(message)s",
                        error=type(exc).__name__, message=str(exc),
                    ),
                    BUG_HINT,
                )  # fmt: skip
            else:
                stage = Stage(
                    spec.id, spec.title, outcome.verdict, outcome.summary,
                    outcome.next_step, outcome.evidence,
                )  # fmt: skip
            stage.seconds = clock() - started
        done[spec.id] = stage
        on_stage(stage)
    return list(done.values())


def exit_status(stages: Sequence[Stage]) -> int:
    """0 when every stage passed or does not apply here; 1 otherwise."""
    return 0 if stages and all(stage.acceptable for stage in stages) else 1
