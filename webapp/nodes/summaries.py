"""The nodes the hub knows: who they are, what they last reported, and their state.

A node is one Triton, the repository it reads and a worker on its host (docs/nodes.md#built).
``local`` is the stack's own worker, which records its report directly
(:func:`webapp.nodes.host_reports.probe_and_record`); any other node posts its report with its
node token (``POST /api/v1/nodes/{name}/reports``, :func:`accept_report`). The newest report
of each node is its :class:`~webapp.nodes.models.HostReport` row.

State, from the hub's clock (a node's clock may be wrong, so the time the hub *received* the
report counts, not the ``made_at`` the node wrote):

* ``draining``: an operator flagged it (nothing new is to be placed on it);
* ``down``: no report for ``3 x HOST_PROBE_SECONDS``, never reported, or its last report was
  refused (``refused_reason`` says why);
* ``up`` otherwise.

``driver`` compares the node's NPU driver with the CANN that serves there, from the same report
(:func:`model_store.driver_compat.check_host_report`; docs/cann.md#driver-and-cann): the Nodes
page warns when the driver is too old for it.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext, gettext_noop

from model_store.devices import soc_of_chip
from model_store.driver_compat import check_host_report
from model_store.host_report import PROTOCOL
from model_store.text import Message, Said
from webapp.errors import HubError
from webapp.hub_version import OTHER_PROTOCOL, incompatibility
from webapp.nodes import host_reports
from webapp.nodes import tokens as node_scope
from webapp.nodes.models import HostReport, Node
from webapp.text import localize

DOWN_AFTER_INTERVALS = 3
#: A report is a few KiB (a few NPUs, a dozen checks); 256 KiB leaves room for a big host.
MAX_REPORT_BYTES = 256 * 1024
# The model names' rules (model_store.names): the name is a queue name and a directory.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
#: In English (marked): say it with ``gettext(NAME_RULES)``.
NAME_RULES = gettext_noop(
    "A node name uses letters, digits, '_', '-' and '.', starts with a letter or digit and has "
    "at most 64 characters."
)


def check_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name) or ".." in name:
        shown = repr(name)[:40] if isinstance(name, str) else type(name).__name__
        message = gettext("%(name)s is not a node name. %(rules)s")
        raise HubError(message % {"name": shown, "rules": gettext(NAME_RULES)}, "invalid_name")
    return name


def down_after_s() -> float:
    return float(DOWN_AFTER_INTERVALS * settings.HOST_PROBE_SECONDS)


# --------------------------------------------------------------------------- reading


def get(name: str) -> Node:
    node = Node.objects.filter(name=check_name(name)).first()
    if node is None:
        raise HubError(
            gettext("There is no node %(name)s.") % {"name": repr(name)}, "not_found", 404
        )
    return node


def summaries() -> list[dict[str, Any]]:
    """Every node as ``GET /api/v1/nodes`` shows it (two queries, whatever the count)."""
    nodes = list(Node.objects.all())
    reports = {r.node: r for r in HostReport.objects.filter(node__in=[n.name for n in nodes])}
    now = timezone.now()
    return [summary(n, reports.get(n.name), now) for n in nodes]


def summary_of(name: str) -> dict[str, Any]:
    node = get(name)
    return summary(node, HostReport.objects.filter(node=node.name).first(), timezone.now())


def state(node: Node, report: HostReport | None, now: datetime) -> str:
    if node.draining:
        return "draining"
    if report is None or node.refused_reason:
        return "down"
    return "down" if (now - report.received).total_seconds() > down_after_s() else "up"


def summary(node: Node, report: HostReport | None, now: datetime) -> dict[str, Any]:
    data = report.data if report else {}
    devices = _object(data.get("devices"))
    npus = [n for n in devices.get("npus") or [] if isinstance(n, dict)]
    cann = _object(data.get("cann"))
    soc = soc_of(npus, data)
    derived = {"soc": soc} if soc else {}
    if cann.get("version"):
        derived["cann"] = str(cann["version"])
    return {
        "name": node.name,
        "state": state(node, report, now),
        "triton": {k: node.triton.get(k) for k in ("http", "grpc", "metrics")},
        "soc": soc,
        "cann_version": cann.get("version"),
        "devices": npus,
        # The driver against the serving CANN; ``message`` is a message (pages: ``|translated``).
        "driver": check_host_report(data).as_dict() if report else None,
        # What the node's operator declared, and what its report shows (facts win).
        "labels": {**node.labels, **derived},
        "draining": node.draining,
        "host": data.get("host"),
        "hub_version": node.hub_version or None,
        "last_report_at": report.received.isoformat() if report else None,
        "last_report_age_s": round((now - report.received).total_seconds(), 1) if report else None,
        # A message (pages: ``|translated``; answers: webapp.text.localized).
        "refused_reason": node.refused_reason or None,
        "refused_at": node.refused_at.isoformat() if node.refused_at else None,
    }


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def soc_of(npus: list[dict[str, Any]], report: dict[str, Any] | None = None) -> str | None:
    """The SoC as ATC's ``--soc_version`` names it (``Ascend310P3``).

    From npu-smi's chip name (``310P3``, docs/npu-smi.md#the-info-table) where that is a full
    SoC name; else, where the node's ``report`` carries it, the SoC pyACL named beside Triton
    (``report["serving"]["pyacl"]["soc"]``, ``acl.get_soc_name()``). An Atlas A3 table
    (``Chip  Phy-ID``) names only the family, ``Ascend910``, so there pyACL's
    ``Ascend910_9391`` (or its kin) is the answer. None when neither names it.
    """
    for npu in npus:
        if str(npu.get("name") or "").strip():
            from_table = soc_of_chip(npu)
            if from_table:
                return from_table
            break
    serving = _object((report or {}).get("serving"))
    soc = _object(serving.get("pyacl")).get("soc")
    return str(soc) if isinstance(soc, str) and soc.strip() else None


# --------------------------------------------------------------------------- a node's report


def refusal(body: dict[str, Any]) -> Message | None:
    """Why the hub cannot work with the node that sent ``body``, or None.

    Only well-typed values are judged here; a wrong type is the body check's 400.
    """
    protocol = body.get("protocol")
    if isinstance(protocol, int) and not isinstance(protocol, bool) and protocol != PROTOCOL:
        return Message(OTHER_PROTOCOL, {"theirs": protocol, "ours": PROTOCOL})
    about = body.get("node")
    version = about.get("hub_version") if isinstance(about, dict) else None
    if isinstance(version, str):
        return incompatibility(version)
    return None


def refuse(name: str, reason: Said) -> HubError:
    """Record that ``name``'s report was refused (the Nodes page shows it); the 409 to raise."""
    node, _ = Node.objects.get_or_create(name=name)
    node.refused_reason = reason
    node.refused_at = timezone.now()
    node.save(update_fields=["refused_reason", "refused_at"])
    message = gettext("Node %(name)s refused: %(reason)s.")
    return HubError(
        message % {"name": repr(name), "reason": localize(reason)}, "node_incompatible", 409
    )


