"""Stages 3 and 4: the NPUs as npu-smi reports them, and the SoC to compile for.

The npu-smi report is the product's own (:func:`~model_store.devices.read_devices`, through
the diagnostics context; layouts in docs/npu-smi.md#the-info-table) and so is the judgement of
health and memory (``check_npu_smi``). The SoC is ``"Ascend"`` + the chip's ``Name`` column
(docs/atc.md#soc-versions) and, where pyACL answers, ``acl.get_soc_name()``; the stage says
which it used and refuses when they disagree, since an OM built for another chip does not load.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from model_store.ascend.npu_owner import why_not_here, worker_runs_pyacl
from model_store.ascend.selftest.context import InvalidDevice, SelftestContext
from model_store.ascend.selftest.pyacl_session import device_count, initialised_acl, soc_name
from model_store.ascend.selftest.stage import Outcome, failed, passed
from model_store.backends.acl.model import AclError, AclUnavailable
from model_store.compile.atc import KNOWN_SOC_VERSIONS, SOC_PATTERN
from model_store.devices import soc_of_chip
from model_store.diagnostics import check_npu_smi
from model_store.text import Said, say

DRIVER_HINT = say(
    "Run `npu-smi info` by hand on this host. Check that the NPU driver is installed "
    "(/usr/local/Ascend/driver) and, in a container, that /usr/local/bin/npu-smi, "
    "/usr/local/dcmi, the driver's lib64 and the /dev/davinci* nodes are mapped "
    "(docs/npu-smi.md#where-it-runs)."
)


TRITON_DRIVER_HINT = say(
    "npu-smi ran inside the Triton container, which holds the NPU. Check that it runs as root "
    "(npu-smi in a container is supported for root only), that /usr/local/bin/npu-smi, "
    "/usr/local/dcmi, the driver's lib64 and the /dev/davinci* nodes are mapped into it, and "
    "run `docker compose exec triton npu-smi info` by hand (docs/ascend.md)."
)


def chip_line(chip: Mapping[str, Any]) -> dict[str, Any]:
    """One chip as the report lists it: ids, name, health and device memory."""
    line = {
        key: chip.get(key) for key in ("npu_id", "chip_id", "device_id", "name", "health", "bus_id")
    }
    for kind, used, total in (
        ("hbm", "hbm_used_mb", "hbm_total_mb"),
        ("memory", "memory_used_mb", "memory_total_mb"),
    ):
        if chip.get(total):
            line[f"{kind}_mb"] = f"{chip.get(used) or 0} / {chip.get(total)}"
    return line


def chosen_chips(ctx: SelftestContext) -> list[Mapping[str, Any]]:
    """The chips of npu-smi's report the self-test uses: the ``--device`` one, or all."""
    chips: list[Mapping[str, Any]] = list((ctx.facts.devices or {}).get("npus") or [])
    if ctx.device is None:
        return chips
    same_id = [c for c in chips if c.get("device_id") == ctx.device]
    if same_id:
        return same_id
    # ``--device`` is the id the serving side gives (pyACL's, from 0 in Triton's container);
    # npu-smi there lists the mapped chips in the same order with the host's ids.
    return [chips[ctx.device]] if 0 <= ctx.device < len(chips) else []


def _refuse_device(device: int, known: Sequence[int], where: str) -> InvalidDevice:
    shown = ", ".join(str(d) for d in known) or "none"
    return InvalidDevice(
        say(
            "--device %(device)s names no NPU of this host: %(where)s lists device(s) "
            "%(known)s. Give one of those (the Device column of `npu-smi info`, the id pyACL's "
            "set_device takes), or leave --device out to test every NPU.",
            device=device,
            where=where,
            known=shown,
        )
    )


