"""Open-loop read load against the dashboard, with 300 live websockets open meanwhile.

    .venv/bin/python bench/load.py                      # 100 req/s for 60 s, then a ramp
    .venv/bin/python bench/load.py --rate 100 --seconds 60 --sockets 300 --ramp 150,200,300

A private stack (``python -m webapp.stack``, what ``make run`` starts; see bench/README.md)
gets ``--models`` models (one of them with a real, served ONNX version, so that its metrics and
versions are real). Then:

* **open loop**: requests are *scheduled* at a fixed rate, whatever the answers do, from a
  pool of client threads; each one's latency is measured from its scheduled time, so a server
  that falls behind shows it (no coordinated omission). The mix: the models list, a model's
  detail, its versions, the jobs list and a model's metrics, in turn.
* **websockets**: ``--sockets`` browsers' live connections (``/ws/live/``, signed in with a
  session, subscribed to the server and models topics) stay open the whole run; each counts
  the pushes it receives (beat pushes Triton's state every ``SERVER_STATE_PUSH_SECONDS``).
* **ramp**: after the main run, ``--ramp`` rates of ``--ramp-seconds`` each, stopping at the
  first whose p99 is 300 ms or more or that has an error: the highest rate held is reported.

All traffic goes to 127.0.0.1, bounded in count and time. The client runs on the same two
cores as the stack, so the figures are what this machine holds with its own load generator
on board, not what the server would do alone.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import multiprocessing
import queue
import re
import threading
import time
import urllib.parse
from collections import Counter
from typing import Any

from _stack import (
    Api,
    add_stack_arguments,
    machine,
    percentile,
    stack_from_args,
    table,
    tell,
    temp_workdir,
    write_results,
)

from tests.fixtures.multipart import multipart_file
from tests.fixtures.triton import mlp_onnx_bytes

P99_BUDGET_MS = 300.0


def prepare(api: Api, models: int) -> list[str]:
    """``models`` models, the first with a served version; returns the read paths."""
    names = [f"load-{i:03d}" for i in range(models)]
    for name in names:
        api.call("POST", "/api/v1/models", {"name": name, "target": "onnxruntime"}, expect=201)
    body, content_type = multipart_file(mlp_onnx_bytes(), "m.onnx")
    status, _, data = api.raw(
        "POST", f"/api/v1/models/{names[0]}/versions", body, {"Content-Type": content_type}
    )
    if status != 201:
        raise SystemExit(f"the upload was refused: {status} {data[:300]!r}")
    job = json.loads(data)["job"]
    deadline = time.monotonic() + 180
    while api.call("GET", f"/api/v1/jobs/{job}")["state"] != "succeeded":
        if time.monotonic() > deadline:
            raise SystemExit("the compile job did not finish in 180 s")
        time.sleep(0.5)
    api.call("POST", f"/api/v1/models/{names[0]}/serve?wait=true", {"version": 1})
    first = names[0]
    return [
        "/api/v1/models",
        f"/api/v1/models/{first}",
        f"/api/v1/models/{first}/versions",
        "/api/v1/jobs",
        f"/api/v1/models/{first}/metrics?range=1h",
    ]


class OpenLoop:
    """Sends requests at their scheduled times from ``threads`` workers; records outcomes."""

    def __init__(self, url: str, token: str, paths: list[str], threads: int = 48) -> None:
        parts = urllib.parse.urlsplit(url)
        self.host, self.port, self.token, self.paths = parts.hostname, parts.port, token, paths
        self.jobs: queue.Queue[tuple[float, str] | None] = queue.Queue()
        self.results: list[tuple[float, int, str]] = []  # (latency ms, status, path)
        self.lock = threading.Lock()
        self.workers = [threading.Thread(target=self._work, daemon=True) for _ in range(threads)]
        for worker in self.workers:
            worker.start()

    def _work(self) -> None:
        conn: http.client.HTTPConnection | None = None
        while (job := self.jobs.get()) is not None:
            scheduled, path = job
            status = 0
            try:
                conn = conn or http.client.HTTPConnection(self.host, self.port, timeout=30)
                conn.request("GET", path, headers={"Authorization": f"Token {self.token}"})
                response = conn.getresponse()
                response.read()
                status = response.status
                if response.will_close:
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException):
                if conn is not None:
                    conn.close()
                conn = None
            with self.lock:
                self.results.append(((time.perf_counter() - scheduled) * 1000, status, path))

    def run(self, rate: float, seconds: float) -> dict[str, Any]:
        self.results = []
        interval, count = 1.0 / rate, int(rate * seconds)
        start = time.perf_counter()
        for i in range(count):
            due = start + i * interval
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            self.jobs.put((due, self.paths[i % len(self.paths)]))
        while True:  # wait for the stragglers (bounded by the client time-out)
            with self.lock:
                if len(self.results) >= count:
                    break
            time.sleep(0.05)
        return summarize(self.results, rate, seconds)

    def close(self) -> None:
        for _ in self.workers:
            self.jobs.put(None)


def summarize(results: list[tuple[float, int, str]], rate: float, seconds: float) -> dict[str, Any]:
    latencies = sorted(ms for ms, _, _ in results)
    statuses = Counter(status for _, status, _ in results)
    errors = sum(n for status, n in statuses.items() if status != 200)
    return {
        "rate": rate,
        "seconds": seconds,
        "requests": len(results),
        "errors": errors,
        "statuses": {str(k): v for k, v in statuses.items()},
        "p50_ms": round(percentile(latencies, 50), 1) if latencies else None,
        "p99_ms": round(percentile(latencies, 99), 1) if latencies else None,
        "max_ms": round(latencies[-1], 1) if latencies else None,
        "p99_ms_by_path": {
            path: round(percentile([ms for ms, _, p in results if p == path], 99), 1)
            for path in sorted({p for _, _, p in results})
        },
    }


def session_cookie(url: str, password: str) -> str:
    """Sign in as admin like a browser; returns the Cookie header value."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    conn.request("GET", "/login/")
    response = conn.getresponse()
    page = response.read().decode()
    csrf_cookie = re.search(r"csrftoken=([^;]+)", response.getheader("Set-Cookie") or "")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert csrf_cookie and token, "no CSRF token on the sign-in page"
    form = urllib.parse.urlencode(
        {"username": "admin", "password": password, "csrfmiddlewaretoken": token.group(1)}
    )
    conn.request(
        "POST", "/login/", body=form,
        headers={"Content-Type": "application/x-www-form-urlencoded",
                 "Cookie": f"csrftoken={csrf_cookie.group(1)}", "Referer": url + "/login/"},
    )  # fmt: skip
    response = conn.getresponse()
    response.read()
    session = re.search(r"sessionid=([^;]+)", response.getheader("Set-Cookie") or "")
    assert session, f"sign-in failed: {response.status}"
    return f"sessionid={session.group(1)}; csrftoken={csrf_cookie.group(1)}"


