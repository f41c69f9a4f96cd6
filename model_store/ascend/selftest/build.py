"""Stage 5: ATC compiles the demo model into an OM for the detected SoC.

Through the ``acl`` target exactly as a worker builds a version (``AclTarget.build`` with a
:class:`~model_store.targets.base.BuildContext`: option checks, ATC's environment and Python,
the command line, ``run_atc``, the ``.om`` check; docs/atc.md), and ``AclTarget.make_config``
for the config the Triton stage loads. The input is fixed at batch 1, so the OM needs no gears.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from model_store.ascend.selftest.context import SelftestContext
from model_store.ascend.selftest.demo import photo_tensor
from model_store.ascend.selftest.stage import Outcome, failed, passed
from model_store.compile.atc import AtcFailed, AtcUnavailable, explain
from model_store.config import render_pbtxt
from model_store.errors import ModelStoreError
from model_store.onnx_info import inspect_onnx
from model_store.targets import get_target
from model_store.targets.base import BuildContext
from model_store.text import Said, say

#: The name the trial config is made for (the trial loader renames it: docs/selftest.md).
ACL_MODEL_NAME = "ascend-selftest-acl"
#: How many of ATC's last output lines the report keeps.
LOG_TAIL = 25
#: ATC codes that come from its Python environment (docs/atc.md#python-environment).
_PYTHON_CODES = ("E40001", "E40002", "E40020", "EC0010")


def acl_options(ctx: SelftestContext) -> dict[str, Any]:
    """The acl target's options for the demo: this SoC, batch 1, the first NPU under test."""
    info = ctx.facts.info
    assert info is not None
    tensor = info.inputs[0]
    dims = [d if isinstance(d, int) and d > 0 else 1 for d in tensor.dims or []]
    device = ctx.facts.device_ids[0] if ctx.facts.device_ids else 0
    return {
        "soc_version": ctx.facts.soc,
        "input_shape": f"{tensor.name}:{','.join(map(str, dims))}",
        "device_id": str(device),
    }


def _next_step(exc: AtcFailed) -> Said:
    """What to do about ATC's first error code (its explanation), or where to look."""
    result = exc.result
    codes = [m.code for m in (result.errors if result else []) if m.code]
    if any(code in _PYTHON_CODES for code in codes):
        return say(
            "ATC's Python is not usable: see the 'ATC's Python' stage above, set ATC_PYTHON to "
            "an interpreter that meets CANN's requirements, and run the self-test again "
            "(docs/atc.md#python-environment)."
        )
    if codes:
        return explain(codes[0]) or say(
            "See ATC's last lines in the report (docs/atc.md#error-codes)."
        )
    return say(
        "See ATC's last lines in the report; with --log=info ATC says more "
        "(docs/atc.md#error-codes, docs/cann.md#plog)."
    )


def compile_demo(ctx: SelftestContext) -> Outcome:
    """``AclTarget.build`` on the demo ONNX for ``ctx.facts.soc``; records the OM and config."""
    missing = ctx.demo.missing()
    if missing:
        return failed(
            say("The demo files are missing: %(files)s.", files=", ".join(map(str, missing))),
            say("Reinstall the hub from its repository; demo/ is part of it."),
        )
    info = inspect_onnx(ctx.demo.model)
    ctx.facts.info = info
    _, ctx.facts.tensor = photo_tensor(ctx.demo, info)
    target = get_target("acl")
    options = acl_options(ctx)
    workdir = ctx.scratch / "acl-build"
    workdir.mkdir()
    lines: deque[str] = deque(maxlen=LOG_TAIL)
    commands: list[str] = []

    def log(line: str) -> None:
        if not commands:  # the build logs ATC's command line first (compile_with_atc)
            commands.append(line)
        lines.append(line)

    build = BuildContext(
        source=ctx.demo.model,
        workdir=workdir,
        info=info,
        options=options,
        log=log,
        env=dict(ctx.env),
    )
    evidence: dict[str, Any] = {"options": options, "soc_version": ctx.facts.soc}
    try:
        result = target.build(build)
    except AtcFailed as exc:
        run = exc.result
        evidence |= {
            "command": commands[0] if commands else None,
            "exit_status": run.returncode if run else None,
            "error_codes": [m.code for m in run.errors] if run else [],
            "last_lines": list(lines),
        }
        return failed(exc.message, _next_step(exc), **evidence)
    except AtcUnavailable as exc:
        evidence["last_lines"] = list(lines)
        return failed(exc.message, say("Fix the setting it names, then run again."), **evidence)
    except ModelStoreError as exc:
        evidence["last_lines"] = list(lines)
        return failed(
            say("The acl target refused to build the demo: %(error)s", error=exc.message),
            say(
                "This is a bug in the self-test or the acl target; attach this report to a bug "
                "report."
            ),
            **evidence,
        )
    ctx.facts.om = result.artifact
    config = target.make_config(ACL_MODEL_NAME, info, options, 1)
    ctx.facts.acl_config = config
    size = result.artifact.stat().st_size
    evidence |= {
        "command": result.commands[0] if result.commands else None,
        "om_bytes": size,
        "notes": result.notes,
        "last_lines": list(lines),
        "config_pbtxt": render_pbtxt(config),
    }
    return passed(
        say(
            "ATC built %(artifact)s (%(mb).1f MB) for %(soc)s.",
            artifact=result.artifact_name,
            mb=size / 1e6,
            soc=ctx.facts.soc,
        ),
        **evidence,
    )