def check_npus(ctx: SelftestContext) -> Outcome:
    """npu-smi answers and lists chips; every chip healthy; the ``--device`` one exists."""
    diag = ctx.diagnostics()
    report = diag.device_report()
    ctx.facts.devices = report
    seen_in_triton = report.get("seen_in") == "triton"
    chips: list[Mapping[str, Any]] = list(report.get("npus") or [])
    evidence: dict[str, Any] = {
        "npu_smi_version": report.get("version"),
        "chips": [chip_line(c) for c in chips],
        "warnings": list(report.get("warnings") or []),
        "seen_in": "triton" if seen_in_triton else "worker",
    }
    hint = TRITON_DRIVER_HINT if seen_in_triton else DRIVER_HINT
    if not report.get("available"):
        return failed(
            say("npu-smi gave no table: %(reason)s.", reason=report.get("reason")), hint, **evidence
        )
    if not chips:
        return failed(say("npu-smi ran but listed no NPU."), hint, **evidence)
    known = [int(c["device_id"]) for c in chips if c.get("device_id") is not None]
    # --device is checked against pyACL's count in the next stage: in a container npu-smi
    # prints the host's ids, pyACL numbers the mapped chips from 0 (docs/selftest.md).
    if ctx.device is not None and not 0 <= ctx.device < len(chips) and ctx.device not in known:
        raise _refuse_device(ctx.device, list(range(len(chips))), "npu-smi")
    check = check_npu_smi(diag)
    evidence["check"] = check.to_dict()
    if check.state == "failing":
        return failed(check.found, check.advice, **evidence)
    names = sorted({str(c.get("name")) for c in chips})
    version = f"npu-smi {report['version']}" if report.get("version") else "npu-smi"
    ids = ", ".join(map(str, known))
    summary = (
        say(
            "%(tool)s: %(count)s chip(s) (%(names)s), device ids %(ids)s, all healthy.",
            tool=version,
            count=len(chips),
            names=", ".join(names),
            ids=ids,
        )
        if ids
        else say(
            "%(tool)s: %(count)s chip(s) (%(names)s), device ids unknown, all healthy.",
            tool=version,
            count=len(chips),
            names=", ".join(names),
        )
    )
    if check.state == "warning":
        summary = say("%(summary)s Note: %(note)s", summary=summary, note=check.found)
    if seen_in_triton:
        summary = say("%(summary)s (Read inside the Triton container.)", summary=summary)
    return passed(summary, **evidence)


def _pyacl_view(ctx: SelftestContext) -> tuple[str | None, int | None, Said]:
    """``(SoC, device count, why pyACL did not answer)`` from pyACL: the worker's own where it
    may open the NPU, else the one beside Triton (the serving side's facts)."""
    if not worker_runs_pyacl(ctx.env):
        acl = (ctx.serving_facts() or {}).get("pyacl") or {}
        if acl.get("working"):
            return acl.get("soc"), acl.get("device_count"), ""
        return None, None, str(acl.get("error") or why_not_here(ctx.env))
    try:
        acl = initialised_acl()
        return soc_name(acl), device_count(acl), ""
    except (AclUnavailable, AclError) as exc:
        return None, None, str(exc)
    except Exception as exc:  # a broken pyACL install must not hide what npu-smi says
        return (
            None,
            None,
            say("pyACL failed: %(error)s: %(message)s", error=type(exc).__name__, message=str(exc)),
        )


