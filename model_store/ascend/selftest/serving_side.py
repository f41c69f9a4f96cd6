"""The stage between the two sides: what the Triton that serves has, against this worker's view.

In compose the worker compiles and verifies with the host's CANN while Triton loads models with
its image's own (docs/ascend.md#the-serving-side). The stage asks that Triton from inside
(:func:`~model_store.serving.facts.ask_serving_side`) and compares, so that a mismatch is found
here, in words, rather than as a failed load later:

* the CANN beside Triton must be at least as new as the worker's, which builds the OMs
  (docs/cann.md#version-compatibility);
* the host's NPU driver must be one that CANN supports (docs/cann.md#driver-and-cann): too old
  fails the stage; a driver or CANN the table cannot judge is a note in the evidence
  (``driver``);
* where Triton has the ``acl`` backend, pyACL must import and initialise beside it, its SoC must
  be this host's, and the stub's Python must be new enough for the backend (3.10);
* the NPUs under test must be device ids that Triton's pyACL counts (a container numbers its
  devices from 0; docs/npu-smi.md).

What the Triton side said is kept for the ``npu_ge`` stage: whether that Triton has the GE
backend at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from model_store.ascend.selftest.context import SelftestContext
from model_store.ascend.selftest.stage import Outcome, failed, not_applicable, passed
from model_store.cann_versions import skew
from model_store.compile.atc.environment import version_in_info_file
from model_store.driver_compat import DriverCheck, check_driver
from model_store.serving.restart_needed import needs_restart
from model_store.text import Message, joined, say


def check_serving_side(ctx: SelftestContext) -> Outcome:
    """Ask the serving Triton what it has; compare its CANN, pyACL, SoC and devices."""
    if ctx.runtime is None:
        return not_applicable(say("Not applicable: no Triton is configured for the hub."))
    facts = ctx.serving_facts() or {}
    evidence: dict[str, Any] = {"serving": facts}
    if not facts.get("available"):
        return failed(
            facts.get("reason") or say("The Triton that serves did not answer."),
            say(
                "Check that Triton at %(url)s is up and has its Python backend (the hub's acl "
                "and onnxruntime backends need it too).",
                url=ctx.triton_url(),
            ),
            **evidence,
        )
    driver = driver_check(ctx, facts)
    evidence["driver"] = {**driver.as_dict(), "message": str(driver.message)}
    problems = _problems(ctx, facts)
    if driver.state == "too_old":
        problems.append(driver.message)
    if problems:
        return failed(joined(problems), say("Fix the serving side as each point says."), **evidence)
    numbering = facts.get("numbering") or {}
    if numbering.get("agree") is False:
        return passed(
            say(
                "%(summary)s Note: pyACL counts %(count)s device(s) but %(nodes)s NPU node(s) "
                "are mapped into Triton's container; the hub's device ids are pyACL's "
                "(docs/ascend.md#device-ids).",
                summary=_summary(ctx, facts),
                count=numbering.get("pyacl_count"),
                nodes=len(numbering.get("nodes") or []),
            ),
            **evidence,
        )
    return passed(_summary(ctx, facts), **evidence)


def _summary(ctx: SelftestContext, facts: dict[str, Any]) -> Message:
    cann = facts.get("cann") or {}
    pyacl = facts.get("pyacl") or {}
    return say(
        "Triton at %(url)s: CANN %(cann)s beside it (this worker's: %(worker)s), pyACL "
        "%(pyacl)s, backends %(backends)s, stub Python %(python)s.",
        url=ctx.triton_url(),
        cann=cann.get("version") or say("not found"),
        worker=_worker_cann(ctx) or say("unknown"),
        pyacl=say(
            "%(soc)s with %(count)s device(s)",
            soc=pyacl.get("soc") or "?",
            count=pyacl.get("device_count"),
        )
        if pyacl.get("working")
        else say("not working there"),
        backends=", ".join(sorted(facts.get("backends") or {})) or "-",
        python=facts.get("python") or "?",
    )


def _worker_cann(ctx: SelftestContext) -> str | None:
    return ctx.facts.cann.version if ctx.facts.cann is not None else None


def host_driver(ctx: SelftestContext) -> str | None:
    """The host's NPU driver: ``<ascend root>/driver/version.info``, else npu-smi's ``Version``
    (the ``npus`` stage's report), else the one Triton's npu-smi gave."""
    found = version_in_info_file(ctx.ascend_root / "driver" / "version.info")
    if found:
        return found
    for devices in (ctx.facts.devices, (ctx.facts.serving or {}).get("devices")):
        version = devices.get("version") if isinstance(devices, Mapping) else None
        if isinstance(version, str) and version.strip():
            return version.strip()
    return None


def driver_check(ctx: SelftestContext, facts: dict[str, Any]) -> DriverCheck:
    """The host's driver against the CANN that serves (beside Triton, else this worker's)."""
    serving = (facts.get("cann") or {}).get("version") or _worker_cann(ctx)
    return check_driver(host_driver(ctx), serving)


def _problems(ctx: SelftestContext, facts: dict[str, Any]) -> list[Message]:
    problems: list[Message] = []
    wedged = needs_restart(ctx.store)
    if wedged:
        problems.append(
            say(
                "Triton needs a restart: the npu_ge load of %(model)s failed (%(reason)s), and the "
                "GE backend takes no other npu_ge load until Triton restarts",
                model=wedged.get("model"),
                reason=str(wedged.get("reason"))[:300],
            )
        )
    cann = facts.get("cann") or {}
    worker = _worker_cann(ctx)
    if cann.get("version") and worker:
        found = skew(worker, cann["version"])
        if found.state == "too_new":
            problems.append(
                say(
                    "This worker builds with CANN %(worker)s but Triton loads with CANN "
                    "%(serving)s: an OM built here must not run there (rebuild the Triton image "
                    "with CANN %(worker)s or newer, or build with the Triton's CANN)",
                    worker=worker,
                    serving=cann["version"],
                )
            )
    backends = facts.get("backends") or {}
    pyacl = facts.get("pyacl") or {}
    if "acl" in backends:
        if not pyacl.get("working"):
            problems.append(
                say(
                    "Triton has the acl backend but pyACL does not work beside it (%(error)s)",
                    error=pyacl.get("error") or say("not importable"),
                )
            )
        if facts.get("python_ok") is False:
            problems.append(
                say(
                    "Triton's Python backend stub runs Python %(python)s; the acl backend needs "
                    "3.10 or newer (deploy/triton/README.md)",
                    python=facts.get("python"),
                )
            )
    soc = pyacl.get("soc")
    if soc and ctx.facts.soc and soc != ctx.facts.soc:
        problems.append(
            say(
                "Triton's pyACL says the chip is %(serving)s, this worker found %(worker)s",
                serving=soc,
                worker=ctx.facts.soc,
            )
        )
    closed = [n for n in facts.get("device_nodes") or [] if n.get("openable") is False]
    if closed:
        problems.append(
            say(
                "Triton's process (uid %(uid)s) cannot open %(nodes)s: run the triton service "
                "as root (user 0:0, as the hub's compose files do) or add the driver's group",
                uid=facts.get("uid"),
                nodes=", ".join(f"{n.get('path')} {n.get('mode')}" for n in closed),
            )
        )
    count = pyacl.get("device_count")
    wanted = ctx.facts.device_ids
    if isinstance(count, int) and wanted and max(wanted) >= count:
        problems.append(
            say(
                "NPU %(ids)s is under test, but Triton's pyACL counts %(count)s device(s), "
                "numbered from 0 in its container: use --device with an id below %(count)s",
                ids=", ".join(str(i) for i in wanted if i >= count),
                count=count,
            )
        )
    return problems
