"""The diagnostics checklist (model_store.diagnostics) wired to this dashboard's settings.

The checks run in the web process, with its environment and on its host. With the embedded
stack (`make run`) that is where Triton runs too; in the compose stack Triton and the NPUs
live in the triton container, so the Ascend checks here describe the web container only.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from model_store.diagnostics.checklist import run_checks, summarize, summary_line
from model_store.diagnostics.context import DiagnosticsContext
from webapp.ops.triton import get_runtime, is_embedded

#: Where the GE backend's Dockerfile installs Triton (TRITON_HOME_PATH;
#: docs/ge-backend.md#runtime-environment).
DEFAULT_TRITON_HOME = Path("/opt/tritonserver")

#: How the page shows each state: a word (readable without colour) and a badge class.
STATE_LABELS = {
    "ok": "OK",
    "warning": "WARNING",
    "failing": "FAILING",
    "not_applicable": "NOT APPLICABLE",
}
STATE_BADGES = {
    "ok": "badge-ok",
    "warning": "badge-busy",
    "failing": "badge-bad",
    "not_applicable": "badge-idle",
}


def triton_backends_dir() -> Path | None:
    """Triton's ``--backend-directory`` as seen from here, or None when it cannot be known.

    The embedded Triton gets ``MODEL_STORE_ROOT/backends`` (webapp/stack); a Triton built as
    the GE backend's guide does keeps its backends in ``$TRITON_HOME_PATH/backends``.
    """
    explicit = getattr(settings, "TRITON_BACKENDS_DIR", None)
    if explicit:
        return Path(explicit)
    if is_embedded():
        return Path(settings.MODEL_STORE_ROOT) / "backends"
    home = os.environ.get("TRITON_HOME_PATH", "").strip()
    if home:
        return Path(home) / "backends"
    default = DEFAULT_TRITON_HOME / "backends"
    return default if default.is_dir() else None


def triton_log_path() -> Path | None:
    """The log file of the Triton that `make run` started (``VAR_DIR/log/triton.log``)."""
    explicit = getattr(settings, "TRITON_LOG_PATH", None)
    if explicit:
        return Path(explicit)
    if is_embedded():
        return Path(settings.VAR_DIR) / "log" / "triton.log"
    return None


def run_diagnostics() -> dict[str, Any]:
    """Run the whole checklist once: ``{"checks", "summary", "summary_line", "ran_at", "host"}``."""
    runtime = get_runtime(timeout=3)
    # Keyless, as anyone on the network: does Triton itself refuse repository calls?
    anyone = get_runtime(timeout=3, with_key=False)
    try:
        ctx = DiagnosticsContext(
            env=dict(os.environ),
            backends_dir=triton_backends_dir(),
            triton_url=settings.TRITON_URL,
            grpc_url=settings.TRITON_GRPC_URL or "",
            is_live=runtime.is_live,
            is_ready=runtime.is_ready,
            repository_index=runtime.repository_index,
            repository_index_without_key=anyone.repository_index,
            api_key_set=bool(settings.TRITON_API_KEY),
            triton_log_path=triton_log_path(),
        )
        checks = run_checks(ctx)
    finally:
        runtime.close()
        anyone.close()
    return {
        "checks": [c.to_dict() for c in checks],
        "summary": summarize(checks),
        "summary_line": summary_line(checks),
        "ran_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
    }


# --------------------------------------------------------------------------- the cached report
# The checks run programs (npu-smi, atc) and ask Triton; running them on every page view or
# API call held a web thread for seconds. The last report is kept for CACHE_SECONDS; an older
# one is answered at once while one background thread runs the checks again.
CACHE_SECONDS = 30.0
WAIT_SECONDS = 20.0
_lock = threading.Lock()
_report: tuple[float, dict[str, Any]] | None = None
_done = threading.Event()
_running = False


def latest_report(*, fresh: bool = False) -> dict[str, Any]:
    """The last report (with ``age_s``), refreshed in the background once it is stale.

    The very first call, and ``fresh=True`` ("Run again"), wait for a run of their own (at
    most :data:`WAIT_SECONDS`); callers hold a slow-request place meanwhile.
    """
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
            "summary": {},
            "summary_line": "The checks are still running.",
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
        report = run_diagnostics()
    except Exception as exc:  # a broken check run must not leave "running" forever
        report = {"checks": [], "summary": {}, "summary_line": f"The checks failed: {exc}",
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
    """The report with a state word, a badge class and HTML text on each check."""
    rows = [
        {
            **c,
            "label": STATE_LABELS[c["state"]],
            "badge": STATE_BADGES[c["state"]],
            "found_html": with_code(c["found"]),
            "advice_html": with_code(c["advice"]),
        }
        for c in report["checks"]
    ]
    ran_at = report.get("ran_at")
    shown = datetime.fromisoformat(ran_at).strftime("%H:%M:%S UTC") if ran_at else "…"
    return {**report, "checks": rows, "ran_at_shown": shown}