def detect_soc(ctx: SelftestContext) -> Outcome:
    """ATC's ``--soc_version`` for the NPUs under test, from npu-smi and pyACL."""
    chips = chosen_chips(ctx)
    names = sorted({str(c.get("name")) for c in chips if c.get("name")})
    # An Atlas A3 table (``Chip  Phy-ID``) names the family, ``Ascend910``, not the SoC
    # (``Ascend910_9391`` ...): there npu-smi gives none and pyACL's answer is the one.
    named = [c for c in chips if c.get("name")]
    from_smi = soc_of_chip(named[0]) if len(names) == 1 else None
    family_only = len(names) == 1 and from_smi is None
    from_acl, count, why_not = _pyacl_view(ctx)
    ctx.facts.acl_device_count = count
    if count is not None and ctx.device is not None and not 0 <= ctx.device < count:
        raise _refuse_device(ctx.device, list(range(count)), "pyACL (acl.rt.get_device_count)")
    if ctx.device is not None:
        ctx.facts.device_ids = [ctx.device]
    elif count is not None:
        ctx.facts.device_ids = list(range(count))
    else:
        ctx.facts.device_ids = sorted(
            {int(c["device_id"]) for c in chips if c.get("device_id") is not None}
        )
    evidence: dict[str, Any] = {
        "npu_smi_chip_names": names,
        "from_npu_smi": from_smi,
        "npu_smi_names_the_family_only": family_only,
        "from_pyacl": from_acl,
        "pyacl_device_count": count,
        "pyacl_unavailable": why_not or None,
        "devices_under_test": ctx.facts.device_ids,
    }
    if len(names) > 1:
        return failed(
            say(
                "The NPUs are of different kinds (%(names)s); one OM runs on one SoC only.",
                names=", ".join(names),
            ),
            say(
                "Run the self-test once per kind with --device N (N from the Device column of "
                "`npu-smi info`)."
            ),
            **evidence,
        )
    if from_smi and from_acl and from_smi != from_acl:
        return failed(
            say(
                "npu-smi says the chip is %(name)s (%(from_smi)s) but pyACL says %(from_acl)s: "
                "the driver and the CANN runtime disagree about this host.",
                name=names[0],
                from_smi=from_smi,
                from_acl=from_acl,
            ),
            say(
                "Check that the installed driver and CANN toolkit are the ones for this card "
                "(`npu-smi info`, the toolkit's ascend_toolkit_install.info), and in a container "
                "that the host's driver is mounted (docs/cann.md#install-layouts)."
            ),
            **evidence,
        )
    soc = from_acl or from_smi
    if soc is None and family_only:
        return failed(
            say(
                "npu-smi names the chips %(name)s, the family and not the SoC (an Atlas A3 "
                "table), and pyACL, which names the SoC, did not answer.",
                name=names[0],
            ),
            say(
                "Make pyACL answer (the serving_side stage says why it did not), or read the "
                "SoC from `npu-smi info -t board -i N -c C` (docs/atc.md#soc-versions) and "
                "report that output with this report."
            ),
            **evidence,
        )
    if soc is None:
        return failed(
            say("Neither npu-smi nor pyACL named the chip."),
            DRIVER_HINT,
            **evidence,
        )
    source: Said
    if from_acl and from_smi:
        source = say("npu-smi and pyACL, which agree")
    elif from_smi:
        # Why pyACL did not answer is in the evidence (pyacl_unavailable); it can be long.
        source = (
            say("npu-smi's chip name (pyACL did not answer)")
            if why_not
            else say("npu-smi's chip name (this pyACL has no get_soc_name)")
        )
    else:
        source = say("pyACL (acl.get_soc_name)")
    evidence["source"] = source
    if not re.fullmatch(SOC_PATTERN, soc):
        return failed(
            say(
                "The chip is %(soc)s (%(source)s), which is not the form of an Ascend SoC name "
                "('Ascend', three digits, then the chip's letters and digits).",
                soc=soc,
                source=source,
            ),
            say(
                "Atlas A3 products name their SoC in `npu-smi info -t board -i N -c C` instead "
                "(docs/atc.md#soc-versions); report the output of that command and of "
                "`npu-smi info` with this report."
            ),
            **evidence,
        )
    ctx.facts.soc, ctx.facts.soc_source = soc, source
    if soc not in KNOWN_SOC_VERSIONS:
        # The runtime's own name wins over the hub's list (a 910B4-1, a newer chip): ATC, which
        # looks for the name's platform file, is the judge in the next stages.
        evidence["not_in_the_hubs_list"] = True
        return passed(
            say(
                "SoC %(soc)s, from %(source)s. The hub's list of SoCs does not have it yet; ATC "
                "decides whether it can build for it.",
                soc=soc,
                source=source,
            ),
            **evidence,
        )
    return passed(say("SoC %(soc)s, from %(source)s.", soc=soc, source=source), **evidence)
