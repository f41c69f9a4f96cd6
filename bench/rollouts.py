"""Rollout time across 1, 2, 3 and 4 nodes, against a single node's switch, in one run.

    .venv/bin/python bench/rollouts.py                  # about 5 minutes
    .venv/bin/python bench/rollouts.py --switches 6 --nodes 3

One private stack (node ``local``, ``python -m webapp.stack``) and ``--nodes`` - 1 more nodes
``b``, ``c``, ``d`` started beside it with ``make node NAME=...``, each its own Triton and
Celery worker, all on this machine. One model, the product tests' MLP
(``tests.fixtures.pipeline.mlp_payload``: versions 1 and 2 answer differently), target
``onnxruntime``, both versions packaged, version 1 served. Every node is up before anything is
timed, so every phase runs beside the same idle processes.

* **Baseline: one node.** Placement ``{"nodes": ["local"]}``, then ``--switches`` (10) calls
  alternating ``POST /api/v1/models/{name}/serve?wait=true`` to version 2 and back to 1,
  each timed from sending the call to its 200 (the job saw the version READY). Half of them
  before the multi-node phases and half after (placement back to local alone), so a machine
  that got slower or faster meanwhile shows.
* **Rollouts.** Placement ``local, b``, then ``local, b, c``, then ``local, b, c, d``, each
  applied with ``PUT .../placement?wait=true`` (which places the served version on the new
  node: a download), then the same ``--switches`` alternating calls. A call returns when the
  job rolled the version out (webapp/registry/serving/switch.py ``_run_rollout``, staged
  since 2026-12): every other node first loads the new version beside the old through
  ``node.compare`` on its queue (fetching the version's package tar over HTTP unless it has
  it), then local switches in the hub's worker, then every other node is pinned to the new
  version through ``node.place`` (which unloads the old one).

Reported per phase: the median wall time of a call, its ratio to the one-node median, the
added time per extra node; from each switch's history event every node's staging step
(``data.staged``) and every node's step (``data.nodes``: local's switch, the others' pins),
split into steps that downloaded the package (``fetched``: the first time a node serves a
version) and steps that did not; and "orchestration", the call's wall time less the sum of
its steps, staging included (the API, the lock, Celery's queueing, the API's polling of the
job).

What it measures: every node shares this machine's cores with the hub, so this is the
hub's orchestration cost and each node's serial step time, not the wall time of a fleet of
separate hosts (there a node's step costs the same, and a rollout is still serial by design:
node by node, stopping at the first that fails). A 409 ``switch_in_progress`` (the periodic
reconcile holds the model's lock for a moment) is retried after 0.2 s, as in
bench/switch_latency.py; the time is the attempt that went through.

Results: ``bench/results/rollouts-<UTC timestamp>.json``. Nothing here asserts a timing.
There is no ``--url`` mode: the nodes must join the stack this script starts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stack import (
    MIB,
    ROOT,
    Api,
    ApiError,
    LocalStack,
    machine,
    median,
    stop_group,
    table,
    tell,
    temp_workdir,
    write_results,
)
from switch_latency import add_version

from model_store import spawn

EXTRA_NODES = ("b", "c", "d")
NODE_READY = "ready (Ctrl-C stops this node only)"


# --------------------------------------------------------------------------- nodes


class NodeProcess:
    """``make node NAME=<name>`` beside the stack; stopped like Ctrl-C in its terminal."""

    def __init__(self, name: str, env: dict[str, str], log_path: Path) -> None:
        self.name, self.env, self.log_path = name, env, log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready_after = 0.0
        self.started_at = 0.0
        # The launcher puts Triton and the worker in sessions of their own: remembered by pid
        # (and start time, via psutil) so that a crashed launcher leaves none behind.
        self._known: dict[int, psutil.Process] = {}

    def start(self) -> None:
        self.started_at = time.monotonic()
        with self.log_path.open("wb") as out:
            self.proc = spawn.start(
                ["make", "--no-print-directory", "node", f"NAME={self.name}"],
                cwd=ROOT, env=self.env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, new_session=True,
            )  # fmt: skip

    def poll_ready(self) -> bool:
        """True once the node said it is ready; raises if the launcher exited first."""
        assert self.proc is not None
        self._remember_descendants()
        if NODE_READY in self.log_path.read_text(errors="replace"):
            if not self.ready_after:
                self.ready_after = time.monotonic() - self.started_at
            return True
        if self.proc.poll() is not None:
            raise RuntimeError(f"node {self.name} exited with {self.proc.returncode}")
        return False

    def _remember_descendants(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in psutil.Process(self.proc.pid).children(recursive=True):
                self._known.setdefault(child.pid, child)

    def memory_mib(self) -> float:
        """The launcher, its Triton and its worker: PSS (RSS where PSS cannot be read)."""
        self._remember_descendants()
        assert self.proc is not None
        return _memory_mib([psutil.Process(self.proc.pid), *self._known.values()])

    def stop(self) -> None:
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            with contextlib.suppress(psutil.NoSuchProcess):
                for child in psutil.Process(proc.pid).children(recursive=True):
                    self._known.setdefault(child.pid, child)
        stop_group(proc, list(self._known.values()), f"node {self.name}", wait_s=60)


def _memory_mib(procs: list[psutil.Process]) -> float:
    total = 0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            info = proc.memory_full_info()
            total += getattr(info, "pss", 0) or info.rss
    return round(total / MIB, 1)


#: Every node started, stopped (newest first) however the run ends.
STARTED: list[NodeProcess] = []


def stack_memory_mib(stack: LocalStack) -> float:
    if stack.proc is None:
        return 0.0
    top = psutil.Process(stack.proc.pid)
    return _memory_mib([top, *top.children(recursive=True)])


def start_nodes(names: list[str], env: dict[str, str], logs: Path, timeout: float) -> list[str]:
    """Starts the nodes together; returns the names of those ready within ``timeout``."""
    nodes = {name: NodeProcess(name, env, logs / f"node-{name}.log") for name in names}
    STARTED.extend(nodes.values())
    for node in nodes.values():
        node.start()
    tell(f"starting nodes {', '.join(names)} (make node) …")
    deadline = time.monotonic() + timeout
    waiting = set(names)
    while waiting and time.monotonic() < deadline:
        for name in sorted(waiting):
            try:
                if nodes[name].poll_ready():
                    tell(f"  node {name} ready in {nodes[name].ready_after:.1f} s")
                    waiting.discard(name)
            except RuntimeError as exc:
                tell(f"  {exc}; going on without it")
                waiting.discard(name)
                nodes[name].ready_after = -1
        time.sleep(0.25)
    for name in waiting:
        tell(f"  node {name} not ready in {timeout:.0f} s; going on without it")
    ready = [n for n in names if nodes[n].ready_after > 0]
    for name in set(names) - set(ready):
        nodes[name].stop()
    return ready


def wait_until_up(api: Api, names: list[str], timeout: float = 90.0) -> list[str]:
    """The nodes the hub sees ``up`` (a node that never reported is ``down`` and a rollout
    step to it would stop at once)."""
    deadline = time.monotonic() + timeout
    up: list[str] = []
    while time.monotonic() < deadline:
        states = {n["name"]: n["state"] for n in api.call("GET", "/api/v1/nodes")["nodes"]}
        up = [n for n in names if states.get(n) == "up"]
        if len(up) == len(names):
            break
        time.sleep(0.5)
    return up


# --------------------------------------------------------------------------- API calls


def _ts(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def blocking_call(api: Api, method: str, path: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A ``?wait=true`` state change, timed from sending it to its answer; retries a 409
    ``switch_in_progress`` after 0.2 s (the time is then the attempt that went through)."""
    body = json.dumps(payload).encode()
    headers = {"Content-Type": "application/json"}
    retries = 0
    while True:
        t0 = time.perf_counter()
        status, _, data = api.raw(method, f"{path}?wait=true", body, headers)
        seconds = time.perf_counter() - t0
        answer = json.loads(data) if data else {}
        if status == 409 and answer.get("code") == "switch_in_progress" and retries < 50:
            retries += 1
            time.sleep(0.2)
            continue
        break
    if status != 200:
        raise ApiError(f"{method} {path} -> {status}: {answer.get('error')} {answer.get('log')}")
    job = api.call("GET", f"/api/v1/jobs/{answer['job']}")
    created, started, finished = (_ts(job.get(k)) for k in ("created", "started", "finished"))
    return {
        "seconds": seconds,
        "retries": retries,
        "job": answer["job"],
        "job_queue_seconds": (started - created).total_seconds() if created and started else None,
        "job_run_seconds": (finished - started).total_seconds() if started and finished else None,
        "log": answer.get("log", []),
    }


