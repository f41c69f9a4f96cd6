"""Scrape-and-compute time for a Triton serving 100 models, and the storage per model per day.

    .venv/bin/python bench/metrics_scrape.py                  # 100 models, 20 scrapes
    .venv/bin/python bench/metrics_scrape.py --models 20 --scrapes 40 --clients 2

One embedded Triton (what ``make run`` starts) on free ports serves ``--models`` small ONNX
MLPs (``mlp_onnx_bytes`` from tests/fixtures/triton.py, each its own model through our
Python-based ``onnxruntime`` backend, so one stub process each), while ``--clients`` client
processes send inference to random models without pause (processes, so that they load the
machine without taking this process's GIL; in production clients are elsewhere). This process
is set up as a worker is (Django on a fresh SQLite database in a temp ``HUB_VAR_DIR``,
migrated) and calls what the beat task calls:

* **fetch**: ``GET :metrics/metrics`` (``TritonRuntime.scrape_metrics``);
* **store**: ``scrape_and_store(text=...)``: parse with prometheus_client, diff against the
  previous scrape kept in the database, insert one raw row per model version, roll finished
  minutes and 10-minute spans up, prune, publish. Also timed apart: **parse** alone and
  **diff** (``points_between``) alone, on the same text.

``--scrapes`` real scrapes one second apart (goal: **fetch + store < 100 ms** median), then
``--virtual-scrapes`` more of the last text with the clock moved 10 s each time (the default
period), which crosses 1-minute and 10-minute roll-ups and pruning: their cost is in the max.

Storage: the rows each tier holds per model version at steady state (from the tiers in
model_store/runtime/series.py and the scrape period) times the bytes per row measured with
SQLite's ``dbstat`` (table and both indexes, after the run).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
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

from model_store.runtime.embedded import EmbeddedTriton, free_ports
from tests.fixtures.triton import mlp_config_pbtxt, mlp_onnx_bytes, write_model

SCRAPE_PERIOD = 10  # METRICS_SCRAPE_SECONDS' default


def start_triton(work: Path, count: int) -> tuple[EmbeddedTriton, list[str]]:
    repository = work / "repository"
    repository.mkdir()
    payload = mlp_onnx_bytes()
    names = [f"bench_{i:03d}" for i in range(count)]
    for name in names:
        write_model(repository, name, {1: payload}, mlp_config_pbtxt(name))
    http, grpc, metrics = free_ports(3)
    triton = EmbeddedTriton(
        repository, work / "backends", http_port=http, grpc_port=grpc, metrics_port=metrics,
        log_path=work / "triton.log", workdir=work / "triton-work",
    )  # fmt: skip
    triton.start()
    triton.wait_ready(60)
    started = time.monotonic()
    runtime = triton.runtime(timeout=120)

    def load(name: str) -> None:
        runtime.load(name)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(load, names))
    ready = {r["name"] for r in runtime.repository_index() if r.get("state") == "READY"}
    missing = set(names) - ready
    if missing:
        raise SystemExit(f"{len(missing)} models did not load; see {work / 'triton.log'}")
    tell(f"{count} models READY in {time.monotonic() - started:.1f} s")
    runtime.close()
    return triton, names


def setup_django(work: Path, triton: EmbeddedTriton) -> None:
    for name in FOREIGN_VARS:
        os.environ.pop(name, None)
    urls = triton.urls
    os.environ |= {
        "HUB_VAR_DIR": str(work / "var"),
        "TRITON_URL": urls["http"],
        "TRITON_GRPC_URL": urls["grpc"],
        "TRITON_METRICS_URL": urls["metrics"],
        "TRITON_API_KEY": triton.api_key,
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
        "LOG_LEVEL": "WARNING",
    }
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def _client(url: str, names: list[str], stop: Any, sent: Any) -> None:
    from model_store.runtime.client import TritonRuntime

    runtime = TritonRuntime(url, timeout=30)
    rng = random.Random()
    x = np.ones((1, 4), np.float32)
    while not stop.is_set():
        runtime.infer(rng.choice(names), {"x": x})
        with sent.get_lock():
            sent.value += 1
    runtime.close()


class Traffic:
    """Client *processes* (not threads: they must not take the measured process's GIL)."""

    def __init__(self, url: str, names: list[str], clients: int) -> None:
        # "spawn": a forked child inherits this process's HTTP client state and hangs.
        context = multiprocessing.get_context("spawn")
        self.stop = context.Event()
        self.sent = context.Value("l", 0)
        self.procs = [
            context.Process(target=_client, args=(url, names, self.stop, self.sent))
            for _ in range(clients)
        ]

    def __enter__(self) -> Traffic:
        for proc in self.procs:
            proc.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for proc in self.procs:
            proc.join(30)
            if proc.is_alive():
                proc.kill()


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def measure(args: argparse.Namespace, names: list[str]) -> dict[str, Any]:
    from model_store.runtime.metrics import parse_scrape
    from model_store.runtime.series import points_between
    from webapp.ops.metrics_store import scrape_and_store
    from webapp.ops.triton import get_runtime

    runtime = get_runtime(timeout=10)
    fetch, store, parse, diff, stored = [], [], [], [], []
    text, prev, now = "", None, time.time()
    for i in range(args.scrapes + 1):
        tick = time.monotonic()
        started = time.perf_counter()
        text = runtime.scrape_metrics()
        fetched = time.perf_counter()
        now = time.time()
        result = scrape_and_store(text=text, now=now)
        done = time.perf_counter()
        started_parse = time.perf_counter()
        cur = parse_scrape(text, at=now)
        parsed = time.perf_counter()
        if prev is not None:
            points_between(prev, cur)
        diffed = time.perf_counter()
        prev = cur
        if i > 0:  # the first one only stores a baseline
            fetch.append(fetched - started)
            store.append(done - fetched)
            parse.append(parsed - started_parse)
            diff.append(diffed - parsed)
            stored.append(result.stored)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
    virtual = []
    for k in range(1, args.virtual_scrapes + 1):
        started = time.perf_counter()
        scrape_and_store(text=text, now=now + k * SCRAPE_PERIOD)
        virtual.append(time.perf_counter() - started)
    totals = [f + s for f, s in zip(fetch, store, strict=True)]
    return {
        "scrape_bytes": len(text.encode()),
        "points_per_scrape": median([float(s) for s in stored]),
        "fetch_ms": summary(fetch),
        "parse_ms": summary(parse),
        "diff_ms": summary(diff),
        "store_ms": summary(store),
        "fetch_plus_store_ms": summary(totals),
        "virtual_store_ms": summary(virtual),
    }


def summary(values: list[float]) -> dict[str, float]:
    return {
        "median": ms(median(values)),
        "p90": ms(percentile(values, 90)),
        "max": ms(max(values)),
        "n": len(values),
    }


def storage(names: list[str]) -> dict[str, Any]:
    from django.db import connection

    from model_store.runtime.series import TIERS
    from webapp.ops.models import MetricPoint

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, SUM(pgsize) FROM dbstat WHERE name LIKE '%metric%' GROUP BY name"
        )
        pages = dict(cursor.fetchall())
    rows = MetricPoint.objects.count()
    on_disk = sum(pages.values())
    per_row = on_disk / rows
    steady = {t.width: t.keep // (t.width or SCRAPE_PERIOD) for t in TIERS}
    written = {t.width: 86400 // (t.width or SCRAPE_PERIOD) for t in TIERS}
    return {
        "rows": rows,
        "bytes_by_object": pages,
        "bytes_per_row": round(per_row, 1),
        "steady_rows_per_model_version": steady,
        "steady_rows_total": sum(steady.values()),
        "steady_bytes_per_model_version": round(sum(steady.values()) * per_row),
        "rows_written_per_model_version_per_day": sum(written.values()),
        "bytes_written_per_model_version_per_day": round(sum(written.values()) * per_row),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--scrapes", type=int, default=20)
    parser.add_argument("--virtual-scrapes", type=int, default=70)
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--keep-temp", action="store_true")
    args = parser.parse_args()
    data: dict[str, Any] = {"machine": machine(), "args": vars(args)}
    with temp_workdir("metrics-bench-", args.keep_temp) as work:
        triton, names = start_triton(work, args.models)
        try:
            setup_django(work, triton)
            with Traffic(triton.urls["http"], names, args.clients) as traffic:
                started = time.monotonic()
                data["timing"] = measure(args, names)
                seconds = time.monotonic() - started
            data["traffic_rps"] = round(traffic.sent.value / seconds, 1)
            data["storage"] = storage(names)
        finally:
            triton.stop()
    t, s = data["timing"], data["storage"]
    rows = [
        ["", "median", "p90", "max"],
        *[
            [name, str(t[key]["median"]), str(t[key]["p90"]), str(t[key]["max"])]
            for name, key in [
                ("fetch (HTTP GET /metrics)", "fetch_ms"),
                ("  parse alone", "parse_ms"),
                ("  diff alone", "diff_ms"),
                ("store (parse+diff+insert+roll-up+prune)", "store_ms"),
                ("fetch + store", "fetch_plus_store_ms"),
                ("store, 10 s virtual clock (roll-ups)", "virtual_store_ms"),
            ]
        ],
    ]
    print(table(rows))
    tell(
        f"{args.models} models, {t['points_per_scrape']:.0f} points per scrape, "
        f"{t['scrape_bytes'] / 1024:.0f} KiB per scrape, traffic {data['traffic_rps']} req/s"
    )
    tell(
        f"storage: {s['bytes_per_row']} bytes per row (table + 2 indexes); per model version "
        f"{s['steady_rows_total']} rows kept ({s['steady_bytes_per_model_version'] / 1024:.0f} "
        f"KiB), {s['rows_written_per_model_version_per_day']} rows written per day "
        f"({s['bytes_written_per_model_version_per_day'] / 1024:.0f} KiB)"
    )
    tell(f"results: {write_results('metrics_scrape', data)}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
