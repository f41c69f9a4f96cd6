"""What the dashboard's infer endpoint adds on top of Triton, and Triton on top of the model.

    .venv/bin/python bench/infer_overhead.py                 # 5 s per cell, concurrency 1 and 8
    .venv/bin/python bench/infer_overhead.py --seconds 10 --concurrency 1 4 8

One model (the demo EfficientNet-Lite0, added through ``POST /api/v1/demo`` on a private
stack, so it is compiled, verified and served exactly as a user's model is), one input (the
espresso photo, preprocessed once here to a float32 [1, 3, 224, 224] tensor), three paths,
each driven by N client threads for ``--seconds`` after a short warm-up:

* **floor: in-process ONNX Runtime** on the same packaged model file, with the thread count
  its config.pbtxt gives Triton (the physical floor: no network, no serialisation);
* **direct: tritonclient to Triton** over gRPC, one shared channel, as the hub itself calls
  Triton (``TritonRuntime.infer``);
* **dashboard: POST /api/v1/models/{name}/infer** with the tensor as ``{"b64", "shape"}``,
  one keep-alive HTTP connection per thread, token auth, the full JSON answer (outputs
  described, top-5 with labels, latency).

An extra row sends the PNG itself (``image_b64``), which adds decoding and resizing in the
hub: what a person's "drop a photo" costs, not a like-for-like overhead.

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
import sys
import threading
import time
from collections.abc import Callable
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per cell")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--keep-temp", action="store_true")
    parser.add_argument("--url", default=None)
    parser.add_argument("--token", default=None)
    parser.add_argument("--worker-concurrency", type=int, default=1)
    args = parser.parse_args()
    os.environ["INFER_RATE_PER_MINUTE"] = "0"  # the bench measures speed, not the limiter

    sys.path.insert(0, str(ROOT))
    import onnxruntime as ort

    from model_store.inference import PRESETS, decode_image, image_to_tensor, specs_from_signature
    from model_store.runtime.client import TritonRuntime

    with (
        temp_workdir("bench-infer-", args.keep_temp) as workdir,
        stack_from_args(args, workdir) as (url, token, stack),
    ):
        api = Api(url, token)
        if api.call("GET", "/api/v1/demo")["model"] is None:
            say("adding the demo model (upload, compile, verify, serve) …")
            api.call("POST", "/api/v1/demo", {}, expect=201)
        model = wait_served(api)
        number = model["serving_version"]
        version = api.call("GET", f"/api/v1/models/{MODEL}/versions/{number}")
        say(f"{MODEL} v{number} serves")
        spec = specs_from_signature(version["signature"], "inputs")[0]
        tensor = image_to_tensor(
            decode_image(PHOTO.read_bytes(), 40_000_000), spec, PRESETS["efficientnet"]
        )
        threads_match = re.search(
            r'key: "intra_op_thread_count"\s*value\s*\{\s*string_value: "(\d+)"',
            version["config"],
        )
        intra = int(threads_match.group(1)) if threads_match else 0
        if stack is None:
            raise SystemExit("this bench needs its private stack (it reads the model file)")
        store = Path(stack.var_dir) / "store"
        artifact = store / "repository" / MODEL / str(number) / version["artifact"]["name"]
        options = ort.SessionOptions()
        options.intra_op_num_threads = intra
        session = ort.InferenceSession(str(artifact), options, providers=["CPUExecutionProvider"])
        grpc_url = f"127.0.0.1:{stack.env['HUB_TRITON_GRPC_PORT']}"
        triton = TritonRuntime(grpc_url=grpc_url, http_url="127.0.0.1:1", timeout=30)
        tensor_body = json.dumps(
            {
                "inputs": {
                    spec.name: {
                        "b64": base64.b64encode(tensor.tobytes()).decode(),
                        "shape": list(tensor.shape),
                    }
                }
            }
        ).encode()
        photo_body = json.dumps(
            {"inputs": {spec.name: {"image_b64": base64.b64encode(PHOTO.read_bytes()).decode()}}}
        ).encode()
        path = f"/api/v1/models/{MODEL}/infer"

        def floor() -> Callable[[], Any]:
            return lambda: session.run(None, {spec.name: tensor})

        def direct() -> Callable[[], Any]:
            return lambda: triton.infer(MODEL, {spec.name: tensor}, protocol="grpc")

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

        # Sanity: every path gives espresso before anything is timed.
        top = int(np.argmax(session.run(None, {spec.name: tensor})[0]))
        direct_top = int(
            np.argmax(
                next(iter(triton.infer(MODEL, {spec.name: tensor}, protocol="grpc").values()))
            )
        )
        answer = api.call("POST", path, json.loads(tensor_body))
        dash_top = answer["outputs"][0]["top_k"][0]
        assert top == direct_top == dash_top["index"], (top, direct_top, dash_top)
        say(f"all paths agree: class {top} ({dash_top['label']})")

        paths: list[tuple[str, Callable[[], Callable[[], Any]]]] = [
            ("floor: in-process ONNX Runtime", floor),
            ("direct: tritonclient gRPC", direct),
            ("dashboard: infer endpoint (tensor)", dashboard(tensor_body)),
            ("dashboard: infer endpoint (PNG photo)", dashboard(photo_body)),
        ]
        results: dict[str, dict[int, dict[str, Any]]] = {name: {} for name, _ in paths}
        for threads in args.concurrency:
            for name, factory in paths:
                say(f"{name}, concurrency {threads} …")
                results[name][threads] = drive(factory, threads, args.seconds, args.warmup)
        triton.close()
        api.close()

    rows = [
        ["path", "conc.", "p50 ms", "p90 ms", "p99 ms", "req/s", "p50 / floor", "req/s / floor"]
    ]
    for threads in args.concurrency:
        base = results[paths[0][0]][threads]
        for name, _ in paths:
            r = results[name][threads]
            rows.append(
                [
                    name,
                    str(threads),
                    f"{r['p50_ms']:.2f}",
                    f"{r['p90_ms']:.2f}",
                    f"{r['p99_ms']:.2f}",
                    f"{r['throughput_rps']:.1f}",
                    f"{r['p50_ms'] / base['p50_ms']:.2f}",
                    f"{r['throughput_rps'] / base['throughput_rps']:.2f}",
                ]
            )
    print(table(rows))
    added = {
        threads: results[paths[2][0]][threads]["p50_ms"] - results[paths[1][0]][threads]["p50_ms"]
        for threads in args.concurrency
    }
    for threads, value in added.items():
        say(f"dashboard adds {value:.2f} ms p50 over direct Triton at concurrency {threads}")
    out = write_results(
        "infer_overhead",
        {
            "machine": machine(),
            "model": MODEL,
            "seconds": args.seconds,
            "results": results,
            "dashboard_added_p50_ms": added,
        },
    )
    say(f"results: {out}")


if __name__ == "__main__":
    main()