def newest_switch_event(api: Api, model: str) -> dict[str, Any]:
    events = api.call("GET", f"/api/v1/models/{model}/history")["events"]
    return next(e for e in events if e["kind"] in ("serve", "rollback"))


def node_steps(event: dict[str, Any]) -> list[dict[str, Any]]:
    """Each node's step of a switch; a switch on local alone (the path from before nodes)
    keeps one duration, turned into local's step here."""
    data = event["data"]
    if "nodes" in data:
        return [dict(step) for step in data["nodes"]]
    return [
        {"node": "local", "ok": True, "from_version": data.get("from"),
         "to_version": data.get("to"), "duration_s": data.get("duration_s"), "fetched": False,
         "triton_load_s": data.get("load_s")}
    ]  # fmt: skip


def place(api: Api, model: str, nodes: list[str]) -> dict[str, Any]:
    result = blocking_call(api, "PUT", f"/api/v1/models/{model}/placement", {"nodes": nodes})
    tell(f"placement {', '.join(nodes)}: {result['seconds']:.2f} s")
    for line in result["log"]:
        if line.startswith("Node "):
            tell(f"    {line}")
    return {"nodes": nodes} | result


def switches(
    api: Api, model: str, label: str, count: int, current: int, phase_nodes: list[str]
) -> tuple[list[dict[str, Any]], int]:
    """``count`` serves alternating between versions 1 and 2; returns them and the version
    served at the end."""
    done = []
    for i in range(count):
        to = 2 if current == 1 else 1
        path = f"/api/v1/models/{model}/serve"
        call = blocking_call(api, "POST", path, {"version": to, "reason": f"bench {label} {i}"})
        event = newest_switch_event(api, model)
        steps = node_steps(event)
        if event["data"].get("to") != to or [s["node"] for s in steps] != phase_nodes:
            raise RuntimeError(f"unexpected event after switch to v{to}: {event}")
        staged = [dict(step) for step in event["data"].get("staged", [])]
        step_sum = sum(float(s["duration_s"] or 0) for s in [*staged, *steps])
        call |= {
            "phase": label, "from": current, "to": to, "steps": steps, "staged": staged,
            "steps_sum_seconds": step_sum, "orchestration_seconds": call["seconds"] - step_sum,
        }  # fmt: skip
        done.append(call)
        parts = ", ".join(
            f"{s['node']} {s['duration_s']:.2f}{'*' if s.get('fetched') else ''}" for s in steps
        )
        tell(f"  {label} {i + 1}: v{current}->v{to} {call['seconds']:.2f} s ({parts})")
        current = to
    return done, current


