"""What a running canary costs the hub's ``/v2`` gateway (issue 35).

    .venv/bin/python bench/canary_overhead.py                   # about 6 minutes
    .venv/bin/python bench/canary_overhead.py --phases 4 --requests 200 --seconds 5

One private stack serves the demo EfficientNet-Lite0 and the tests' MLP (whose ~1 ms shows
the fixed cost per call) as v1 of each, and holds the same file again as v2 (uploaded,
compiled, verified, packaged like any version), so both sides of the split compute the same
thing and only the gateway's work differs. The run alternates phases:
``without`` (no canary: every call goes to v1) and ``with`` (a canary of v2 at 50%, its step
too long to end during the run: each call draws its version and is counted in Redis after
its answer, and the watcher looks every 2 s). Each phase measures, through the fast path
with binary tensors (``gateway-binary`` of bench/infer_overhead.py):

- p50 and p90 at concurrency 1 (``--requests`` calls);
- requests per second at ``--concurrency`` (8) threads for ``--seconds``.

Goals (issue 35): p50 with a canary - p50 without <= +0.3 ms; throughput with / without
>= 0.9. Medians over the phases of each kind. Results: bench/results/canary_overhead-*.json.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from datetime import UTC, datetime
from typing import Any

import numpy as np
from _stack import ROOT, Api, LocalStack, machine, median, percentile, table, tell, temp_workdir
from _stack import write_results as save
from infer_overhead import (
    DEMO,
    MLP,
    Endpoints,
    Tally,
    demo_tensor,
    describe,
    drive,
    open_client,
    serve_demo,
    serve_mlp,
)

from tests.fixtures.pipeline import mlp_payload

GOAL_ADDED_MS = 0.3
GOAL_THROUGHPUT = 0.9
PATH = "gateway-binary"


def add_candidate(api: Api, name: str, onnx: bytes, timeout: float = 900) -> None:
    """The model's own file again, as v2, through the normal pipeline."""
    from tests.fixtures.multipart import multipart_file

    # The same bytes as v1 on purpose: only the gateway's work may differ between the sides.
    body, ctype = multipart_file(onnx, fields={"allow_duplicate": "true"})
    status, _, data = api.raw(
        "POST", f"/api/v1/models/{name}/versions", body, {"Content-Type": ctype}
    )
    if status != 201:
        raise SystemExit(f"uploading v2 failed: {status} {data[:300]!r}")
    deadline = time.monotonic() + timeout
    while api.call("GET", f"/api/v1/models/{name}/versions/2")["status"] != "ready":
        if time.monotonic() > deadline:
            raise SystemExit(f"v2 was not packaged in {timeout} s")
        time.sleep(1)


def start_canary(api: Api, name: str, timeout: float = 300) -> None:
    body = {"version": 2, "steps": [50, 100], "step_seconds": 86_400,
            "max_error_rate": 0.5, "max_p99_ratio": 100, "min_requests": 10**6}  # fmt: skip
    api.call("POST", f"/api/v1/models/{name}/canary", body, expect=202)
    deadline = time.monotonic() + timeout
    while api.call("GET", f"/api/v1/models/{name}/canary")["weight"] != 50:
        if time.monotonic() > deadline:
            raise SystemExit("the canary did not start splitting")
        time.sleep(0.5)


def stop_canary(api: Api, name: str, timeout: float = 300) -> None:
    api.call("POST", f"/api/v1/models/{name}/canary/abort", {}, expect=202)
    deadline = time.monotonic() + timeout
    while api.call("GET", f"/api/v1/models/{name}/canary")["phase"] != "aborted":
        if time.monotonic() > deadline:
            raise SystemExit("the canary did not end")
        time.sleep(0.5)


def serve_both_with_candidates(api: Api, stack: LocalStack) -> tuple[list[Any], Endpoints]:
    """The demo model and the MLP served as v1, each with its own file again as v2 (for a
    canary whose sides compute the same thing); what to call, and where."""
    tell("adding the demo model and the MLP as v1, and their files again as v2 …")
    serve_demo(api)
    serve_mlp(api)
    demo_onnx = (ROOT / "demo" / "efficientnet-lite0" / "model.onnx").read_bytes()
    add_candidate(api, DEMO, demo_onnx)
    add_candidate(api, MLP, mlp_payload(1))
    mlp_x = np.random.default_rng(0).standard_normal((1, 8)).astype(np.float32)
    subjects = [
        describe(api, stack, DEMO, demo_tensor(api)),
        describe(api, stack, MLP, mlp_x),
    ]
    ends = Endpoints(stack.url, stack.token, f"127.0.0.1:{stack.env['HUB_TRITON_HTTP_PORT']}")
    return subjects, ends


