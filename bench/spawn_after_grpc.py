"""How often a child dies before ``exec`` when its parent has used gRPC: old path vs new.

    .venv/bin/python bench/spawn_after_grpc.py              # 600 starts per path
    .venv/bin/python bench/spawn_after_grpc.py --starts 2000

Evidence for the cause of "tritonserver exited with status -6 before becoming ready"
(``epoll_wait error: Bad file descriptor``). One embedded Triton runs on free ports; this
process talks gRPC to it (``tritonclient.grpc``), as the web process, the workers and the
test suite do, while two spinning processes keep both cores busy. Then it starts
``/bin/true`` ``--starts`` times on each path, alternating:

* **old**: ``subprocess.Popen(..., preexec_fn=...)`` as the launcher did before (the
  function set ``PR_SET_PDEATHSIG``); a ``preexec_fn`` makes CPython use plain ``fork()``,
  which runs gRPC's fork handlers in the child;
* **new**: ``model_store.spawn.start(..., die_with_parent=SIGKILL)``: ``vfork()`` + exec of
  a trampoline that sets the signal and execs the program; no fork handlers run.

It counts exit statuses per path and the time per start. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import ctypes
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import tritonclient.grpc as grpcclient
from _stack import machine, median, table, tell, temp_workdir, write_results

from model_store import spawn
from model_store.runtime.access import GRPC_API_KEY_HEADER
from model_store.runtime.embedded import EmbeddedTriton, free_ports

TRUE = "/bin/true"


def _old_preexec() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))


def start_old() -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # the path the fix removed, kept here to measure it
        [TRUE],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_old_preexec,
    )


def start_new() -> subprocess.Popen[bytes]:
    return spawn.start(
        [TRUE],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        die_with_parent=signal.SIGKILL,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--starts", type=int, default=600, help="starts per path")
    parser.add_argument("--keep-temp", action="store_true")
    args = parser.parse_args()
    with temp_workdir("spawn-bench-", args.keep_temp) as work:
        repository = work / "repository"
        repository.mkdir()
        http_port, grpc_port, metrics_port = free_ports(3)
        triton = EmbeddedTriton(
            repository, work / "backends", http_port=http_port, grpc_port=grpc_port,
            metrics_port=metrics_port, workdir=work / "triton-work",
        )  # fmt: skip
        spinners = [
            spawn.start([sys.executable, "-c", "while True: pass"], die_with_parent=signal.SIGKILL)
            for _ in range(2)
        ]
        try:
            triton.start()
            triton.wait_ready(60)
            client = grpcclient.InferenceServerClient(triton.urls["grpc"])
            key = {GRPC_API_KEY_HEADER: triton.api_key}  # the index is restricted to the hub
            for _ in range(20):
                client.get_model_repository_index(headers=key)
            results = run_paths(client, args.starts)
            client.close()
        finally:
            for proc in spinners:
                proc.kill()
                proc.wait(10)
            triton.stop()
    report(results, args.starts)


def run_paths(client: grpcclient.InferenceServerClient, starts: int) -> dict[str, dict]:
    paths = {"old (preexec_fn, fork)": start_old, "new (spawn.start, vfork)": start_new}
    outcomes = {name: Counter[str]() for name in paths}
    times: dict[str, list[float]] = {name: [] for name in paths}
    for i in range(starts):
        for name, start in paths.items():
            began = time.perf_counter()
            proc = start()
            returncode = proc.wait(30)
            times[name].append(time.perf_counter() - began)
            outcomes[name][spawn.describe_exit(returncode)] += 1
        if i % 10 == 0:
            client.is_server_live()
    return {
        name: {"outcomes": dict(outcomes[name]), "median_ms": median(times[name]) * 1000}
        for name in paths
    }


def report(results: dict[str, dict], starts: int) -> None:
    rows = [["path", "starts", "failed", "exit statuses", "median start to exit (ms)"]]
    for name, data in results.items():
        failed = starts - data["outcomes"].get("status 0", 0)
        statuses = ", ".join(f"{k}: {v}" for k, v in sorted(data["outcomes"].items()))
        rows.append([name, str(starts), str(failed), statuses, f"{data['median_ms']:.1f}"])
    tell(table(rows))
    path = write_results(
        "spawn_after_grpc", {"machine": machine(), "starts": starts, "results": results}
    )
    tell(f"results: {Path(path)}")


if __name__ == "__main__":
    main()
