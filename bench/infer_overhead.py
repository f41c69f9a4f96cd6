"""What the hub's inference paths add over calling Triton directly (issue 19).

    .venv/bin/python bench/infer_overhead.py                      # about 3 minutes
    .venv/bin/python bench/infer_overhead.py --rounds 8 --requests 30 --seconds 3

One private stack serving two models through the product: the demo EfficientNet-Lite0
(``POST /api/v1/demo``; input ``input`` float32 [1, 3, 224, 224], the espresso photo
preprocessed once here, 588 KiB) and the tests' MLP (``tests.fixtures.pipeline.mlp_payload(1)``;
input ``x`` float32 [1, 8]), which shows the fixed cost per request. The same tensor goes
through every path (``tritonclient.http`` unless noted):

1. ``direct-binary``: Triton's HTTP port, binary tensors (the baseline);
2. ``direct-json``: Triton's HTTP port, the protocol's JSON (``binary_data=False``);
3. ``gateway-binary``: the hub's ``/v2`` (its fast path, webapp/edge/gateway_fast.py), binary
   tensors, ``Bearer`` token;
4. ``gateway-json``: the hub's ``/v2``, JSON;
5. ``api-v2json``: ``POST /api/v1/models/{name}/infer`` with the protocol's JSON body;
6. ``api-b64``: the same endpoint with ``{"b64", "shape"}``;
7. ``api-list``: the same endpoint with a nested JSON list;

plus ``onnxruntime``: in-process ONNX Runtime on the packaged file with the options our
onnxruntime backend gives Triton's copy (a reference: no network, no serialisation; no goal),
and three floors with no tensor, to tell where the gateway's time goes: Triton's
``/v2/health/live``, the hub's ``/api/v1/health/live`` (no auth) and the hub's
``/v2/health/live`` (token, gateway view, a Triton round trip).

Paths 5-7 use one keep-alive ``http.client`` connection and, like tritonclient, build the JSON
body and parse the answer on every request. Every path is first checked to give the same top
class. At concurrency 1, ``--rounds`` rounds each send ``--requests`` requests per path, the
paths taking turns (A B C ... A B C ..., the order rotated each round) so that load from
elsewhere hits them alike: p50/p90 per path. At ``--concurrency`` (8) threads, each with its own
client, paths 1 and 3 take turns for ``--seconds`` per round: requests per second.

Ratios, each from this one run, against the issue's goals: gateway binary p50 - direct binary
p50 (<= +2 ms), gateway binary throughput / direct (>= 0.8 for the demo), and the friendly forms
(5, 6, 7) p50 / direct JSON p50 (<= 2x). The private stack runs with the per-user rate limit off
and room for 16 concurrent requests per user. Results: bench/results/infer_overhead-<time>.json.
"""

from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import http.client
import json
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from _stack import (
    ROOT,
    Api,
    LocalStack,
    machine,
    median,
    percentile,
    table,
    tell,
    temp_workdir,
    write_results,
)

DEMO = "efficientnet-lite0"
MLP = "mlp"
PHOTO = ROOT / "demo" / "images" / "coffee.png"
BASELINE = "direct-binary"
PATHS = {
    "onnxruntime": "in-process ONNX Runtime (reference)",
    "direct-binary": "1. direct Triton HTTP, binary",
    "direct-json": "2. direct Triton HTTP, v2 JSON",
    "gateway-binary": "3. hub /v2 gateway, binary",
    "gateway-json": "4. hub /v2 gateway, v2 JSON",
    "api-v2json": "5. hub infer API, v2 JSON body",
    "api-b64": "6. hub infer API, {b64, shape}",
    "api-list": "7. hub infer API, nested list",
}
#: Requests with no tensor, to tell apart where the gateway's time goes (no goal).
FLOORS = {
    "triton-live": "GET Triton /v2/health/live (direct)",
    "hub-live": "GET hub /api/v1/health/live (web server + Django, no auth)",
    "gateway-live": "GET hub /v2/health/live (+ token, gateway view, Triton round trip)",
}
THROUGHPUT_PATHS = ("direct-binary", "gateway-binary")
FRIENDLY = ("api-v2json", "api-b64", "api-list")
GOAL_ADDED_MS = 2.0
GOAL_THROUGHPUT = 0.8
GOAL_FRIENDLY = 2.0


# --------------------------------------------------------------------------- models


@dataclass
class Subject:
    """A served model and the one tensor every path sends it."""

    name: str
    input_name: str
    tensor: np.ndarray
    outputs: list[str]
    artifact: Path
    intra_threads: int