def measure(open_one: Any, args: argparse.Namespace) -> dict[str, float]:
    client = open_one()
    try:
        for _ in range(args.warmup):
            client.call()
        latencies = []
        for _ in range(args.requests):
            started = time.perf_counter()
            client.call()
            latencies.append((time.perf_counter() - started) * 1000)
    finally:
        client.close()
    tally = Tally()
    drive(open_one, args.concurrency, args.seconds, tally)
    if tally.errors:
        raise SystemExit(f"{len(tally.errors)} calls failed: {tally.errors[:3]}")
    return {
        "p50_ms": median(latencies),
        "p90_ms": percentile(latencies, 90),
        "rps": tally.requests / tally.seconds,
    }


def gateway_goals(
    model: str, added_ms: float, ratio: float, concurrency: int, **labels: str
) -> list[dict[str, Any]]:
    """The two goals a cost on ``/v2`` is held to: p50 added, and throughput kept."""
    return [
        {"model": model, **labels, "goal": f"p50 added <= +{GOAL_ADDED_MS} ms",
         "value": round(added_ms, 3), "met": added_ms <= GOAL_ADDED_MS},
        {"model": model, **labels, "goal": f"throughput at concurrency {concurrency} >= "
         f"{GOAL_THROUGHPUT}x", "value": round(ratio, 3), "met": ratio >= GOAL_THROUGHPUT},
    ]  # fmt: skip


def report(
    benchmark: str, lines: list[list[str]], goals: list[dict[str, Any]], results: dict[str, Any]
) -> None:
    """The table and each goal on the terminal; everything in bench/results/."""
    print(f"\n{table(lines)}\n")
    for goal in goals:
        labels = "".join(
            f" ({v})" for k, v in goal.items() if k not in ("model", "goal", "value", "met")
        )
        print(f"{'met' if goal['met'] else 'MISSED'}: {goal['model']}{labels}: {goal['goal']} "
              f"({goal['value']})")  # fmt: skip
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = save(f"{benchmark}-{stamp}", {"benchmark": benchmark, "machine": machine(), **results})
    tell(f"results: {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phases", type=int, default=3, help="phases of each kind (default 3)")
    parser.add_argument("--requests", type=int, default=150, help="calls at concurrency 1")
    parser.add_argument("--seconds", type=float, default=4.0, help="seconds at concurrency N")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--keep-temp", action="store_true")
    args = parser.parse_args()
    os.environ["INFER_RATE_PER_MINUTE"] = "0"
    os.environ["INFER_CONCURRENCY_PER_USER"] = str(max(16, args.concurrency * 2))
    launched = time.monotonic()
    phases: dict[str, dict[str, list[dict[str, float]]]] = {
        name: {"without": [], "with": []} for name in (DEMO, MLP)
    }
    with temp_workdir("hub-bench-canary-", args.keep_temp) as workdir:
        stack = LocalStack(workdir / "var", worker_concurrency=1)
        with stack:
            api = Api(stack.url, stack.token)
            subjects, ends = serve_both_with_candidates(api, stack)
            tell(f"ready to measure after {time.monotonic() - launched:.0f} s")
            for phase in range(args.phases):
                tell(f"phase {phase + 1} of {args.phases}: without a canary …")
                for s in subjects:
                    opened = functools.partial(open_client, PATH, s, ends)
                    phases[s.name]["without"].append(measure(opened, args))
                for s in subjects:
                    start_canary(api, s.name)
                tell(f"phase {phase + 1} of {args.phases}: with a canary at 50% …")
                for s in subjects:
                    opened = functools.partial(open_client, PATH, s, ends)
                    phases[s.name]["with"].append(measure(opened, args))
                for s in subjects:
                    stop_canary(api, s.name)
            api.close()
    summary = {
        name: {
            kind: {key: median([p[key] for p in runs]) for key in ("p50_ms", "p90_ms", "rps")}
            for kind, runs in kinds.items()
        }
        for name, kinds in phases.items()
    }
    goals = []
    lines = [["model", "", "p50 ms", "p90 ms", f"req/s at {args.concurrency}"]]
    for name, rows in summary.items():
        added = rows["with"]["p50_ms"] - rows["without"]["p50_ms"]
        ratio = rows["with"]["rps"] / rows["without"]["rps"]
        goals += gateway_goals(name, added, ratio, args.concurrency)
        for kind, row in rows.items():
            lines.append([name, kind, f"{row['p50_ms']:.2f}", f"{row['p90_ms']:.2f}",
                          f"{row['rps']:.1f}"])  # fmt: skip
    report("canary_overhead", lines, goals, {
        "settings": vars(args), "phases": phases, "summary": summary, "goals": goals,
        "wall_seconds": round(time.monotonic() - launched, 1),
    })  # fmt: skip


if __name__ == "__main__":
    main()