# --------------------------------------------------------------------------- summary


def _med(values: list[float]) -> float | None:
    return round(median(values), 3) if values else None


def summarise(phases: dict[str, list[dict[str, Any]]], baseline: float) -> list[dict[str, Any]]:
    rows = []
    for label, calls in phases.items():
        count = len(calls[0]["steps"])
        walls = [c["seconds"] for c in calls]
        steps = [s for c in calls for s in c["steps"]]
        remote = [s for s in steps if s["node"] != "local"]
        wall = median(walls)
        per_node: dict[str, dict[str, Any]] = {}
        for name in dict.fromkeys(s["node"] for s in steps):
            mine = [s for s in steps if s["node"] == name]
            per_node[name] = {
                "median_cached_s": _med([s["duration_s"] for s in mine if not s.get("fetched")]),
                "median_fetched_s": _med([s["duration_s"] for s in mine if s.get("fetched")]),
                "fetched": sum(1 for s in mine if s.get("fetched")),
                "steps": len(mine),
            }
        rows.append(
            {
                "phase": label,
                "nodes": count,
                "switches": len(calls),
                "wall_median_s": round(wall, 3),
                "wall_min_s": round(min(walls), 3),
                "wall_max_s": round(max(walls), 3),
                "ratio_to_one_node": round(wall / baseline, 2),
                "added_per_extra_node_s": round((wall - baseline) / (count - 1), 3)
                if count > 1
                else None,
                "local_step_median_s": _med(
                    [s["duration_s"] for s in steps if s["node"] == "local"]
                ),
                "remote_step_median_cached_s": _med(
                    [s["duration_s"] for s in remote if not s.get("fetched")]
                ),
                "remote_step_median_fetched_s": _med(
                    [s["duration_s"] for s in remote if s.get("fetched")]
                ),
                "remote_steps_fetched": sum(1 for s in remote if s.get("fetched")),
                "remote_steps": len(remote),
                "staging_median_s": _med(
                    [s["duration_s"] for c in calls for s in c.get("staged", [])]
                ),
                "orchestration_median_s": _med([c["orchestration_seconds"] for c in calls]),
                "job_queue_median_s": _med(
                    [c["job_queue_seconds"] for c in calls if c["job_queue_seconds"] is not None]
                ),
                "per_node": per_node,
            }
        )
    return rows


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def report(results: dict[str, Any], path: Path) -> None:
    rows = [
        ("nodes", "switches", "median s", "min", "max", "x 1 node", "+ per node",
         "staging", "local step", "remote step", "remote, download", "orchestration"),
    ]  # fmt: skip
    for row in results["summary"]:
        fetched = row["remote_step_median_fetched_s"]
        rows.append(
            (
                str(row["nodes"]),
                str(row["switches"]),
                _s(row["wall_median_s"]),
                _s(row["wall_min_s"]),
                _s(row["wall_max_s"]),
                f"{row['ratio_to_one_node']:.2f}",
                _s(row["added_per_extra_node_s"]),
                _s(row["staging_median_s"]),
                _s(row["local_step_median_s"]),
                _s(row["remote_step_median_cached_s"]),
                f"{_s(fetched)} ({row['remote_steps_fetched']})" if fetched is not None else "-",
                _s(row["orchestration_median_s"]),
            )
        )
    print()
    print(
        f"Rollouts of {results['model']} (MLP, onnxruntime), seconds; one-node baseline median "
        f"{results['baseline_median_s']:.2f} s over {results['baseline_switches']} switches "
        f"(before the others {_s(results['summary'][0]['before_median_s'])} s, after "
        f"{_s(results['summary'][0]['after_median_s'])} s)"
    )
    print(table(rows))
    print()
    for row in results["summary"]:
        if row["nodes"] > 1:
            cells = "; ".join(
                f"{name} {_s(v['median_cached_s'])}"
                + (f" (download {_s(v['median_fetched_s'])})" if v["fetched"] else "")
                for name, v in row["per_node"].items()
            )
            print(f"{row['phase']}: per node, median step: {cells}")
    mem = results["memory_mib"]
    print(
        f"memory (PSS): stack {mem['stack']:.0f} MiB, nodes "
        + ", ".join(f"{k} {v:.0f}" for k, v in mem["nodes"].items())
        + f" MiB; available {mem['available_before_nodes']:.0f} -> "
        f"{mem['available_with_nodes']:.0f} MiB"
    )
    if results["missing_nodes"]:
        print(f"nodes that did not start or come up: {', '.join(results['missing_nodes'])}")
    print(f"run took {results['run_seconds']:.0f} s; results: {path}")