def serve_demo(api: Api, timeout: float = 600) -> None:
    api.call("POST", "/api/v1/demo", {}, expect=201)
    deadline = time.monotonic() + timeout
    while not api.call("GET", f"/api/v1/models/{DEMO}").get("serving_version"):
        if time.monotonic() > deadline:
            raise SystemExit(f"{DEMO} was not served within {timeout} s")
        time.sleep(0.5)


def serve_mlp(api: Api, timeout: float = 300) -> None:
    from tests.fixtures.multipart import multipart_file
    from tests.fixtures.pipeline import mlp_payload

    api.call("POST", "/api/v1/models", {"name": MLP, "target": "onnxruntime"}, expect=201)
    body, ctype = multipart_file(mlp_payload(1))
    status, _, data = api.raw(
        "POST", f"/api/v1/models/{MLP}/versions", body, {"Content-Type": ctype}
    )
    if status != 201:
        raise SystemExit(f"uploading the MLP failed: {status} {data[:300]!r}")
    deadline = time.monotonic() + timeout
    while api.call("GET", f"/api/v1/models/{MLP}/versions/1")["status"] != "ready":
        if time.monotonic() > deadline:
            raise SystemExit(f"the MLP was not packaged in {timeout} s")
        time.sleep(0.5)
    api.call("POST", f"/api/v1/models/{MLP}/serve?wait=true", {"version": 1})


def describe(api: Api, stack: LocalStack, name: str, tensor: np.ndarray) -> Subject:
    """The served version's input and outputs, and its packaged file (for ONNX Runtime)."""
    from model_store.inference import specs_from_signature

    number = api.call("GET", f"/api/v1/models/{name}")["serving_version"]
    version = api.call("GET", f"/api/v1/models/{name}/versions/{number}")
    threads = re.search(
        r'key: "intra_op_thread_count"\s*value\s*\{\s*string_value: "(\d+)"', version["config"]
    )
    store = stack.var_dir / "store" / "repository" / name / str(number)
    return Subject(
        name=name,
        input_name=specs_from_signature(version["signature"], "inputs")[0].name,
        tensor=tensor,
        outputs=[s.name for s in specs_from_signature(version["signature"], "outputs")],
        artifact=store / version["artifact"]["name"],
        # The backend's default when the config sets none (model_store/backends/onnxruntime).
        intra_threads=int(threads.group(1)) if threads else 1,
    )


def demo_tensor(api: Api) -> np.ndarray:
    from model_store.inference import PRESETS, decode_image, image_to_tensor, specs_from_signature

    version = api.call("GET", f"/api/v1/models/{DEMO}/versions/1")
    spec = specs_from_signature(version["signature"], "inputs")[0]
    image = decode_image(PHOTO.read_bytes(), 40_000_000)
    return np.ascontiguousarray(image_to_tensor(image, spec, PRESETS["efficientnet"]))


# --------------------------------------------------------------------------- the paths

#: One client of one path: ``call()`` sends one request and returns the first output.
Call = Callable[[], np.ndarray]


@dataclass
class Client:
    call: Call
    close: Callable[[], None] = lambda: None


@dataclass
class Endpoints:
    hub: str  # http://127.0.0.1:PORT
    token: str
    triton_http: str  # 127.0.0.1:PORT
    auth: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.auth = {"Authorization": f"Bearer {self.token}"}


def tritonclient_path(
    subject: Subject, address: str, *, binary: bool, headers: dict[str, str] | None
) -> Client:
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(
        address, connection_timeout=120.0, network_timeout=120.0
    )
    given = httpclient.InferInput(subject.input_name, list(subject.tensor.shape), "FP32")
    given.set_data_from_numpy(subject.tensor, binary_data=binary)
    wanted = [httpclient.InferRequestedOutput(n, binary_data=binary) for n in subject.outputs]
    first = subject.outputs[0]

    def call() -> np.ndarray:
        # A copy each time: tritonclient writes Inference-Header-Content-Length into the
        # dict it is given, which would then go out with a later JSON request.
        sent = dict(headers) if headers is not None else None
        result = client.infer(subject.name, [given], outputs=wanted, headers=sent)
        return np.asarray(result.as_numpy(first))

    return Client(call, client.close)


def api_body(subject: Subject, form: str) -> dict[str, Any]:
    """The infer API's body for ``form``, as a client would hold it before sending."""
    x = subject.tensor
    if form == "api-v2json":
        tensor = {"name": subject.input_name, "shape": list(x.shape), "datatype": "FP32"}
        return {"inputs": [{**tensor, "data": x.reshape(-1).tolist()}]}
    if form == "api-b64":
        b64 = base64.b64encode(x.tobytes()).decode()
        return {"inputs": {subject.input_name: {"b64": b64, "shape": list(x.shape)}}}
    return {"inputs": {subject.input_name: x.tolist()}}


