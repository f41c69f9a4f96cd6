"""What capturing every request costs the hub's ``/v2`` gateway (issue 37).

    .venv/bin/python bench/capture_overhead.py                  # about 8 minutes
    .venv/bin/python bench/capture_overhead.py --phases 4 --requests 200 --seconds 5

One private stack serves the demo EfficientNet-Lite0 and the tests' MLP (whose ~1 ms shows
the fixed cost per call) as v1 of each, and holds the same file again as v2 for a canary. The
run alternates phases: ``without`` (capture off), ``capture`` (capture at 100%: each answered
call is handed to the writer's queue, which reads its tensors, writes a file and a row, and
trims to the caps), and ``capture+canary`` (the same, with a canary of v2 at 50% as well).
Each phase measures, through the fast path with binary tensors (``gateway-binary`` of
bench/infer_overhead.py):

- p50 and p90 at concurrency 1 (``--requests`` calls);
- requests per second at ``--concurrency`` (8) threads for ``--seconds``;
- what the writer did meanwhile: captures written, and calls dropped because its queue was
  full (the request never waits for it).

Goals (issue 37): p50 with capture - p50 without <= +0.3 ms; throughput with / without >= 0.9.
Medians over the phases of each kind. Results: bench/results/capture_overhead-*.json.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from typing import Any

from _stack import Api, LocalStack, median, tell, temp_workdir
from canary_overhead import (
    gateway_goals,
    measure,
    report,
    serve_both_with_candidates,
    start_canary,
    stop_canary,
)
from infer_overhead import (
    DEMO,
    MLP,
    open_client,
)

PATH = "gateway-binary"
KINDS = ("without", "capture", "capture+canary")


def set_capture(api: Api, name: str, on: bool) -> dict[str, Any]:
    body = {"enabled": on, "sample_rate": 100}
    return dict(api.call("PUT", f"/api/v1/models/{name}/capture", body))


def counters(api: Api, name: str) -> dict[str, int]:
    return dict(api.call("GET", f"/api/v1/models/{name}/capture")["counters"])


def measured(api: Api, name: str, opened: Any, args: argparse.Namespace) -> dict[str, float]:
    before = counters(api, name)
    result = measure(opened, args)
    time.sleep(3)  # the writer's counts reach the database every 2 s
    after = counters(api, name)
    result["written"] = after["written"] - before["written"]
    result["dropped"] = after["dropped_queue_full"] - before["dropped_queue_full"]
    return result


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
        name: {kind: [] for kind in KINDS} for name in (DEMO, MLP)
    }
    with temp_workdir("hub-bench-capture-", args.keep_temp) as workdir:
        stack = LocalStack(workdir / "var", worker_concurrency=1)
        with stack:
            api = Api(stack.url, stack.token)
            subjects, ends = serve_both_with_candidates(api, stack)
            tell(f"ready to measure after {time.monotonic() - launched:.0f} s")
            for phase in range(args.phases):
                for kind in KINDS:
                    tell(f"phase {phase + 1} of {args.phases}: {kind} …")
                    for s in subjects:
                        set_capture(api, s.name, kind != "without")
                        if kind == "capture+canary":
                            start_canary(api, s.name)
                    time.sleep(1)  # the fast path sees the new settings on its next call
                    for s in subjects:
                        opened = functools.partial(open_client, PATH, s, ends)
                        phases[s.name][kind].append(measured(api, s.name, opened, args))
                    if kind == "capture+canary":
                        for s in subjects:
                            stop_canary(api, s.name)
            for s in subjects:
                set_capture(api, s.name, False)
            api.close()
    keys = ("p50_ms", "p90_ms", "rps", "written", "dropped")
    summary = {
        name: {
            kind: {key: median([p[key] for p in runs]) for key in keys}
            for kind, runs in kinds.items()
        }
        for name, kinds in phases.items()
    }
    goals = []
    lines = [["model", "", "p50 ms", "p90 ms", f"req/s at {args.concurrency}", "written",
              "dropped (queue full)"]]  # fmt: skip
    for name, rows in summary.items():
        base = rows["without"]
        for kind in ("capture", "capture+canary"):
            added = rows[kind]["p50_ms"] - base["p50_ms"]
            ratio = rows[kind]["rps"] / base["rps"]
            goals += gateway_goals(name, added, ratio, args.concurrency, **{"with": kind})
        for kind, row in rows.items():
            lines.append([name, kind, f"{row['p50_ms']:.2f}", f"{row['p90_ms']:.2f}",
                          f"{row['rps']:.1f}", f"{row['written']:.0f}",
                          f"{row['dropped']:.0f}"])  # fmt: skip
    report("capture_overhead", lines, goals, {
        "settings": vars(args), "phases": phases, "summary": summary, "goals": goals,
        "wall_seconds": round(time.monotonic() - launched, 1),
    })  # fmt: skip


if __name__ == "__main__":
    main()
