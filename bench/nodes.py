"""What more nodes cost the hub: a node's heartbeat (its report) and a metrics scrape round.

    .venv/bin/python bench/nodes.py                    # about a minute
    .venv/bin/python bench/nodes.py --reports 200 --rounds 120

No web server and no Triton: this process is set up as the hub's web process and worker are
(Django on a fresh SQLite database in a temp ``HUB_VAR_DIR``, migrated; with ``DATABASE_URL``
set, a throw-away test database on that server instead) and calls what they call.

* **Heartbeat.** ``POST /api/v1/nodes/{name}/reports`` through Django's test client (token
  middleware, node scope, body checks, storing), with the report ``build_host_report`` makes
  on this machine plus 8 NPUs of an Atlas host and the ``node`` part a node worker adds.
  Baseline: 1 node sending ``--reports`` reports; then 4 nodes sending the same number in
  turn (each report costs the same work whoever sends it, so the ratio per report should be
  about 1). The two alternate in ``--repeats`` blocks. The database statements each report
  causes (INSERT/UPDATE/DELETE, per table) are counted from Django's query log.
* **Scrape round.** ``scrape_and_store(node=..., text=...)`` as the beat task calls it per node:
  Triton metrics texts of 20 models (``tests.fixtures.metrics_text.render``, Triton's
  families, labels and HELP/TYPE lines; counters growing each round) for 1 node (baseline) and
  for 4 nodes, alternating, on a clock moved 10 s per round (the default period), so rounds
  cross 1-minute and 10-minute roll-ups and pruning. The fetch is not in it (a remote node's
  is one bounded HTTP GET; bench/metrics_scrape.py times local's).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _stack import (
    FOREIGN_VARS,
    ROOT,
    machine,
    median,
    percentile,
    table,
    tell,
    temp_workdir,
    write_results,
)

SCRAPE_PERIOD = 10  # METRICS_SCRAPE_SECONDS' default
MODELS = 20
NPU = {"npu_id": 0, "chip_id": 0, "name": "310P3", "health": "OK", "memory_total_mb": 44280}


def setup_django(work: Path) -> Any:
    """Django on a fresh database; returns what undoes it (a test database on a server)."""
    for name in FOREIGN_VARS:
        if name != "DATABASE_URL":  # honoured: the same run against PostgreSQL
            os.environ.pop(name, None)
    os.environ |= {
        "HUB_VAR_DIR": str(work / "var"),
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
        "LOG_LEVEL": "WARNING",
    }
    import django
    from django.core.management import call_command

    django.setup()
    if os.environ.get("DATABASE_URL"):
        from django.test.utils import setup_databases, teardown_databases

        names = setup_databases(verbosity=0, interactive=False)
        return lambda: teardown_databases(names, verbosity=0)
    call_command("migrate", verbosity=0)
    return lambda: None


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def summary(values: list[float]) -> dict[str, float]:
    return {
        "median": ms(median(values)),
        "p90": ms(percentile(values, 90)),
        "max": ms(max(values)),
        "n": len(values),
    }


# --------------------------------------------------------------------------- heartbeat


class Reporter:
    """A node worker as the hub sees it: a node token and a test client."""

    def __init__(self, name: str, body: dict[str, Any]) -> None:
        from django.core.management import call_command
        from django.test import Client

        out = io.StringIO()
        call_command("nodetoken", name, stdout=out)
        self.name = name
        self.auth = f"Token {out.getvalue().split()[-1]}"
        self.client = Client(HTTP_HOST="127.0.0.1")
        self.body = json.dumps(body | {"node": {**body["node"], "name": name}})

    def post(self) -> None:
        answer = self.client.post(
            f"/api/v1/nodes/{self.name}/reports",
            self.body,
            content_type="application/json",
            HTTP_AUTHORIZATION=self.auth,
        )
        if answer.status_code != 200:
            raise SystemExit(f"report of {self.name}: HTTP {answer.status_code} {answer.content!r}")


def host_report() -> dict[str, Any]:
    from model_store.host_report import build_host_report
    from webapp.hub_version import hub_version

    report = build_host_report(
        dict(os.environ),
        devices=lambda: {"available": True, "npus": [NPU] * 8, "processes": []},
    )
    report["node"] = {
        "name": "",
        "triton": {"http": "10.0.0.2:8000", "grpc": "10.0.0.2:8001", "metrics": "10.0.0.2:8002"},
        "hub_version": hub_version(),
        "labels": {"rack": "r7"},
    }
    return report


def writes(queries: list[dict[str, Any]]) -> Counter[str]:
    """``"INSERT ops_hostreport"``-style counts of the statements that change rows."""
    counts: Counter[str] = Counter()
    for query in queries:
        words = query["sql"].replace('"', " ").replace("`", " ").split()
        verb = words[0].upper() if words else ""
        if verb in ("INSERT", "UPDATE", "DELETE"):
            table_word = {"INSERT": 2, "UPDATE": 1, "DELETE": 2}[verb]
            counts[f"{verb} {words[table_word] if len(words) > table_word else '?'}"] += 1
    return counts


def heartbeats(args: argparse.Namespace) -> dict[str, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    body = host_report()
    one = [Reporter("solo", body)]
    four = [Reporter(f"n{i}", body) for i in range(1, 5)]
    for _ in range(5):  # the first report registers; then warm caches up; not timed
        for reporter in (*one, *four):
            reporter.post()
    per_report: dict[str, list[float]] = {"1": [], "4": []}
    for _ in range(args.repeats):
        for label, senders in (("1", one), ("4", four)):
            for k in range(args.reports // args.repeats):
                sender = senders[k % len(senders)]
                started = time.perf_counter()
                sender.post()
                per_report[label].append(time.perf_counter() - started)
    with CaptureQueriesContext(connection) as captured:
        four[0].post()
    written = writes(captured.captured_queries)
    return {
        "report_bytes": len(one[0].body),
        "one_node_ms": summary(per_report["1"]),
        "four_nodes_ms": summary(per_report["4"]),
        "ratio_four_to_one": round(median(per_report["4"]) / median(per_report["1"]), 3),
        "queries_per_report": len(captured.captured_queries),
        "writes_per_report": dict(written),
        "rows_written_per_report": sum(written.values()),
    }


# --------------------------------------------------------------------------- scrape rounds


def counters(n: int, per: int) -> dict[str, float]:
    """Triton's counters of one model version after ``n`` periods of ``per`` requests each."""
    return {
        "success": per * n, "failure": n // 7, "inference_count": 2 * per * n,
        "exec_count": per * n, "pending": n % 3, "request_us": 900.0 * per * n,
        "queue_us": 120.0 * per * n, "compute_input_us": 15.0 * per * n,
        "compute_infer_us": 700.0 * per * n, "compute_output_us": 12.0 * per * n,
    }  # fmt: skip