def api_path(subject: Subject, ends: Endpoints, form: str) -> Client:
    api = Api(ends.hub, ends.token)
    body = api_body(subject, form)
    path = f"/api/v1/models/{subject.name}/infer"
    headers = {"Content-Type": "application/json"}

    def call() -> np.ndarray:
        status, _, data = api.raw("POST", path, json.dumps(body).encode(), headers)
        if status != 200:
            raise RuntimeError(f"{status}: {data[:200]!r}")
        answer = json.loads(data)["outputs"][0]
        return np.asarray(answer["data" if form == "api-v2json" else "values"], np.float32)

    return Client(call, api.close)


def onnxruntime_path(subject: Subject) -> Client:
    import onnxruntime as ort

    # The options our onnxruntime backend gives Triton's copy of the same file.
    options = ort.SessionOptions()
    options.intra_op_num_threads = subject.intra_threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(
        str(subject.artifact), options, providers=["CPUExecutionProvider"]
    )
    feed = {subject.input_name: subject.tensor}
    return Client(lambda: np.asarray(session.run(subject.outputs[:1], feed)[0]))


def open_client(key: str, subject: Subject, ends: Endpoints) -> Client:
    if key == "onnxruntime":
        return onnxruntime_path(subject)
    if key.startswith("direct-"):
        return tritonclient_path(
            subject, ends.triton_http, binary=key.endswith("binary"), headers=None
        )
    if key.startswith("gateway-"):
        hub = ends.hub.removeprefix("http://")
        return tritonclient_path(subject, hub, binary=key.endswith("binary"), headers=ends.auth)
    return api_path(subject, ends, key)


def get_path(address: str, path: str, headers: dict[str, str]) -> Client:
    """GET ``path`` on one keep-alive connection; any answer but 200 is an error."""
    host, _, port = address.removeprefix("http://").partition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)

    def call() -> np.ndarray:
        connection.request("GET", path, headers=headers)
        answer = connection.getresponse()
        data = answer.read()
        if answer.status != 200:
            raise RuntimeError(f"GET {path}: {answer.status} {data[:200]!r}")
        return np.zeros(0)

    return Client(call, connection.close)


def floor_clients(ends: Endpoints) -> dict[str, Client]:
    return {
        "triton-live": get_path(ends.triton_http, "/v2/health/live", {}),
        "hub-live": get_path(ends.hub, "/api/v1/health/live", {}),
        "gateway-live": get_path(ends.hub, "/v2/health/live", ends.auth),
    }


def check_same_answer(subject: Subject, clients: dict[str, Client]) -> None:
    """Every path must give the reference's top class before anything is timed."""
    reference = clients["onnxruntime"].call().reshape(-1)
    for key, client in clients.items():
        try:
            got = client.call().reshape(-1)
        except Exception as exc:
            raise SystemExit(f"{subject.name}: {key} failed: {exc}") from exc
        if got.shape != reference.shape or int(np.argmax(got)) != int(np.argmax(reference)):
            raise SystemExit(f"{subject.name}: {key} answers differently from ONNX Runtime")


# --------------------------------------------------------------------------- measuring


def latency_rounds(
    groups: dict[str, dict[str, Client]], args: argparse.Namespace
) -> dict[str, dict[str, list[float]]]:
    """Concurrency 1: per group (a model, or the floors) and path, every timed latency (ms)."""
    samples: dict[str, dict[str, list[float]]] = {
        group: {key: [] for key in clients} for group, clients in groups.items()
    }
    for clients in groups.values():
        for client in clients.values():
            for _ in range(args.warmup):
                client.call()
    for round_no in range(args.rounds):
        tell(f"concurrency 1, round {round_no + 1} of {args.rounds} …")
        for group, clients in groups.items():
            keys = list(clients)
            turn = round_no % len(keys)
            for key in keys[turn:] + keys[:turn]:
                call, mine = clients[key].call, samples[group][key]
                for _ in range(args.requests):
                    started = time.perf_counter()
                    call()
                    mine.append((time.perf_counter() - started) * 1000)
    return samples


@dataclass
class Tally:
    requests: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)


