"""The node's report and its heartbeat.

The report is :func:`model_store.host_report.build_host_report` (what this host has) plus
``node``: who the node is, its Triton's URLs, the code version it runs and its labels. The
node sends one when its worker starts, then every ``report_every_s`` (the hub's answer sets
the interval); a node runs no Celery beat, so a daemon thread keeps the rhythm.
"""

from __future__ import annotations

import logging
import threading
import tomllib
from pathlib import Path
from typing import Any

from model_store.host_report import build_host_report
from model_store.runtime.client import TritonRuntime
from model_store.runtime.errors import TritonRuntimeError
from workers.node.hub_client import HubClient, HubError, ReportAnswer
from workers.node.settings import NodeSettings

log = logging.getLogger(__name__)
_PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def hub_version() -> str:
    """The version in the checkout's pyproject.toml (a node runs from the hub's code)."""
    try:
        with _PYPROJECT.open("rb") as fh:
            return str(tomllib.load(fh)["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"


def node_report(settings: NodeSettings) -> dict[str, Any]:
    """The body of ``POST /api/v1/nodes/{name}/reports``."""
    report = build_host_report(
        settings.env, backends_dir=_backends_dir(settings), serving=lambda: serving_side(settings)
    )
    served = triton_models(settings)
    if served is not None:
        report["triton_models"] = served
    report["node"] = {
        "name": settings.name,
        "triton": {
            "http": settings.triton_http,
            "grpc": settings.triton_grpc,
            "metrics": settings.triton_metrics,
        },
        "hub_version": hub_version(),
        "labels": dict(settings.labels),
    }
    return report


def serving_side(settings: NodeSettings) -> dict[str, Any]:
    """This node's Triton's own facts (docs/ascend.md#the-serving-side), remembered a while."""
    from model_store.serving.facts import ASK_EVERY_S, ask_every_s, remembered_serving_facts
    from model_store.store import ModelStore

    runtime = TritonRuntime(
        http_url=settings.triton_http, api_key=settings.triton_api_key, timeout=30.0
    )
    try:
        every = ask_every_s(
            settings.env, float(settings.env.get("SERVING_FACTS_SECONDS") or ASK_EVERY_S)
        )
        return remembered_serving_facts(ModelStore(settings.store_root), runtime, every_s=every)
    finally:
        runtime.close()


def triton_models(settings: NodeSettings) -> dict[str, list[int]] | None:
    """``{model: [ready versions]}`` as this node's Triton says now, or None when it does not
    answer: the hub compares it with what it placed here (drift, and a Triton that restarted
    empty) and places again what is missing."""
    runtime = TritonRuntime(
        http_url=settings.triton_http, api_key=settings.triton_api_key, timeout=5.0
    )
    try:
        rows = runtime.repository_index()
    except (TritonRuntimeError, OSError):
        return None
    served: dict[str, list[int]] = {}
    for row in rows:
        if row.get("state") == "READY" and str(row.get("version", "")).isdigit():
            served.setdefault(row["name"], []).append(int(row["version"]))
    return {name: sorted(versions) for name, versions in served.items()}


def send_report(settings: NodeSettings, client: HubClient) -> ReportAnswer:
    """Builds the report and posts it; the hub's answer.

    Raises:
        HubError: The hub did not take it (the message says why).
    """
    return client.post_report(settings.name, node_report(settings))


def _backends_dir(settings: NodeSettings) -> Path | None:
    """The backends folder ``make node`` gives its Triton, when this host has it."""
    folder = settings.store_root / "backends"
    return folder if folder.is_dir() else None


class Heartbeat:
    """Sends a report now and then every interval until :meth:`stop`.

    A failed report is logged and retried at the next beat: the hub may be restarting, and a
    refused node (token revoked, protocol too old) must say so in its log until an operator
    acts, not crash.
    """

    def __init__(self, settings: NodeSettings, client: HubClient) -> None:
        self.settings = settings
        self.client = client
        self.every_s = settings.report_every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="node-heartbeat", daemon=True)
        #: The last outcome, for the log and for tests: "accepted" or the hub's reason.
        self.last: str = ""

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def beat(self) -> None:
        try:
            answer = send_report(self.settings, self.client)
        except HubError as exc:
            level = logging.ERROR if exc.refused else logging.WARNING
            log.log(level, "node %s: report not accepted: %s", self.settings.name, exc.message)
            self.last = exc.message
            return
        except Exception:  # a probe that breaks must not stop the heartbeat
            log.exception("node %s: building the report failed", self.settings.name)
            self.last = "the report could not be built"
            return
        if answer.report_every_s is not None:
            self.every_s = answer.report_every_s
        if self.last != "accepted":
            log.info(
                "node %s: report accepted (hub protocol %s); reporting every %.0f s",
                self.settings.name, answer.protocol, self.every_s,
            )  # fmt: skip
        self.last = "accepted"

    def _run(self) -> None:
        while not self._stop.is_set():
            self.beat()
            self._stop.wait(self.every_s)