class Sockets:
    """``count`` live websockets in one event loop thread, each counting its pushes."""

    def __init__(self, url: str, cookie: str, count: int) -> None:
        self.url = url.replace("http://", "ws://") + "/ws/live/"
        self.origin, self.cookie, self.count = url, cookie, count
        self.received = [0] * count
        self.opened = 0
        self.failures: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self.thread.start()

    async def _one(self, i: int) -> None:
        from websockets.asyncio.client import connect

        try:
            async with connect(
                self.url, additional_headers={"Cookie": self.cookie, "Origin": self.origin},
                open_timeout=60, max_size=2**20,
            ) as ws:  # fmt: skip
                await ws.send(json.dumps({"subscribe": ["server", "models"]}))
                await ws.recv()  # the subscription's answer
                self.opened += 1
                while not self.stop.is_set():
                    try:
                        await asyncio.wait_for(ws.recv(), timeout=0.5)
                        self.received[i] += 1
                    except TimeoutError:
                        continue
        except Exception as exc:
            self.failures.append(f"{type(exc).__name__}: {exc}")

    async def _main(self) -> None:
        tasks = []
        for i in range(self.count):
            tasks.append(asyncio.create_task(self._one(i)))
            await asyncio.sleep(0.01)  # do not open 300 at the same millisecond
        await asyncio.gather(*tasks)

    def close(self) -> dict[str, Any]:
        self.stop.set()
        self.thread.join(30)
        got = sorted(self.received)
        return {
            "sockets": self.count,
            "opened": self.opened,
            "failures": len(self.failures),
            "first_failures": self.failures[:3],
            "pushes_min": got[0] if got else 0,
            "pushes_median": got[len(got) // 2] if got else 0,
            "sockets_without_push": sum(1 for n in got if n == 0),
        }


def hold_sockets(url, cookie, count, opened, stop, results) -> None:  # type: ignore[no-untyped-def]
    """In a child process: open the sockets, say so, hold them until told, report."""
    sockets = Sockets(url, cookie, count)
    deadline = time.monotonic() + 120
    while sockets.opened + len(sockets.failures) < count and time.monotonic() < deadline:
        time.sleep(0.2)
    opened.set()
    stop.wait(3600)
    results.put(sockets.close())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_stack_arguments(parser)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--sockets", type=int, default=300)
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--ramp", default="110,120,130,150,200", help="rates to try after")
    parser.add_argument("--ramp-seconds", type=float, default=20.0)
    parser.add_argument("--password", default="bench-admin-password", help="admin's, for --url")
    args = parser.parse_args()
    if args.rate * args.seconds > 50_000 or args.sockets > 1000:
        raise SystemExit("bounded: at most 50,000 requests and 1,000 sockets per run")
    with (
        temp_workdir("load-bench-", args.keep_temp) as work,
        stack_from_args(args, work) as (
            url,
            token,
            _stack,
        ),
    ):
        api = Api(url, token)
        paths = prepare(api, args.models)
        tell(f"{args.models} models ready; opening {args.sockets} websockets")
        # The sockets live in a process of their own: in this one they would take the GIL
        # from the load generator and show up as server latency.
        context = multiprocessing.get_context("spawn")
        stop, opened, results = context.Event(), context.Event(), context.Queue()
        holder = context.Process(
            target=hold_sockets,
            args=(url, session_cookie(url, args.password), args.sockets, opened, stop, results),
            daemon=True,
        )
        holder.start()
        opened.wait(120)
        loop = OpenLoop(url, token, paths)
        tell(f"open loop: {args.rate:g} req/s for {args.seconds:g} s")
        main_run = loop.run(args.rate, args.seconds)
        ramp = []
        for rate in (float(r) for r in args.ramp.split(",") if r):
            tell(f"ramp: {rate:g} req/s for {args.ramp_seconds:g} s")
            step = loop.run(rate, args.ramp_seconds)
            ramp.append(step)
            if step["errors"] or step["p99_ms"] >= P99_BUDGET_MS:
                break
        stop.set()  # the sockets stay open through the ramp too
        ws = results.get(timeout=60)
        holder.join(30)
        loop.close()
        api.close()
    held = [s["rate"] for s in ramp if not s["errors"] and s["p99_ms"] < P99_BUDGET_MS]
    report(main_run, ws, ramp, max(held, default=None))
    write_results(
        "load",
        {"machine": machine(), "main": main_run, "websockets": ws, "ramp": ramp,
         "highest_rate_held": max(held, default=None)},
    )  # fmt: skip


def report(main_run: dict, ws: dict, ramp: list[dict], held: float | None) -> None:
    rows = [["run", "rate (req/s)", "requests", "errors", "p50 ms", "p99 ms", "max ms"]]
    for name, r in [("main", main_run)] + [("ramp", r) for r in ramp]:
        rows.append([name, f"{r['rate']:g}", str(r["requests"]), str(r["errors"]),
                     f"{r['p50_ms']:.1f}", f"{r['p99_ms']:.1f}", f"{r['max_ms']:.1f}"])  # fmt: skip
    tell("\n" + table(rows))
    tell(f"websockets: {ws}")
    tell(f"highest rate held with p99 < {P99_BUDGET_MS:.0f} ms: {held}")


if __name__ == "__main__":
    main()