def drive(open_one: Callable[[], Client], threads: int, seconds: float, tally: Tally) -> None:
    """``threads`` threads send requests without pause for ``seconds``; adds to ``tally``.

    Each thread opens its own client and sends one untimed request before the clock starts:
    tritonclient.http runs on gevent, whose connections belong to the thread that made them.
    """
    done = [0] * threads
    start = threading.Barrier(threads + 1)
    deadline = [0.0]

    def worker(index: int) -> None:
        client = None
        try:
            client = open_one()
            client.call()
        except Exception as exc:
            tally.errors.append(f"opening: {exc}"[:200])
        start.wait()
        while client is not None and time.perf_counter() < deadline[0]:
            try:
                client.call()
            except Exception as exc:  # reported, never hidden in the numbers
                tally.errors.append(str(exc)[:200])
                continue
            done[index] += 1
        if client is not None:
            client.close()

    pool = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(threads)]
    for thread in pool:
        thread.start()
    deadline[0] = time.perf_counter() + 3600  # set for real once every client is ready
    start.wait()
    began = time.perf_counter()
    deadline[0] = began + seconds
    for thread in pool:
        thread.join()
    tally.seconds += time.perf_counter() - began
    tally.requests += sum(done)


def throughput_rounds(
    subjects: list[Subject], ends: Endpoints, args: argparse.Namespace
) -> dict[str, dict[str, Tally]]:
    """Concurrency N, paths 1 and 3 taking turns (order reversed every other round)."""
    tallies = {s.name: {key: Tally() for key in THROUGHPUT_PATHS} for s in subjects}
    for round_no in range(args.rounds):
        tell(f"concurrency {args.concurrency}, round {round_no + 1} of {args.rounds} …")
        order = list(THROUGHPUT_PATHS)
        if round_no % 2:
            order.reverse()
        for subject in subjects:
            for key in order:
                drive(
                    functools.partial(open_client, key, subject, ends),
                    args.concurrency,
                    args.seconds,
                    tallies[subject.name][key],
                )
    return tallies


# --------------------------------------------------------------------------- reporting


def summarise(
    samples: dict[str, list[float]], tallies: dict[str, Tally]
) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for key, values in samples.items():
        rows[key] = {
            "requests": len(values),
            "p50_ms": median(values),
            "p90_ms": percentile(values, 90),
            "mean_ms": sum(values) / len(values),
        }
    for key, tally in tallies.items():
        rows[key]["throughput"] = {
            "requests": tally.requests,
            "seconds": tally.seconds,
            "rps": tally.requests / tally.seconds if tally.seconds else 0.0,
            "errors": len(tally.errors),
            "first_errors": tally.errors[:3],
        }
    return rows