# --------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--switches",
        type=int,
        default=10,
        help="timed switches per phase, alternating v1->v2 and back (default 10); the "
        "one-node baseline has as many, half before the multi-node phases and half after",
    )
    parser.add_argument(
        "--nodes", type=int, default=4, choices=(2, 3, 4), help="most nodes (default 4)"
    )
    parser.add_argument(
        "--node-timeout", type=float, default=180.0, help="seconds for the nodes to start"
    )
    parser.add_argument(
        "--worker-concurrency", type=int, default=1, help="the hub's Celery worker processes"
    )
    parser.add_argument(
        "--keep-temp", action="store_true", help="keep the temp dir (stack and node logs)"
    )
    args = parser.parse_args()
    if args.switches < 2:
        parser.error("--switches must be >= 2")

    from tests.fixtures.pipeline import mlp_payload

    began = time.monotonic()
    results: dict[str, Any] = {"benchmark": "rollouts", "machine": machine()}
    results["settings"] = {"switches": args.switches, "nodes": args.nodes}
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    with temp_workdir("hub-bench-rollouts-", args.keep_temp) as workdir:
        files = {}
        for v in (1, 2):
            files[v] = workdir / f"mlp-v{v}.onnx"
            files[v].write_bytes(mlp_payload(v))
        stack = LocalStack(workdir / "var", worker_concurrency=args.worker_concurrency)
        try:
            stack.start()
            results["memory_mib"] = {
                "available_before_nodes": psutil.virtual_memory().available / MIB
            }
            api = Api(stack.url, stack.token)
            ready = start_nodes(
                list(EXTRA_NODES[: args.nodes - 1]), stack.env, workdir, args.node_timeout
            )
            up = wait_until_up(api, ready)
            results["missing_nodes"] = [n for n in EXTRA_NODES[: args.nodes - 1] if n not in up]
            results["node_start_seconds"] = {n.name: round(n.ready_after, 1) for n in STARTED}
            if not up:
                raise SystemExit("no extra node came up: nothing to roll out to")
            tell(f"nodes up: local, {', '.join(up)}")
            results["memory_mib"] |= {
                "available_with_nodes": psutil.virtual_memory().available / MIB,
                "stack": stack_memory_mib(stack),
                "nodes": {n.name: n.memory_mib() for n in STARTED if n.name in up},
            }

            name = f"bench-rollout-{int(time.time())}"
            api.call("POST", "/api/v1/models", {"name": name, "target": "onnxruntime"}, 201)
            for v in (1, 2):
                made = add_version(api, name, files[v], allow_duplicate=False)
                tell(f"version {made['version']} packaged in {made['job_seconds']:.1f} s")
            first = blocking_call(api, "POST", f"/api/v1/models/{name}/serve", {"version": 1})
            tell(f"v1 served on local (first load, untimed) in {first['seconds']:.2f} s")

            half = args.switches // 2
            phases: dict[str, list[dict[str, Any]]] = {}
            placements = [place(api, name, ["local"])]
            phases["1 node, before"], current = switches(api, name, "1 node", half, 1, ["local"])
            for count in range(2, len(up) + 2):
                nodes = ["local", *up[: count - 1]]
                placements.append(place(api, name, nodes))
                phases[f"{count} nodes"], current = switches(
                    api, name, f"{count} nodes", args.switches, current, nodes
                )
            placements.append(place(api, name, ["local"]))
            phases["1 node, after"], current = switches(
                api, name, "1 node", args.switches - half, current, ["local"]
            )
            api.close()
        finally:
            for node in reversed(STARTED):
                node.stop()
            if STARTED:
                tell("nodes stopped")
            stack.stop()

    one_node = phases["1 node, before"] + phases["1 node, after"]
    baseline = median([c["seconds"] for c in one_node])
    ordered = {"1 node": one_node} | {k: v for k, v in phases.items() if not k.startswith("1 ")}
    summary = summarise(ordered, baseline)
    for label in ("1 node, before", "1 node, after"):
        part = summarise({label: phases[label]}, baseline)[0]
        summary[0][label.split(", ")[1] + "_median_s"] = part["wall_median_s"]
    results |= {
        "model": name,
        "baseline_median_s": round(baseline, 3),
        "baseline_switches": len(one_node),
        "placements": placements,
        "phases": phases,
        "summary": summary,
        "run_seconds": time.monotonic() - began,
    }
    path = write_results(f"rollouts-{stamp}", results)
    report(results, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
