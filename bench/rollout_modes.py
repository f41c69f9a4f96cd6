"""Calls through the hub's ``/v2`` during rollouts: ``staged`` (the default) against
``node_by_node`` (the way before 2026-12), in one run.

    .venv/bin/python bench/rollout_modes.py                 # about 4 minutes
    .venv/bin/python bench/rollout_modes.py --switches 8 --clients 4

One private stack (node ``local``) and one more node ``b`` (``make node NAME=b``), each its
own Triton, on this machine. One model, the tests' MLP (versions 1 and 2 answer differently),
target ``onnxruntime``. Two placements in turn: ``b`` alone (the hub's host serves none of
it, the usual shape with Ascend nodes) and ``local, b``. For each, ``--switches`` (8)
``POST /api/v1/models/{name}/serve?wait=true`` calls alternate v1 -> v2 and back, and
alternate the mode (``staged``, ``node_by_node``, ...), so both modes meet the same machine.
Throughout, ``--clients`` (4) threads call ``/v2/models/{name}/infer`` naming no version, as a
service behind the hub does (``tests.fixtures.gateway_clients``: a call every 10 ms per
thread, each answer checked against the version the hub said answered).

Per switch: its wall time (call to 200) and the client calls that failed from its start to
3 s after its answer (the gateway keeps a node list for 2 s; the switches are 4 s apart, so
windows do not overlap). Reported per placement and mode: median wall time, the ratio
staged / node_by_node, calls answered and calls failed, with the first error.

Results: ``bench/results/rollout_modes-<UTC timestamp>.json``. Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stack import Api, LocalStack, machine, median, table, tell, temp_workdir, write_results
from rollouts import STARTED, blocking_call, start_nodes, wait_until_up
from switch_latency import add_version

MODES = ("staged", "node_by_node")
PLACEMENTS = (["b"], ["local", "b"])
#: After a switch's answer, how long its failures are still its own (the gateway's node list
#: lives 2 s).
AFTERMATH_S = 3.0


def run_placement(
    api: Api, clients: Any, name: str, nodes: list[str], count: int, current: int
) -> tuple[list[dict[str, Any]], int]:
    placed = blocking_call(api, "PUT", f"/api/v1/models/{name}/placement", {"nodes": nodes})
    tell(f"placement {', '.join(nodes)}: {placed['seconds']:.2f} s")
    time.sleep(AFTERMATH_S)
    done = []
    for i in range(count):
        mode = MODES[i % 2]
        to = 2 if current == 1 else 1
        began = time.monotonic()
        call = blocking_call(
            api, "POST", f"/api/v1/models/{name}/serve", {"version": to, "rollout": mode}
        )
        answered = time.monotonic()
        time.sleep(AFTERMATH_S)
        window = [a for a in list(clients.answers) if began <= a[0] <= answered + AFTERMATH_S]
        failed = [why for _, _, why in window if why]
        done.append({
            "placement": nodes, "mode": mode, "from": current, "to": to,
            "seconds": call["seconds"], "calls": len(window), "failed": len(failed),
            "first_error": failed[0] if failed else "",
        })  # fmt: skip
        tell(f"  {', '.join(nodes)} {mode}: v{current}->v{to} {call['seconds']:.2f} s, "
             f"{len(window)} calls, {len(failed)} failed")  # fmt: skip
        current = to
    return done, current


def summarise(switches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for nodes in PLACEMENTS:
        medians = {}
        for mode in MODES:
            mine = [s for s in switches if s["placement"] == nodes and s["mode"] == mode]
            if not mine:
                continue
            medians[mode] = median([s["seconds"] for s in mine])
            rows.append({
                "placement": ", ".join(nodes), "mode": mode, "switches": len(mine),
                "wall_median_s": round(medians[mode], 3),
                "calls": sum(s["calls"] for s in mine),
                "failed": sum(s["failed"] for s in mine),
                "first_error": next((s["first_error"] for s in mine if s["failed"]), ""),
            })  # fmt: skip
        if len(medians) == 2:
            ratio = medians["staged"] / medians["node_by_node"]
            for row in rows[-2:]:
                row["staged_over_node_by_node"] = round(ratio, 2)
    return rows


def report(rows: list[dict[str, Any]], path: Path) -> None:
    lines = [("placement", "mode", "switches", "median s", "staged / node_by_node", "calls",
              "failed")]  # fmt: skip
    for row in rows:
        lines.append((
            row["placement"], row["mode"], str(row["switches"]), f"{row['wall_median_s']:.2f}",
            f"{row.get('staged_over_node_by_node', 0):.2f}", str(row["calls"]),
            str(row["failed"]),
        ))  # fmt: skip
    print()
    print(table(lines))
    for row in rows:
        if row["first_error"]:
            print(f"{row['placement']} {row['mode']}: first error: {row['first_error'][:200]}")
    print(f"results: {path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--switches", type=int, default=8, help="per placement (default 8)")
    parser.add_argument("--clients", type=int, default=4, help="/v2 client threads (default 4)")
    parser.add_argument("--keep-temp", action="store_true", help="keep the stack and node logs")
    args = parser.parse_args()
    if args.switches < 2:
        parser.error("--switches must be >= 2")

    from tests.fixtures.gateway_clients import Clients
    from tests.fixtures.pipeline import mlp_payload
    from tests.fixtures.triton import reference_outputs

    began = time.monotonic()
    results: dict[str, Any] = {"benchmark": "rollout_modes", "machine": machine()}
    results["settings"] = {"switches": args.switches, "clients": args.clients}
    with temp_workdir("hub-bench-rollout-modes-", args.keep_temp) as workdir:
        # The clients are production traffic: no per-user rate limit, and room for them all.
        extra = {"INFER_RATE_PER_MINUTE": "0", "INFER_CONCURRENCY_PER_USER": "64",
                 "RECONCILE_SECONDS": "3600"}  # fmt: skip
        stack = LocalStack(workdir / "var", extra_env=extra)
        try:
            stack.start()
            api = Api(stack.url, stack.token)
            up = wait_until_up(api, start_nodes(["b"], stack.env, workdir, 180.0))
            if up != ["b"]:
                raise SystemExit("node b did not come up")
            name = f"bench-modes-{int(time.time())}"
            api.call("POST", "/api/v1/models", {"name": name, "target": "onnxruntime"}, 201)
            for v in (1, 2):
                source = workdir / f"mlp-v{v}.onnx"
                source.write_bytes(mlp_payload(v))
                add_version(api, name, source, allow_duplicate=False)
            blocking_call(api, "POST", f"/api/v1/models/{name}/serve", {"version": 1})
            x = np.random.default_rng(5).standard_normal((1, 8)).astype(np.float32)
            references = {v: reference_outputs(mlp_payload(v), x) for v in (1, 2)}
            address = f"127.0.0.1:{stack.port}"
            switches: list[dict[str, Any]] = []
            current = 1
            with Clients(address, stack.token, references, x, threads=args.clients,
                         model=name) as clients:  # fmt: skip
                for nodes in PLACEMENTS:
                    done, current = run_placement(
                        api, clients, name, list(nodes), args.switches, current
                    )
                    switches += done
            results["switches"] = switches
            results["summary"] = summarise(switches)
        finally:
            for node in reversed(STARTED):
                node.stop()
            stack.stop()
    results["run_seconds"] = round(time.monotonic() - began, 1)
    path = write_results("rollout_modes", results)
    report(results["summary"], path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