def goals(name: str, rows: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The issue's goals for one model, each with its figure and whether it is met."""
    added = rows["gateway-binary"]["p50_ms"] - rows[BASELINE]["p50_ms"]
    found = [
        {
            "model": name,
            "goal": "gateway binary p50 - direct binary p50 (c=1)",
            "value": round(added, 2),
            "unit": "ms",
            "target": f"<= +{GOAL_ADDED_MS:g}",
            "met": added <= GOAL_ADDED_MS,
        }
    ]
    direct_rps = rows[BASELINE]["throughput"]["rps"]
    ratio = rows["gateway-binary"]["throughput"]["rps"] / direct_rps if direct_rps else 0.0
    found.append(
        {
            "model": name,
            "goal": "gateway binary throughput / direct (c=8)",
            "value": round(ratio, 2),
            "unit": "x",
            "target": f">= {GOAL_THROUGHPUT:g}" if name == DEMO else "(reported)",
            "met": ratio >= GOAL_THROUGHPUT if name == DEMO else None,
        }
    )
    for key in FRIENDLY:
        ratio = rows[key]["p50_ms"] / rows["direct-json"]["p50_ms"]
        found.append(
            {
                "model": name,
                "goal": f"{PATHS[key][3:]} p50 / direct v2 JSON p50",
                "value": round(ratio, 2),
                "unit": "x",
                "target": f"<= {GOAL_FRIENDLY:g}",
                "met": ratio <= GOAL_FRIENDLY,
            }
        )
    return found


def print_tables(
    results: dict[str, dict[str, dict[str, Any]]], found: list[dict[str, Any]], threads: int
) -> None:
    for name, rows in results.items():
        base = rows[BASELINE]
        lines = [["path", "p50 ms", "p90 ms", "p50 - direct", f"req/s c={threads}", "/ direct"]]
        for key, row in rows.items():
            rps = row.get("throughput", {}).get("rps")
            lines.append(
                [
                    PATHS[key],
                    f"{row['p50_ms']:.2f}",
                    f"{row['p90_ms']:.2f}",
                    f"{row['p50_ms'] - base['p50_ms']:+.2f}",
                    f"{rps:.1f}" if rps is not None else "",
                    f"{rps / base['throughput']['rps']:.2f}" if rps is not None else "",
                ]
            )
        print(f"\n{name}\n{table(lines)}")
    lines = [["model", "goal", "value", "target", "met"]]
    for goal in found:
        met = {True: "yes", False: "NO", None: "-"}[goal["met"]]
        value = f"{goal['value']:+.2f} ms" if goal["unit"] == "ms" else f"{goal['value']:.2f}x"
        lines.append([goal["model"], goal["goal"], value, goal["target"], met])
    print(f"\ngoals\n{table(lines)}\n")


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rounds", type=int, default=5, help="rounds in which the paths take turns (default 5)"
    )
    parser.add_argument(
        "--requests", type=int, default=20, help="requests per path per round at concurrency 1"
    )
    parser.add_argument(
        "--seconds", type=float, default=2.0, help="seconds per path per round at concurrency N"
    )
    parser.add_argument("--concurrency", type=int, default=8, help="threads for the throughput")
    parser.add_argument("--warmup", type=int, default=5, help="untimed requests per path first")
    parser.add_argument("--worker-concurrency", type=int, default=1)
    parser.add_argument("--keep-temp", action="store_true", help="keep the temp dir (logs)")
    args = parser.parse_args()
    if min(args.rounds, args.requests, args.concurrency) < 1 or args.seconds <= 0:
        parser.error("--rounds, --requests, --concurrency and --seconds must be positive")
    # Speed, not the limiters: no per-minute budget, and room for every thread at once.
    os.environ["INFER_RATE_PER_MINUTE"] = "0"
    os.environ["INFER_CONCURRENCY_PER_USER"] = str(max(16, args.concurrency * 2))

    launched = time.monotonic()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    data: dict[str, Any] = {"benchmark": "infer_overhead", "machine": machine()}
    # The gateway changes often while its speed is worked on: which one was measured.
    gateway = b"".join(
        (ROOT / "webapp" / name).read_bytes()
        for name in ("gateway.py", "edge/gateway_fast.py", "fast_path_reads.py")
    )
    data["gateway_py_sha256"] = hashlib.sha256(gateway).hexdigest()[:12]
    data["settings"] = {
        k: getattr(args, k) for k in ("rounds", "requests", "seconds", "concurrency", "warmup")
    }
    with temp_workdir("hub-bench-infer-", args.keep_temp) as workdir:
        stack = LocalStack(workdir / "var", worker_concurrency=args.worker_concurrency)
        with stack:
            api = Api(stack.url, stack.token)
            tell("adding the demo model (upload, compile, verify, serve) and the MLP …")
            serve_demo(api)
            serve_mlp(api)
            subjects = [
                describe(api, stack, DEMO, demo_tensor(api)),
                describe(
                    api,
                    stack,
                    MLP,
                    np.random.default_rng(0).standard_normal((1, 8)).astype(np.float32),
                ),
            ]
            api.close()
            ends = Endpoints(
                stack.url, stack.token, f"127.0.0.1:{stack.env['HUB_TRITON_HTTP_PORT']}"
            )
            clients = {s.name: {key: open_client(key, s, ends) for key in PATHS} for s in subjects}
            clients["floors"] = floor_clients(ends)
            try:
                for subject in subjects:
                    check_same_answer(subject, clients[subject.name])
                tell(f"ready to measure after {time.monotonic() - launched:.0f} s")
                samples = latency_rounds(clients, args)
            finally:
                for by_key in clients.values():
                    for client in by_key.values():
                        client.close()
            tallies = throughput_rounds(subjects, ends, args)
            data["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]

    results = {s.name: summarise(samples[s.name], tallies[s.name]) for s in subjects}
    found = [goal for name, rows in results.items() for goal in goals(name, rows)]
    floors = summarise(samples["floors"], {})
    print_tables(results, found, args.concurrency)
    lines = [["floor (no tensor)", "p50 ms", "p90 ms"]]
    for key, row in floors.items():
        lines.append([FLOORS[key], f"{row['p50_ms']:.2f}", f"{row['p90_ms']:.2f}"])
    print(f"{table(lines)}\n")
    data |= {
        "inputs": {
            s.name: {
                "name": s.input_name,
                "shape": list(s.tensor.shape),
                "onnxruntime_intra_op_threads": s.intra_threads,
            }
            for s in subjects
        },
        "results": results,
        "floors": floors,
        "goals": found,
        "wall_seconds": round(time.monotonic() - launched, 1),
    }
    out = write_results(f"infer_overhead-{stamp}", data)
    tell(f"results: {out} (whole run {data['wall_seconds']:.0f} s)")


if __name__ == "__main__":
    main()
