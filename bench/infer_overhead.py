"""What the dashboard's infer endpoint adds on top of Triton, and Triton on top of the model.

    .venv/bin/python bench/infer_overhead.py                 # 5 s per cell, concurrency 1 and 8
    .venv/bin/python bench/infer_overhead.py --seconds 10 --concurrency 1 4 8

Two models on one private stack, each compiled, verified and served exactly as a user's model
is: the demo EfficientNet-Lite0 (``POST /api/v1/demo``; input: the espresso photo,
preprocessed once here to a float32 [1, 3, 224, 224] tensor, 588 KiB) and a small MLP
``x[1, 64] -> y[1, 16]`` (uploaded through the API; 256 bytes of input), which shows the
dashboard's fixed cost per request. Three paths per model, each driven by N client threads
for ``--seconds`` after a short warm-up:

* **floor: in-process ONNX Runtime** on the same packaged model file, with the thread count
  its config.pbtxt gives Triton (the physical floor: no network, no serialisation);
* **direct: tritonclient to Triton** over gRPC, one shared channel, as the hub itself calls
  Triton (``TritonRuntime.infer``);
* **dashboard: POST /api/v1/models/{name}/infer** with the tensor as ``{"b64", "shape"}``,
  one keep-alive HTTP connection per thread, token auth, the full JSON answer (outputs
  described, top-5 with labels, latency).

For the demo model an extra row sends the PNG itself (``image_b64``), which adds decoding and
resizing in the hub: what a person's "drop a photo" costs, not a like-for-like overhead.

Reported per path and concurrency: p50, p90, p99 latency, throughput, each as a ratio to the
floor, and **dashboard p50 - direct p50 at concurrency 1** (goal: < 2 ms). The three paths
run interleaved in one process on one machine, so the ratios hold even on a noisy machine.
The rate limit is turned off for the private stack (INFER_RATE_PER_MINUTE=0).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from _stack import (
    ROOT,
    Api,
    machine,
    median,
    percentile,
    say,
    stack_from_args,
    table,
    temp_workdir,
    write_results,
)

MODEL = "efficientnet-lite0"
PHOTO = ROOT / "demo" / "images" / "coffee.png"


def wait_served(api: Api, timeout: float = 600) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        model = api.call("GET", f"/api/v1/models/{MODEL}")
        if model.get("serving_version"):
            return model
        time.sleep(1)
    raise SystemExit(f"{MODEL} was not served within {timeout} s")


def drive(call: Callable[[], Any], threads: int, seconds: float, warmup: float) -> dict[str, Any]:
    """N threads call ``call`` (each thread builds its own with the factory) for ``seconds``."""
    latencies: list[list[float]] = [[] for _ in range(threads)]
    errors: list[str] = []
    barrier = threading.Barrier(threads + 1)
    stop_at = [0.0]

    def worker(index: int) -> None:
        fn = call()  # a per-thread callable (own connection where the path has one)
        warm_until = time.perf_counter() + warmup
        while time.perf_counter() < warm_until:
            fn()
        barrier.wait()
        mine = latencies[index]
        while True:
            started = time.perf_counter()
            if started >= stop_at[0]:
                break
            try:
                fn()
            except Exception as exc:  # a failure is reported, never hidden in the numbers
                errors.append(str(exc)[:200])
                continue
            mine.append(time.perf_counter() - started)

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    stop_at[0] = time.perf_counter() + warmup + 60  # placeholder until everyone is warm
    barrier.wait()
    began = time.perf_counter()
    stop_at[0] = began + seconds
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - began
    flat = [x * 1000 for xs in latencies for x in xs]
    if not flat:
        raise SystemExit(f"no request succeeded: {errors[:3]}")
    return {
        "threads": threads,
        "requests": len(flat),
        "errors": len(errors),
        "first_errors": errors[:3],
        "throughput_rps": len(flat) / elapsed,
        "p50_ms": median(flat),
        "p90_ms": percentile(flat, 90),
        "p99_ms": percentile(flat, 99),
    }


@dataclass
class Subject:
    """One model under test: its input, the served artifact and the bodies the hub gets."""

    name: str
    input_name: str
    tensor: np.ndarray
    artifact: Path
    intra_threads: int
    bodies: dict[str, bytes]


def add_mlp(api: Api) -> None:
    from tests.fixtures.multipart import multipart_file
    from tests.fixtures.triton import mlp_onnx_bytes

    api.call("POST", "/api/v1/models", {"name": "mlp", "target": "onnxruntime"}, expect=201)
    body, ctype = multipart_file(mlp_onnx_bytes(in_features=64, out_features=16))
    status, _, data = api.raw("POST", "/api/v1/models/mlp/versions", body, {"Content-Type": ctype})
    if status != 201:
        raise SystemExit(f"uploading the MLP failed: {status} {data[:300]!r}")
    deadline = time.monotonic() + 300
    while api.call("GET", "/api/v1/models/mlp/versions/1")["status"] != "ready":
        if time.monotonic() > deadline:
            raise SystemExit("the MLP was not packaged in 300 s")
        time.sleep(0.5)
    api.call("POST", "/api/v1/models/mlp/serve?wait=true", {"version": 1})


def subject(
    api: Api, stack: Any, name: str, tensor: np.ndarray, extra: dict[str, bytes]
) -> Subject:
    from model_store.inference import specs_from_signature

    number = api.call("GET", f"/api/v1/models/{name}")["serving_version"]
    version = api.call("GET", f"/api/v1/models/{name}/versions/{number}")
    spec = specs_from_signature(version["signature"], "inputs")[0]
    threads = re.search(
        r'key: "intra_op_thread_count"\s*value\s*\{\s*string_value: "(\d+)"', version["config"]
    )
    artifact = (
        Path(stack.var_dir) / "store" / "repository" / name / str(number)
        / version["artifact"]["name"]
    )  # fmt: skip
    tensor_body = {
        "inputs": {
            spec.name: {
                "b64": base64.b64encode(tensor.tobytes()).decode(),
                "shape": list(tensor.shape),
            }
        }
    }
    return Subject(
        name=name,
        input_name=spec.name,
        tensor=tensor,
        artifact=artifact,
        intra_threads=int(threads.group(1)) if threads else 0,
        bodies={"tensor": json.dumps(tensor_body).encode(), **extra},
    )


def measure(
    subject: Subject, url: str, token: str, grpc_url: str, args: argparse.Namespace
) -> dict[str, dict[int, dict[str, Any]]]:
    import onnxruntime as ort

    from model_store.runtime.client import TritonRuntime

    options = ort.SessionOptions()
    options.intra_op_num_threads = subject.intra_threads
    session = ort.InferenceSession(
        str(subject.artifact), options, providers=["CPUExecutionProvider"]
    )
    triton = TritonRuntime(grpc_url=grpc_url, http_url="127.0.0.1:1", timeout=30)
    feed = {subject.input_name: subject.tensor}
    path = f"/api/v1/models/{subject.name}/infer"

    def floor() -> Callable[[], Any]:
        return lambda: session.run(None, feed)

    def direct() -> Callable[[], Any]:
        return lambda: triton.infer(subject.name, feed, protocol="grpc")

    def dashboard(body: bytes) -> Callable[[], Callable[[], Any]]:
        def factory() -> Callable[[], Any]:
            client = Api(url, token)

            def call() -> None:
                status, _, data = client.raw(
                    "POST", path, body, {"Content-Type": "application/json"}
                )
                if status != 200:
                    raise RuntimeError(f"{status}: {data[:200]!r}")

            return call

        return factory

    # Sanity: every path gives the same top class before anything is timed.
    top = int(np.argmax(session.run(None, feed)[0]))
    direct_top = int(
        np.argmax(next(iter(triton.infer(subject.name, feed, protocol="grpc").values())))
    )
    answer = Api(url, token).call("POST", path, json.loads(subject.bodies["tensor"]))
    values = answer["outputs"][0]["values"]
    assert top == direct_top == int(np.argmax(values)), (top, direct_top)
    paths: list[tuple[str, Callable[[], Callable[[], Any]]]] = [
        ("floor: in-process ONNX Runtime", floor),
        ("direct: tritonclient gRPC", direct),
        *[
            (f"dashboard: infer endpoint ({kind})", dashboard(body))
            for kind, body in subject.bodies.items()
        ],
    ]
    results: dict[str, dict[int, dict[str, Any]]] = {name: {} for name, _ in paths}
    for threads in args.concurrency:
        for name, factory in paths:
            say(f"{subject.name}: {name}, concurrency {threads} …")
            results[name][threads] = drive(factory, threads, args.seconds, args.warmup)
    triton.close()
    return results


def report(
    name: str, results: dict[str, dict[int, dict[str, Any]]], levels: list[int]
) -> dict[int, float]:
    names = list(results)
    rows = [
        ["path", "conc.", "p50 ms", "p90 ms", "p99 ms", "req/s", "p50 / floor", "req/s / floor"]
    ]
    for threads in levels:
        base = results[names[0]][threads]
        for path in names:
            r = results[path][threads]
            rows.append(
                [
                    path,
                    str(threads),
                    f"{r['p50_ms']:.2f}",
                    f"{r['p90_ms']:.2f}",
                    f"{r['p99_ms']:.2f}",
                    f"{r['throughput_rps']:.1f}",
                    f"{r['p50_ms'] / base['p50_ms']:.2f}",
                    f"{r['throughput_rps'] / base['throughput_rps']:.2f}",
                ]
            )
    print(f"\n{name}\n" + table(rows))
    added = {
        threads: results[names[2]][threads]["p50_ms"] - results[names[1]][threads]["p50_ms"]
        for threads in levels
    }
    for threads, value in added.items():
        say(
            f"{name}: the dashboard adds {value:.2f} ms p50 over direct Triton "
            f"at concurrency {threads}"
        )
    return added


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per cell")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--keep-temp", action="store_true")
    args = parser.parse_args()
    args.url = args.token = None
    args.worker_concurrency = 1
    os.environ["INFER_RATE_PER_MINUTE"] = "0"  # the bench measures speed, not the limiter

    from model_store.inference import PRESETS, decode_image, image_to_tensor, specs_from_signature

    launched = time.monotonic()
    with (
        temp_workdir("bench-infer-", args.keep_temp) as workdir,
        stack_from_args(args, workdir) as (url, token, stack),
    ):
        api = Api(url, token)
        say("adding the demo model (upload, compile, verify, serve) …")
        api.call("POST", "/api/v1/demo", {}, expect=201)
        wait_served(api)
        photo = base64.b64encode(PHOTO.read_bytes()).decode()
        photo_body = {"inputs": {"input": {"image_b64": photo}}}
        first = api.call("POST", f"/api/v1/models/{MODEL}/infer", photo_body)
        first_photo_s = time.monotonic() - launched
        say(
            f"from starting the stack to the first classified photo: {first_photo_s:.1f} s "
            f"({first['outputs'][0]['top_k'][0]['label']})"
        )
        add_mlp(api)
        version = api.call("GET", f"/api/v1/models/{MODEL}/versions/1")
        spec = specs_from_signature(version["signature"], "inputs")[0]
        image = image_to_tensor(
            decode_image(PHOTO.read_bytes(), 40_000_000), spec, PRESETS["efficientnet"]
        )
        x = np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)
        grpc_url = f"127.0.0.1:{stack.env['HUB_TRITON_GRPC_PORT']}"
        subjects = [
            subject(api, stack, "mlp", x, {}),
            subject(api, stack, MODEL, image, {"PNG photo": json.dumps(photo_body).encode()}),
        ]
        results = {s.name: measure(s, url, token, grpc_url, args) for s in subjects}
        api.close()

    added = {name: report(name, r, args.concurrency) for name, r in results.items()}
    out = write_results(
        "infer_overhead",
        {
            "machine": machine(),
            "seconds": args.seconds,
            "results": results,
            "dashboard_added_p50_ms": added,
            "stack_start_to_first_classified_photo_s": first_photo_s,
        },
    )
    say(f"results: {out}")


if __name__ == "__main__":
    main()