def accept_report(
    name: str, report: dict[str, Any], *, triton: dict[str, str], version: str, labels: dict
) -> dict[str, Any]:
    """Store a checked report of ``name``; what the node is to know in return."""
    with transaction.atomic():
        host_reports.record(report, node=name)
        Node.objects.filter(name=name).update(
            triton=triton, hub_version=version, labels=labels, refused_reason="", refused_at=None
        )
    return {"accepted": True, "protocol": PROTOCOL, "report_every_s": settings.HOST_PROBE_SECONDS}


# --------------------------------------------------------------------------- operators


def set_draining(name: str, draining: bool) -> dict[str, Any]:
    Node.objects.filter(pk=get(name).pk).update(draining=draining)
    return summary_of(name)


def remove(name: str) -> str:
    """Forget a node that is down or draining, and refuse its tokens from now on; its name."""
    node = get(name)
    report = HostReport.objects.filter(node=node.name).first()
    found = state(node, report, timezone.now())
    if found == "up":
        message = gettext(
            "Node %(name)s is up: drain it first (or stop it and wait until it is down)."
        )
        raise HubError(
            message % {"name": repr(name)},
            "node_up",
            409,
        )
    with transaction.atomic():
        node_scope.revoke(node.name)
        HostReport.objects.filter(node=node.name).delete()
        node.delete()
    return node.name


def register(name: str) -> Node:
    """The node ``name``, made if new (``manage.py nodetoken``)."""
    node, _ = Node.objects.get_or_create(name=check_name(name))
    return node