def scrape_rounds(args: argparse.Namespace) -> dict[str, Any]:
    from tests.fixtures.metrics_text import render
    from webapp.ops.metrics_store import scrape_and_store
    from webapp.ops.models import MetricPoint

    names = [f"bench_{i:03d}" for i in range(MODELS)]

    def text(n: int, node: int) -> str:
        """Node ``node``'s scrape after ``n`` periods: each model busier than the last."""
        per = 3 + node
        return render({(name, "1"): counters(n, per * (1 + i % 4)) for i, name in enumerate(names)})

    solo, quad = ["solo"], [f"n{i}" for i in range(1, 5)]
    start = time.time() - args.rounds * SCRAPE_PERIOD - 60
    rounds: dict[str, list[float]] = {"1": [], "4": []}
    stored: dict[str, int] = {"1": 0, "4": 0}
    for n in range(args.rounds + 1):
        now = start + n * SCRAPE_PERIOD
        for label, nodes in (("1", solo), ("4", quad)) if n % 2 else (("4", quad), ("1", solo)):
            texts = [text(n, k) for k in range(len(nodes))]  # made before the clock starts
            started = time.perf_counter()
            for k, node in enumerate(nodes):
                stored[label] += scrape_and_store(node=node, text=texts[k], now=now + k).stored
            if n > 0:  # the first round only stores each node's baseline
                rounds[label].append(time.perf_counter() - started)
    return {
        "models_per_node": MODELS,
        "one_node_round_ms": summary(rounds["1"]),
        "four_nodes_round_ms": summary(rounds["4"]),
        "ratio_four_to_one": round(median(rounds["4"]) / median(rounds["1"]), 3),
        "points_stored": stored,
        "rows_kept": MetricPoint.objects.count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reports", type=int, default=400, help="per configuration")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=150, help="scrape rounds (10 s apart)")
    parser.add_argument("--keep-temp", action="store_true")
    args = parser.parse_args()
    data: dict[str, Any] = {"machine": machine(), "args": vars(args)}
    with temp_workdir("nodes-bench-", args.keep_temp) as work:
        undo = setup_django(work)
        try:
            from django.db import connection

            data["database"] = connection.vendor
            started = time.monotonic()
            data["heartbeat"] = heartbeats(args)
            data["scrape"] = scrape_rounds(args)
            data["seconds"] = round(time.monotonic() - started, 1)
        finally:
            undo()
    h, s = data["heartbeat"], data["scrape"]
    rows = [
        ["", "1 node", "4 nodes", "4 / 1"],
        [
            "report, ms per report (median)",
            str(h["one_node_ms"]["median"]),
            str(h["four_nodes_ms"]["median"]),
            str(h["ratio_four_to_one"]),
        ],
        [
            "report, ms per report (p90)",
            str(h["one_node_ms"]["p90"]),
            str(h["four_nodes_ms"]["p90"]),
            "",
        ],
        [
            f"scrape round, {MODELS} models per node, ms (median)",
            str(s["one_node_round_ms"]["median"]),
            str(s["four_nodes_round_ms"]["median"]),
            str(s["ratio_four_to_one"]),
        ],
        [
            "scrape round, ms (max: roll-ups)",
            str(s["one_node_round_ms"]["max"]),
            str(s["four_nodes_round_ms"]["max"]),
            "",
        ],
    ]
    print(table(rows))
    tell(
        f"{data['database']}; a report is {h['report_bytes']} bytes, {h['queries_per_report']} "
        f"queries, {h['rows_written_per_report']} writes: {h['writes_per_report']}"
    )
    tell(f"{data['seconds']} s; results: {write_results('nodes', data)}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
