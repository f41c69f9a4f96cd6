"""The diagnostics checklist (model_store.diagnostics) as this dashboard shows it.

The checks come from two places. The host-bound ones (CANN, ATC and its Python, the npu_ge
library, device nodes, npu-smi) run on the host with the NPUs, in a worker there, as part of its
host report (webapp/nodes/host_reports.py): the page shows them from the newest stored report with
its age and never probes hardware itself, since in compose the web container has none. The
hub-side ones (Triton reachable, its repository API restricted, stuck and failed loads) run
here, where the hub's own requests to Triton start.

The page shows the hub's checks, then one section per node (``local`` first, then the others by
name) with the host checks of that node's newest report, its state and the report's age
(:func:`node_sections`); ``?node=NAME`` shows one node's section alone.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.http import Http404
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext, gettext_lazy, ngettext

from model_store.diagnostics.checklist import (
    CHECKS,
    HUB_CHECKS,
    run_checks,
    summarize,
    summary_line,
)
from model_store.diagnostics.context import DiagnosticsContext
from model_store.diagnostics.host_checks import reported_checks
from model_store.text import Said, say
from webapp.nodes import host_reports
from webapp.nodes import summaries as nodes
from webapp.ops.triton import get_runtime
from webapp.ops.triton_files import triton_log_path
from webapp.sso.probes import sign_in_context
from webapp.text import localize, localized

#: Where each check ran, as the page and the API name it (``ran_on``).
RAN_ON_HOST = "host"
RAN_ON_HUB = "hub"
_ORDER = {cid: index for index, (cid, _) in enumerate(CHECKS)}

#: How the page shows each state: a word (readable without colour) and a badge class.
STATE_LABELS = {
    "ok": gettext_lazy("OK"),
    "warning": gettext_lazy("WARNING"),
    "failing": gettext_lazy("FAILING"),
    "not_applicable": gettext_lazy("NOT APPLICABLE"),
}
STATE_BADGES = {
    "ok": "badge-ok",
    "warning": "badge-busy",
    "failing": "badge-bad",
    "not_applicable": "badge-idle",
}


def run_hub_checks() -> dict[str, Any]:
    """Run the hub-side checks once: ``{"checks", "ran_at", "host"}`` (this process's host)."""
    runtime = get_runtime(timeout=3)
    # Keyless, as anyone on the network: does Triton itself refuse repository calls?
    anyone = get_runtime(timeout=3, with_key=False)
    try:
        ctx = DiagnosticsContext(
            env=dict(os.environ),
            triton_url=settings.TRITON_URL,
            grpc_url=settings.TRITON_GRPC_URL or "",
            is_live=runtime.is_live,
            is_ready=runtime.is_ready,
            repository_index=runtime.repository_index,
            repository_index_without_key=anyone.repository_index,
            api_key_set=bool(settings.TRITON_API_KEY),
            triton_log_path=triton_log_path(),
            **sign_in_context(),
        )
        checks = run_checks(ctx, HUB_CHECKS)
    finally:
        runtime.close()
        anyone.close()
    return {
        "checks": [c.to_dict() for c in checks],
        "ran_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
    }


def host_part(node: str = host_reports.LOCAL_NODE) -> dict[str, Any]:
    """The host-bound checks of ``node``'s newest host report, and who reported them how long
    ago.

    ``{"checks", "host_report": {"host", "reported_at", "age_s", "stale"} | None,
    "host_checks_reason"}``; the reason is "" when the checks are there.
    """
    report = host_reports.latest(node)
    local = node == host_reports.LOCAL_NODE
    if report is None:
        reason = host_reports.start_a_worker() if local else _start_the_node(node)
        return {"checks": [], "host_report": None, "host_checks_reason": reason}
    made_by = host_reports.age(report)
    checks = reported_checks(report)
    if checks is None:
        reason = (
            gettext(
                "the worker's last report carries no diagnostics (a worker older than this hub): "
                "restart the workers with this version"
            )
            if local
            else gettext(
                "the last report of node %(node)s carries no diagnostics (a node worker older "
                "than this hub): update that node to this hub's version and restart its worker"
            )
            % {"node": node}
        )
        return {"checks": [], "host_report": made_by, "host_checks_reason": reason}
    return {
        "checks": [c.to_dict() for c in checks],
        "host_report": made_by,
        "host_checks_reason": "",
    }


def _start_the_node(node: str) -> str:
    return gettext(
        "node %(node)s has not reported yet: start its node worker (`make node NAME=%(node)s`, "
        "or deploy/node/ on an Ascend host), which reports when it starts"
    ) % {"node": node}


# ----------------------------------------------------------------------- one section per node

#: Badge of each node state, as the Nodes page shows it.
NODE_STATE_BADGES = {"up": "badge-ok", "draining": "badge-busy", "down": "badge-bad"}


def node_sections(only: str | None = None) -> list[dict[str, Any]]:
    """Each node's host checks for the page: ``local`` first (even before its first report),
    then the others by name; only the node ``only`` when given.

    Raises:
        Http404: ``only`` is not a node the hub knows.
    """
    summaries = {s["name"]: s for s in nodes.summaries()}
    names = sorted(set(summaries) | {host_reports.LOCAL_NODE},
                   key=lambda name: (name != host_reports.LOCAL_NODE, name))  # fmt: skip
    if only is not None:
        if only not in names:
            raise Http404(gettext("There is no node %(name)s.") % {"name": repr(only[:64])})
        names = [only]
    return [node_section(name, summaries.get(name)) for name in names]


def node_section(name: str, summary: dict[str, Any] | None) -> dict[str, Any]:
    """One node's section: its state (``down`` before its first report), the host checks of
    its newest report with the report's age, and what to say when they are missing or old.

    ``local`` keeps the element ids the page had when it showed ``local`` only.
    """
    part = host_part(name)
    checks = [{**c, "ran_on": RAN_ON_HOST} for c in part["checks"]]
    rows = for_page({"checks": checks})["host_checks"]
    state = summary["state"] if summary else "down"
    local = name == host_reports.LOCAL_NODE
    return {
        "name": name,
        "state": state,
        "badge": NODE_STATE_BADGES.get(state, "badge-idle"),
        "refused_reason": (summary or {}).get("refused_reason"),
        "host_report": part["host_report"],
        "checks": rows,
        "summary_line": summary_line(rows) if rows else "",
        "reason_html": with_code(part["host_checks_reason"]),
        "last_known": last_known(state, (summary or {}).get("last_report_age_s"))
        if part["host_report"]
        else "",
        "section_id": "host-checks" if local else f"host-checks-{name}",
        "id_prefix": "" if local else f"node-{name}-",
    }


def last_known(state: str, age_s: float | None) -> str:
    """For a node that is down: its checks are the last known ones, and how old they are (the
    hub's clock: when the report was received). Empty for a node that reports."""
    if state != "down" or age_s is None:
        return ""
    minutes = max(1, round(age_s / 60))
    return ngettext(
        "Down: last known, %(minutes)s minute old",
        "Down: last known, %(minutes)s minutes old",
        minutes,
    ) % {"minutes": minutes}


def page_summary(report: dict[str, Any] | None, sections: list[dict[str, Any]]) -> Said:
    """The line above the sections: every shown check counted, and the nodes that are down.

    A :class:`~model_store.text.Message` the page shows with ``|translated``.
    """
    checks = [c for section in sections for c in section["checks"]]
    checks += report["hub_checks"] if report else []
    line = summary_line(checks)
    if report and report.get("running") and not report["hub_checks"]:
        line = say("%(summary)s; the hub's checks are still running", summary=line)
    elif report and report.get("failed"):
        line = say("%(first)s; %(then)s", first=line, then=report["failed"])
    down = [s["name"] for s in sections if s["state"] == "down"]
    if down:
        line = say("%(summary)s; down: %(nodes)s", summary=line, nodes=", ".join(down))
    return line


def combined(hub: dict[str, Any], host: dict[str, Any]) -> dict[str, Any]:
    """One report: the host's checks and the hub's, each with ``ran_on``, in checklist order.

    ``host`` and ``ran_at`` stay those of the hub's checks (this process's); ``host_report``
    says which worker reported the host checks and when.
    """
    checks = [{**c, "ran_on": RAN_ON_HOST} for c in host["checks"]]
    checks += [{**c, "ran_on": RAN_ON_HUB} for c in hub["checks"]]
    checks.sort(key=lambda c: _ORDER.get(c["id"], len(_ORDER)))
    line: Said
    if hub.get("running") and not hub["checks"]:
        line = say("The hub's checks are still running.")
    else:
        line = hub.get("failed") or summary_line(checks)
    if host["host_checks_reason"]:
        line = say(
            "%(summary)s; no host checks: %(reason)s",
            summary=line,
            reason=host["host_checks_reason"],
        )
    return {
        **hub,
        "checks": checks,
        "summary": summarize(checks),
        "summary_line": line,
        "host_report": host["host_report"],
        "host_checks_reason": host["host_checks_reason"],
    }


# ----------------------------------------------------------------------- the cached hub checks
# The hub-side checks ask Triton; running them on every page view or API call held a web thread
# for seconds. Their last result is kept for CACHE_SECONDS; an older one is answered at once
# while one background thread runs them again. The host checks are read from the stored host
# report on every call (one database row).
CACHE_SECONDS = 30.0
WAIT_SECONDS = 20.0
_lock = threading.Lock()
_report: tuple[float, dict[str, Any]] | None = None
_done = threading.Event()
_running = False


def latest_report(*, fresh: bool = False) -> dict[str, Any]:
    """The host checks of the newest host report and the last hub checks (with ``age_s``).

    The hub checks are refreshed in the background once stale; the very first call, and
    ``fresh=True`` ("Run again"), wait for a run of their own (at most :data:`WAIT_SECONDS`);
    callers hold a slow-request place meanwhile.
    """
    return combined(_latest_hub_checks(fresh=fresh), host_part())


def _latest_hub_checks(*, fresh: bool) -> dict[str, Any]:
    with _lock:
        report = _report
        stale = report is None or fresh or time.monotonic() - report[0] > CACHE_SECONDS
        started = stale and _start_refresh_locked()
    if (report is None or fresh) and (started or _running):
        _done.wait(WAIT_SECONDS)
        with _lock:
            report = _report
    if report is None:
        return {
            "checks": [],
            "ran_at": None,
            "host": socket.gethostname(),
            "age_s": None,
            "running": True,
        }
    return {**report[1], "age_s": round(time.monotonic() - report[0], 1), "running": _running}


def _start_refresh_locked() -> bool:
    global _running
    if _running:
        return False
    _running = True
    _done.clear()
    threading.Thread(target=_refresh, name="diagnostics", daemon=True).start()
    return True


def _refresh() -> None:
    global _report, _running
    try:
        report = run_hub_checks()
    except Exception as exc:  # a broken check run must not leave "running" forever
        report = {"checks": [], "failed": say("The hub's checks failed: %(error)s", error=exc),
                  "ran_at": datetime.now(UTC).isoformat(timespec="seconds"),
                  "host": socket.gethostname()}  # fmt: skip
    finally:
        from django.db import connection

        connection.close()  # this thread's connection, if a check opened one
    with _lock:
        _report = (time.monotonic(), report)
        _running = False
        _done.set()


def forget_report() -> None:
    global _report
    with _lock:
        _report = None


def with_code(text: str) -> SafeString:
    """``text`` escaped, with each `backticked` part shown as ``<code>``."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: show the text as it is
        return format_html("{}", text)
    return format_html_join(
        "",
        "{}",
        ((format_html("<code>{}</code>", p) if i % 2 else p,) for i, p in enumerate(parts)),
    )


def for_page(report: dict[str, Any]) -> dict[str, Any]:
    """The report for the page: each check with a state word, a badge and HTML text, split
    into ``host_checks`` (from the worker's report) and ``hub_checks`` (run here)."""
    rows = [
        {
            **c,
            "label": STATE_LABELS[c["state"]],
            "badge": STATE_BADGES[c["state"]],
            "found_html": with_code(localize(c.get("found"))),
            "advice_html": with_code(localize(c.get("advice"))),
        }
        for c in report["checks"]
    ]
    ran_at = report.get("ran_at")
    shown = datetime.fromisoformat(ran_at).strftime("%H:%M:%S UTC") if ran_at else "…"
    return {
        **report,
        "checks": rows,
        "host_checks": [r for r in rows if r.get("ran_on") == RAN_ON_HOST],
        "hub_checks": [r for r in rows if r.get("ran_on") != RAN_ON_HOST],
        "host_checks_reason_html": with_code(report.get("host_checks_reason") or ""),
        "ran_at_shown": shown,
    }


def for_api(report: dict[str, Any]) -> dict[str, Any]:
    """The report for ``GET /api/v1/diagnostics`` in the request's language (Accept-Language):
    each check's title, found and advice said from their templates, and the summary line;
    ``id``, ``state`` and the other codes as they are."""
    said = {
        **report,
        "checks": localized(report["checks"]),
        "summary_line": localize(report.get("summary_line")),
    }
    if report.get("failed"):
        said["failed"] = localize(report["failed"])
    return said
