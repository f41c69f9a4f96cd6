"""The tuner's winner against the serving config and against trying everything (issue 21).

    .venv/bin/python bench/tune.py                                # about 10 minutes
    .venv/bin/python bench/tune.py --p99-ms 100 --budget 240 --grid-budget 600

One private stack serving the demo EfficientNet-Lite0 (``POST /api/v1/demo``). Two tuning runs
through the product's API, one after the other, with the same objective (highest throughput
with p99 within ``--p99-ms``):

1. ``search``: the hub's search (``model_store/perf/tune.py``) within ``--budget`` seconds;
2. ``grid``: every config of the small reference grid (instances 1-4 x dynamic batching off,
   8 or 16 x queue delay 100 or 1000 µs: 20 configs) within ``--grid-budget``.

Each run measures the serving config first (trial 0), so each comparison is within one run,
and the two measurements of the serving config show the run-to-run noise. Reported: per run,
the serving config's and the winner's throughput and p99, trials tried and time taken; the
ratios search winner / serving config, grid winner / serving config and search winner /
grid winner (>= 0.97 means the search found the grid's best within noise, in a fraction of the
trials). Trials share the two cores with Triton's other work and the client threads: the
figures tell which config is faster on this machine, not how fast the model is on a quiet one.
Results: bench/results/tune-<time>.json.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime
from typing import Any

from _stack import Api, add_stack_arguments, machine, stack_from_args, table, tell, temp_workdir
from _stack import write_results as write

DEMO = "efficientnet-lite0"


def wait_job(api: Api, job: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        detail = api.call("GET", f"/api/v1/jobs/{job}")
        if detail["state"] in ("succeeded", "failed", "cancelled"):
            return detail
        if time.monotonic() > deadline:
            raise RuntimeError(f"job {job} did not finish in {timeout} s")
        time.sleep(1.0)


def serve_demo(api: Api) -> None:
    added = api.call("POST", "/api/v1/demo", {}, expect=201)
    job = wait_job(api, added["job"], 300)
    if job["state"] != "succeeded":
        raise RuntimeError(f"the demo did not build: {job['error']}")
    deadline = time.monotonic() + 120
    while api.call("GET", f"/api/v1/models/{DEMO}").get("serving_version") is None:
        if time.monotonic() > deadline:
            raise RuntimeError("the demo was not served")
        time.sleep(1.0)


def tune(api: Api, strategy: str, p99_ms: float, budget: int, concurrency: int) -> dict[str, Any]:
    body = {"objective": "throughput", "p99_ms": p99_ms, "budget_s": budget,
            "strategy": strategy, "max_concurrency": concurrency}  # fmt: skip
    started = time.monotonic()
    run = api.call("POST", f"/api/v1/models/{DEMO}/tune", body, expect=202)
    tell(f"{strategy}: run {run['id']} started (budget {budget} s)")
    job = wait_job(api, run["job"], budget + 600)
    seconds = time.monotonic() - started
    detail = api.call("GET", f"/api/v1/models/{DEMO}/tune/{run['id']}")
    if job["state"] != "succeeded":
        raise RuntimeError(f"{strategy} run failed: {job['error']}")
    detail["wall_s"] = round(seconds, 1)
    return detail


def summary(run: dict[str, Any]) -> dict[str, Any]:
    serving = run["trials"][0]
    best = run["best"] or {}
    return {
        "serving_rps": serving["throughput_rps"],
        "serving_p99_ms": serving["p99_ms"],
        "winner": best.get("label"),
        "winner_rps": best.get("throughput_rps"),
        "winner_p99_ms": best.get("p99_ms"),
        "trials": len(run["trials"]),
        "measured": sum(1 for t in run["trials"] if t["state"] == "measured"),
        "wall_s": run["wall_s"],
        "stopped": run["stopped"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--p99-ms", type=float, default=100.0, help="p99 budget (default 100)")
    parser.add_argument("--budget", type=int, default=240, help="search budget, s (default 240)")
    parser.add_argument("--grid-budget", type=int, default=900, help="grid budget, s (default 900)")
    parser.add_argument(
        "--concurrency", type=int, default=4, help="requests in flight per trial (default 4)"
    )
    add_stack_arguments(parser)
    args = parser.parse_args()
    results: dict[str, Any] = {"benchmark": "tune", "machine": machine()}
    results["settings"] = {
        "model": DEMO, "objective": f"throughput with p99 <= {args.p99_ms} ms",
        "search_budget_s": args.budget, "grid_budget_s": args.grid_budget,
        "max_concurrency": args.concurrency,
    }  # fmt: skip
    with temp_workdir("hub-bench-tune-", args.keep_temp) as workdir:
        extra = {"TUNE_MAX_BUDGET_S": str(max(args.budget, args.grid_budget))}
        with stack_from_args(args, workdir, env=extra) as (url, token, _stack):
            api = Api(url, token)
            serve_demo(api)
            runs = {
                name: tune(api, name, args.p99_ms, budget, args.concurrency)
                for name, budget in (("search", args.budget), ("grid", args.grid_budget))
            }
    found = {name: summary(run) for name, run in runs.items()}
    results["runs"] = runs
    results["summary"] = found
    s, g = found["search"], found["grid"]
    ratios = {
        "search_winner_vs_serving": (s["winner_rps"] or 0) / s["serving_rps"],
        "grid_winner_vs_serving": (g["winner_rps"] or 0) / g["serving_rps"],
        "search_winner_vs_grid_winner": (s["winner_rps"] or 0) / (g["winner_rps"] or 1),
        "serving_run_to_run": s["serving_rps"] / g["serving_rps"],
        "search_trials_vs_grid_trials": s["measured"] / max(g["measured"], 1),
    }
    results["ratios"] = ratios
    rows = [["run", "serving req/s", "p99 ms", "winner", "winner req/s", "p99 ms", "trials",
             "wall s"]]  # fmt: skip
    for name, f in found.items():
        rows.append([
            name, f"{f['serving_rps']:.1f}", f"{f['serving_p99_ms']:.1f}", str(f["winner"]),
            f"{f['winner_rps'] or 0:.1f}", f"{f['winner_p99_ms'] or 0:.1f}",
            f"{f['measured']}/{f['trials']}", f"{f['wall_s']:.0f}",
        ])  # fmt: skip
    tell("\n" + table(rows))
    tell("\n" + "\n".join(f"{k}: {v:.2f}" for k, v in ratios.items()))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    tell(f"results: {write(f'tune-{stamp}', results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
