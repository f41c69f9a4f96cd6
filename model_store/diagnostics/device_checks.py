"""Diagnostics checks of the NPUs themselves: their device nodes and what npu-smi reports.

:func:`check_davinci_devices` looks for the ``/dev`` nodes an Ascend process needs;
:func:`check_npu_smi` reads every chip's health and memory use
(docs/npu-smi.md#the-info-table); an npu-smi that could not open the NPU because another
container holds it (dcmi ``-8005``) is said in those words, with the command that turns
container sharing on (:mod:`~model_store.devices.held_elsewhere`). :func:`npus_present` tells
the other checks whether this host has NPUs at all, so that a missing Ascend component is a
problem only where it matters.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from model_store.devices.held_elsewhere import is_npu_smi_held_reason, npu_smi_held_advice
from model_store.devices.npu_smi_lock import NPU_SMI_BUSY
from model_store.devices.reading import NO_NPU_SMI
from model_store.diagnostics.context import (
    Check,
    CheckState,
    DiagnosticsContext,
    make_check,
    worst_state,
)
from model_store.text import Message, Said, joined, say

#: Device memory use (HBM, or memory on chips without HBM) from which the chip is "near full".
MEMORY_WARN_PCT = 90.0


def npus_present(ctx: DiagnosticsContext) -> bool:
    """True when npu-smi lists chips or /dev holds davinci nodes."""
    try:
        report = ctx.device_report()
    except Exception:
        report = {}
    if report.get("available") and report.get("npus"):
        return True
    return bool(_davinci_nodes(ctx))


#: A chip's node: ``davinciN``, or a virtual NPU's ``vdavinciN`` on a host with vNPUs (Ascend
#: Docker Runtime renames it ``davinciN`` in a container; docs/npu-smi.md#virtual-npus-vnpu).
CHIP_NODE = re.compile(r"v?davinci\d+")


def _davinci_nodes(ctx: DiagnosticsContext) -> list[Path]:
    try:
        return sorted(
            (p for p in ctx.dev_dir.glob("*davinci*") if CHIP_NODE.fullmatch(p.name)),
            key=lambda p: (p.name.startswith("v"), int(p.name.removeprefix("v")[len("davinci") :])),
        )
    except OSError:
        return []


_CONTROL_NODES = ("davinci_manager", "devmm_svm", "hisi_hdc")


def node_mode(path: Path) -> str:
    """``/dev/davinci0 crw-rw---- 1000:1000``: what ``ls -ln`` says of a device node."""
    try:
        info = path.stat()
    except OSError as exc:
        return f"{path} ({exc.strerror})"
    return f"{path} {stat.filemode(info.st_mode)} {info.st_uid}:{info.st_gid}"


def check_davinci_devices(ctx: DiagnosticsContext) -> Check:
    """The device nodes an Ascend process needs: ``davinciN`` plus the three control nodes."""
    nodes = _davinci_nodes(ctx)
    present = [n for n in _CONTROL_NODES if (ctx.dev_dir / n).exists()]
    absent = [n for n in _CONTROL_NODES if n not in present]
    listed = [str(p) for p in nodes] + [str(ctx.dev_dir / n) for n in present]
    device_flags = " ".join(f"`--device {ctx.dev_dir / n}`" for n in absent)
    try:
        report = ctx.device_report()
    except Exception:
        report = {}
    chips = len(report.get("npus") or []) if report.get("available") else 0
    if report.get("seen_in") == "triton" and not nodes and not present:
        # WORKER_NPU=off: by design no node here (one container owns the NPU).
        return make_check(
            "davinci_devices",
            "not_applicable",
            say(
                "This worker leaves the NPU to the Triton container (WORKER_NPU=off), so it maps "
                "no device node; Triton's own are checked from inside it (the self-test's "
                "serving_side stage, docs/ascend.md#one-container-owns-the-npu)."
            ),
        )
    if not nodes and not present:
        if chips:
            return make_check(
                "davinci_devices",
                "failing",
                say(
                    "npu-smi lists %(chips)s chip(s) but %(dev)s has no davinci device nodes: "
                    "this process runs without the NPU devices (a container started without "
                    "them?).",
                    chips=chips,
                    dev=str(ctx.dev_dir),
                ),
                say(
                    "Start the container with `--device %(dev)s/davinciN` for each NPU plus "
                    "%(flags)s.",
                    dev=str(ctx.dev_dir),
                    flags=" ".join(f"`--device {ctx.dev_dir / n}`" for n in _CONTROL_NODES),
                ),
            )
        return make_check(
            "davinci_devices",
            "not_applicable",
            say(
                "No Ascend device nodes under %(dev)s (no davinciN, davinci_manager, "
                "devmm_svm or hisi_hdc): no Ascend NPU is visible to this process.",
                dev=str(ctx.dev_dir),
            ),
        )
    if not nodes:
        return make_check(
            "davinci_devices",
            "failing",
            say(
                "%(present)s exist but there is no %(dev)s/davinciN node: "
                "no NPU is usable by this process.",
                present=", ".join(present),
                dev=str(ctx.dev_dir),
            ),
            say(
                "Pass `--device %(dev)s/davinciN` for each NPU Triton should use.",
                dev=str(ctx.dev_dir),
            ),
            listed,
        )
    if absent:
        return make_check(
            "davinci_devices",
            "failing",
            say(
                "%(count)s NPU node(s) present (%(nodes)s) but "
                "%(absent)s missing; ACL cannot open a device without them.",
                count=len(nodes),
                nodes=", ".join(p.name for p in nodes),
                absent=", ".join(absent),
            ),
            say(
                "Add %(flags)s to the container (the GE backend's guide maps all of them).",
                flags=device_flags,
            ),
            listed,
        )
    # All four kinds, control nodes first: ACL opens davinci_manager, devmm_svm and hisi_hdc
    # before any davinciN, and a stock driver makes every one crw-rw---- for its running group
    # (docs/cann.md#device-permissions).
    checked = [ctx.dev_dir / n for n in present] + nodes
    unusable = [p for p in checked if not os.access(p, os.R_OK | os.W_OK)]
    if unusable:
        return make_check(
            "davinci_devices",
            "failing",
            say(
                "The device nodes exist, but this process (uid %(uid)s, groups %(groups)s) "
                "cannot open %(nodes)s: %(modes)s.",
                uid=os.getuid(),
                groups=",".join(str(g) for g in sorted(set(os.getgroups()))) or "none",
                nodes=", ".join(str(p) for p in unusable),
                modes="; ".join(node_mode(p) for p in unusable),
            ),
            say(
                "Give the process the driver's group: find its id with `stat -c %%g "
                "%(manager)s` on the host, set ASCEND_DRIVER_GID to it (compose adds it with "
                "group_add), or add the user to that group (usermod -a -G HwHiAiUser USER)."
                " pyACL, the self-test and npu-smi fail until then.",
                manager=str(ctx.dev_dir / "davinci_manager"),
            ),
            listed,
        )
    return make_check(
        "davinci_devices",
        "ok",
        say(
            "%(count)s NPU node(s) (%(nodes)s) and %(control)s are present.",
            count=len(nodes),
            nodes=", ".join(p.name for p in nodes),
            control=", ".join(_CONTROL_NODES),
        ),
        details=listed,
    )


def _memory_use(chip: Mapping[str, Any]) -> tuple[str, int, int] | None:
    """``(kind, used, total)`` of HBM, else of memory; ``None`` when neither is known."""
    for kind, used, total in (
        ("HBM", "hbm_used_mb", "hbm_total_mb"),
        ("memory", "memory_used_mb", "memory_total_mb"),
    ):
        if chip.get(total):
            return kind, int(chip.get(used) or 0), int(chip[total])
    return None


def _chip_name(chip: Mapping[str, Any]) -> str:
    chip_id = chip.get("chip_id")
    suffix = f" chip {chip_id}" if chip_id is not None else ""
    return f"NPU {chip.get('npu_id')}{suffix} ({chip.get('name', '?')})"


def check_npu_smi(ctx: DiagnosticsContext) -> Check:
    """npu-smi answers; every chip healthy; HBM (or memory) below 90 %."""
    report = ctx.device_report()
    if not report.get("available"):
        reason = report.get("reason") or say("npu-smi gave no answer")
        if isinstance(reason, Message) and reason.template == NO_NPU_SMI.template:
            missing = say("No Ascend NPU on this host (npu-smi not found).")
            return make_check("npu_smi", "not_applicable", missing)
        if isinstance(reason, str) and "not found" in reason:
            # another reader's words, in English: shown as they are, with a capital
            missing = say("%(reason)s.", reason=f"{reason[0].upper()}{reason[1:]}")
            return make_check("npu_smi", "not_applicable", missing)
        if is_npu_smi_held_reason(reason):
            return make_check(
                "npu_smi", "failing", say("%(reason)s.", reason=reason), npu_smi_held_advice()
            )
        if isinstance(reason, Message) and reason.template == NPU_SMI_BUSY.template:
            return make_check(
                "npu_smi",
                "warning",
                say("%(reason)s.", reason=reason),
                say(
                    "Look again in a minute; npu-smi runs one at a time on a host "
                    "(NPU_SMI_LOCK_FILE), and another process held it for the whole wait."
                ),
            )
        return make_check(
            "npu_smi",
            "failing",
            say("npu-smi is installed but gave no table: %(reason)s.", reason=reason),
            say(
                "Run `npu-smi info` by hand on this host. Check that the NPU driver is "
                "installed (/usr/local/Ascend/driver) and, in a container, that "
                "/usr/local/bin/npu-smi, /usr/local/dcmi and the driver's lib64 are mounted."
            ),
        )
    chips: list[Mapping[str, Any]] = list(report.get("npus") or [])
    warnings = [
        say("npu-smi parse note: %(note)s", note=note) for note in report.get("warnings") or []
    ]
    if not chips:
        return make_check(
            "npu_smi",
            "warning",
            say("npu-smi ran but listed no NPU."),
            say(
                "Run `npu-smi info` by hand; the driver may not see the cards (check the driver "
                "install and `lspci`)."
            ),
            warnings,
        )
    states: list[CheckState] = ["ok"]
    found: list[Said] = []
    advice: list[Said] = []
    details: list[Said] = []
    sick = [c for c in chips if c.get("health") != "OK"]
    full = []
    for chip in chips:
        use = _memory_use(chip)
        line = f"{_chip_name(chip)}: health {chip.get('health')}"
        if use:
            kind, used, total = use
            pct = 100.0 * used / total
            line += f", {kind} {used} / {total} MB ({pct:.0f} %)"
            if pct >= MEMORY_WARN_PCT:
                full.append(
                    say(
                        "%(chip)s %(kind)s %(pct)s %% used",
                        chip=_chip_name(chip),
                        kind=kind if kind == "HBM" else say("memory"),
                        pct=f"{pct:.0f}",
                    )
                )
        details.append(line)
    if sick:
        states.append("warning" if all(c.get("health") == "Warning" for c in sick) else "failing")
        found.append(
            say(
                "unhealthy: %(chips)s",
                chips=joined(
                    [
                        say(
                            "%(chip)s reports %(health)s",
                            chip=_chip_name(c),
                            health=c.get("health"),
                        )
                        for c in sick
                    ],
                    ", ",
                ),
            )
        )
        advice.append(
            say(
                "Run `npu-smi info` on the host to see the alarm and check the driver's log; "
                "models placed on that NPU may fail to load or run, so move them elsewhere with "
                "device_ids in config.pbtxt until it is healthy again."
            )
        )
    if full:
        states.append("warning")
        found.append(say("HBM near exhaustion: %(chips)s", chips=joined(full, ", ")))
        advice.append(
            say(
                "The GE backend does not release NPU memory when a model is unloaded, so "
                "repeated reloads may accumulate HBM use: restart Triton at a quiet moment, and "
                "see which processes hold memory with `npu-smi info`."
            )
        )
    if not found:
        found.append(
            say(
                "%(count)s chip(s), all healthy, memory below %(pct)s %%",
                count=len(chips),
                pct=f"{MEMORY_WARN_PCT:.0f}",
            )
        )
    version = f" {report['version']}" if report.get("version") else ""
    return make_check(
        "npu_smi",
        worst_state(states),
        say("npu-smi%(version)s: %(found)s.", version=version, found=joined(found, "; ")),
        joined(advice, " "),
        details + warnings,
    )
