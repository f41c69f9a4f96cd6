"""Stage 6: pyACL loads the OM and classifies the photo on each NPU.

Through :func:`~model_store.ascend.om_runner.run_om`, the worker's own way to run an OM
(``OmSession``, the ``acl`` backend's pyACL code; docs/pyacl.md), once per device: the
``--device`` one, or every NPU pyACL reports. Each must call the photo "espresso".
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from model_store.ascend.npu_owner import why_not_here, worker_runs_pyacl
from model_store.ascend.om_runner import match_outputs, run_om
from model_store.ascend.selftest.context import SelftestContext
from model_store.ascend.selftest.demo import classify
from model_store.ascend.selftest.serving import serve_and_classify
from model_store.ascend.selftest.stage import Outcome, failed, passed
from model_store.errors import ModelStoreError
from model_store.text import Message, Said, joined, say

PYACL_HINT = say(
    "Source CANN's set_env.sh (or set ASCEND_TOOLKIT_HOME) in this shell or container so that "
    "`import acl` finds pyACL in the toolkit's python/site-packages, and check that this "
    "process can open the NPU (/dev/davinciN, /dev/davinci_manager, /dev/devmm_svm, "
    "/dev/hisi_hdc; docs/pyacl.md#lifecycle)."
)


def run_on_npus(ctx: SelftestContext) -> Outcome:
    """``run_om`` on every device under test; each top-1 must be the expected label. Where the
    worker leaves the NPU to Triton (``WORKER_NPU``), pyACL runs it inside Triton instead."""
    om, info = ctx.facts.om, ctx.facts.info
    assert om is not None and info is not None
    devices = ctx.facts.device_ids
    if not devices:
        return failed(
            say("pyACL reports no NPU and npu-smi gave no device ids."), PYACL_HINT, devices=[]
        )
    if not worker_runs_pyacl(ctx.env):
        return run_in_triton(ctx, om, devices)
    labels = ctx.demo.label_list()
    wanted = [t.name for t in info.outputs]
    per_device: list[dict[str, Any]] = []
    problems: list[Message] = []
    for device in devices:
        started = time.monotonic()
        where = f"pyACL, NPU {device}"
        try:
            raw = run_om(om, {info.inputs[0].name: ctx.facts.tensor}, device_id=device)
            outputs, note = match_outputs(wanted, raw)
        except ModelStoreError as exc:
            problems.append(say("NPU %(device)s: %(error)s", device=device, error=exc.message))
            per_device.append({"device": device, "error": exc.message, "code": exc.code})
            continue
        result = classify(where, outputs, wanted[0], labels)
        ctx.facts.classifications[where] = result
        entry = {
            "device": device,
            "seconds": round(time.monotonic() - started, 3),
            "om_outputs": list(raw),
            "top_k": result.top_k,
        }
        if note:
            entry["output_note"] = note
        per_device.append(entry)
        if result.top1_label != ctx.demo.expected_label:
            problems.append(
                say(
                    "NPU %(device)s calls the photo %(found)s, not %(expected)r",
                    device=device,
                    found=result.describe(),
                    expected=ctx.demo.expected_label,
                )
            )
    evidence = {"devices": per_device, "om": str(om)}
    if problems:
        return failed(
            say("%(problems)s.", problems=joined(problems, "; ")),
            PYACL_HINT
            if any("error" in e for e in per_device)
            else say(
                "The OM runs but classifies wrongly: check the SoC stage and ATC's precision "
                "(docs/atc.md#options), and attach this report to a bug report."
            ),
            **evidence,
        )
    shown = _results(ctx, devices)
    return passed(
        say(
            "pyACL ran the OM on %(count)s NPU(s): %(results)s.", count=len(devices), results=shown
        ),
        **evidence,
    )


def run_in_triton(ctx: SelftestContext, om: Path, devices: list[int]) -> Outcome:
    """The OM through the acl backend's pyACL inside the Triton that holds the NPU, one trial
    per device (its ``device_id`` parameter): the same ``OmSession`` code as ``run_om``."""
    cfg = ctx.facts.acl_config
    assert cfg is not None
    per_device: list[dict[str, Any]] = []
    problems: list[Message] = []
    for device in devices:
        where = f"pyACL, NPU {device}"
        one = dataclasses.replace(cfg, parameters={**cfg.parameters, "device_id": str(device)})
        outcome = serve_and_classify(ctx, "acl", one, [om], where=where)
        per_device.append({"device": device, "verdict": outcome.verdict, **outcome.evidence})
        if outcome.verdict != "passed":
            problems.append(say("NPU %(device)s: %(error)s", device=device, error=outcome.summary))
    evidence = {"devices": per_device, "om": str(om), "ran_in": "triton"}
    if problems:
        return failed(say("%(problems)s.", problems=joined(problems, "; ")), PYACL_HINT, **evidence)
    shown = _results(ctx, devices)
    return passed(
        say(
            "pyACL inside the Triton container ran the OM on %(count)s NPU(s): %(results)s. "
            "%(why)s",
            count=len(devices),
            results=shown,
            why=why_not_here(ctx.env),
        ),
        **evidence,
    )


def _results(ctx: SelftestContext, devices: list[int]) -> Said:
    """``NPU 0: espresso (0.97); NPU 1: ...`` from the classifications the runs kept."""
    return joined(
        [
            say(
                "NPU %(device)s: %(result)s",
                device=device,
                result=ctx.facts.classifications[f"pyACL, NPU {device}"].describe(),
            )
            for device in devices
        ],
        "; ",
    )
