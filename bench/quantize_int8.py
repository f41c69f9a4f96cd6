"""INT8 against FP32 for the demo EfficientNet-Lite0, in one run on this machine (issue 37).

    .venv/bin/python bench/quantize_int8.py                     # about 2 minutes
    .venv/bin/python bench/quantize_int8.py --phases 2 --seconds 3

One private stack serves the demo as v1 (FP32) with capture on; 64 augmented crops of the
demo's photos go through ``/v2`` and are captured; the hub quantises v1 from them (48
calibrate, 16 check) into v2 through its normal job, and v2 is loaded beside v1. Then, with
both in the same Triton, phases alternate between the versions (FP32, INT8, FP32, ...) and
each measures, straight to Triton (no hub in between, binary tensors):

- latency at concurrency 1 (``--requests`` calls): p50 and p99;
- throughput at concurrency 4 for ``--seconds``, and its p99.

Besides: the size on disk of each artifact; top-1 agreement and top-5 overlap with FP32 on
``--held-out`` other crops (a seed the calibration never saw), through Triton; single-stream
latency of each file in ONNX Runtime in this process (one intra-op thread, as the backend
runs it, and with ONNX Runtime's default of a thread per core), which says what the model
costs without a server; and the CPU's INT8 dot-product
instructions (VNNI, AMX), which decide whether INT8 can be faster at all.

Ratios are INT8 / FP32 medians of the phases. Results: bench/results/quantize_int8-*.json.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from _stack import Api, LocalStack, median, percentile, tell, temp_workdir
from canary_overhead import report
from infer_overhead import DEMO, Tally, serve_demo

from tests.fixtures.demo import augmented_crops

CALIBRATION_SEED = 3
HELD_OUT_SEED = 99


def _client(address: str) -> Any:
    import tritonclient.http as httpclient

    return httpclient.InferenceServerClient(address, connection_timeout=120, network_timeout=120)


def _infer(client: Any, x: np.ndarray, version: str, headers: dict[str, str] | None = None) -> Any:
    import tritonclient.http as httpclient

    given = httpclient.InferInput("input", list(x.shape), "FP32")
    given.set_data_from_numpy(x, binary_data=True)
    wanted = [httpclient.InferRequestedOutput("logits", binary_data=True)]
    sent = dict(headers) if headers else None
    return np.asarray(
        client.infer(DEMO, [given], model_version=version, outputs=wanted, headers=sent)
        .as_numpy("logits")
    )  # fmt: skip


def capture_and_quantise(api: Api, hub: str, token: str) -> dict[str, Any]:
    api.call("PUT", f"/api/v1/models/{DEMO}/capture", {"sample_rate": 100})
    client = _client(hub.removeprefix("http://"))
    for x in augmented_crops(64, seed=CALIBRATION_SEED):
        _infer(client, x, "", {"Authorization": f"Bearer {token}"})
    client.close()
    deadline = time.monotonic() + 120
    while api.call("GET", f"/api/v1/models/{DEMO}/capture")["count"] < 64:
        if time.monotonic() > deadline:
            raise SystemExit("the 64 requests were not all captured within 120 s")
        time.sleep(1)
    tell("64 requests captured; quantising v1 to INT8 …")
    started = time.monotonic()
    asked = api.call("POST", f"/api/v1/models/{DEMO}/versions/1/revise",
                     {"quantize": {"calibration": "captures"}}, expect=201)  # fmt: skip
    number = asked["version"]
    while (v := api.call("GET", f"/api/v1/models/{DEMO}/versions/{number}"))["status"] not in (
        "ready", "failed",
    ):  # fmt: skip
        if time.monotonic() - started > 900:
            raise SystemExit("the INT8 version was not ready within 900 s")
        time.sleep(1)
    if v["status"] != "ready":
        raise SystemExit(f"quantising failed: {v['error']}")
    tell(f"INT8 v{number} ready in {time.monotonic() - started:.0f} s; loading it beside v1 …")
    api.call("POST", f"/api/v1/models/{DEMO}/compare?wait=true", {"version": number})
    return v


def agreement(triton: str, count: int) -> dict[str, float]:
    client = _client(triton)
    top1, top5 = [], []
    for x in augmented_crops(count, seed=HELD_OUT_SEED):
        a, b = _infer(client, x, "1")[0], _infer(client, x, "2")[0]
        ta, tb = np.argsort(-a)[:5], np.argsort(-b)[:5]
        top1.append(ta[0] == tb[0])
        top5.append(len(set(ta) & set(tb)) / 5)
    client.close()
    return {"top1_agreement": float(np.mean(top1)), "top5_overlap": float(np.mean(top5))}


def latency(triton: str, version: str, x: np.ndarray, requests: int) -> dict[str, float]:
    client = _client(triton)
    for _ in range(10):
        _infer(client, x, version)
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        _infer(client, x, version)
        times.append((time.perf_counter() - started) * 1000)
    client.close()
    return {"p50_ms": median(times), "p99_ms": percentile(times, 99)}


def throughput(
    triton: str, version: str, x: np.ndarray, threads: int, seconds: float
) -> dict[str, float]:
    tally, times, lock = Tally(), [], threading.Lock()
    barrier = threading.Barrier(threads + 1)
    stop = [float("inf")]

    def worker() -> None:
        client = _client(triton)
        _infer(client, x, version)
        barrier.wait()
        mine = []
        while time.perf_counter() < stop[0]:
            started = time.perf_counter()
            try:
                _infer(client, x, version)
            except Exception as exc:  # counted, never hidden
                tally.errors.append(str(exc)[:200])
                continue
            mine.append((time.perf_counter() - started) * 1000)
        with lock:
            times.extend(mine)
        client.close()

    pool = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
    for thread in pool:
        thread.start()
    barrier.wait()
    began = time.perf_counter()
    stop[0] = began + seconds
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - began
    return {
        "rps": len(times) / elapsed,
        "p99_ms": percentile(times, 99),
        "errors": len(tally.errors),
    }


def in_process(path: str, x: np.ndarray, requests: int, threads: int = 1) -> float:
    """p50 ms of ONNX Runtime on this file with ``threads`` intra-op threads, no server."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    for _ in range(10):
        session.run(None, {"input": x})
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        session.run(None, {"input": x})
        times.append((time.perf_counter() - started) * 1000)
    return median(times)


def int8_instructions() -> dict[str, bool]:
    flags: set[str] = set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    return {f: f in flags for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phases", type=int, default=3, help="phases per version (default 3)")
    parser.add_argument("--requests", type=int, default=150, help="calls at concurrency 1")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds at concurrency 4")
    parser.add_argument("--held-out", type=int, default=200, help="crops for the agreement")
    parser.add_argument("--keep-temp", action="store_true")
    args = parser.parse_args()
    os.environ["INFER_RATE_PER_MINUTE"] = "0"
    launched = time.monotonic()
    runs: dict[str, list[dict[str, float]]] = {"fp32": [], "int8": []}
    with temp_workdir("hub-bench-int8-", args.keep_temp) as workdir:
        stack = LocalStack(workdir / "var", worker_concurrency=1)
        with stack:
            api = Api(stack.url, stack.token)
            serve_demo(api)
            int8 = capture_and_quantise(api, stack.url, stack.token)
            fp32 = api.call("GET", f"/api/v1/models/{DEMO}/versions/1")
            triton = f"127.0.0.1:{stack.env['HUB_TRITON_HTTP_PORT']}"
            x = augmented_crops(1, seed=HELD_OUT_SEED + 1)[0]
            tell(f"agreement on {args.held_out} held-out crops …")
            agree = agreement(triton, args.held_out)
            for phase in range(args.phases):
                order = [("fp32", "1"), ("int8", "2")]
                for kind, version in order if phase % 2 == 0 else order[::-1]:
                    tell(f"phase {phase + 1} of {args.phases}: {kind} …")
                    one = latency(triton, version, x, args.requests)
                    four = throughput(triton, version, x, 4, args.seconds)
                    runs[kind].append({
                        "c1_p50_ms": one["p50_ms"], "c1_p99_ms": one["p99_ms"],
                        "c4_rps": four["rps"], "c4_p99_ms": four["p99_ms"],
                        "errors": four["errors"],
                    })  # fmt: skip
            repository = stack.var_dir / "store" / "repository" / DEMO
            files = {
                "fp32": repository / "1" / "model.onnx",
                "int8": repository / "2" / "model.onnx",
            }
            solo = {k: in_process(str(f), x, args.requests) for k, f in files.items()}
            # ONNX Runtime's own default on this machine: a thread per core.
            pair = {k: in_process(str(f), x, args.requests, threads=0) for k, f in files.items()}
            api.close()
    keys = ("c1_p50_ms", "c1_p99_ms", "c4_rps", "c4_p99_ms")
    summary = {kind: {k: median([r[k] for r in rs]) for k in keys} for kind, rs in runs.items()}
    sizes = {"fp32": fp32["artifact"]["size"], "int8": int8["artifact"]["size"]}
    report_outputs = int8["verification_report"]["outputs"][0]
    lines = [["", "FP32 v1", "INT8 v2", "INT8 / FP32"]]
    labels = {
        "c1_p50_ms": "p50 ms, concurrency 1",
        "c1_p99_ms": "p99 ms, concurrency 1",
        "c4_rps": "req/s, concurrency 4",
        "c4_p99_ms": "p99 ms, concurrency 4",
    }
    for key, label in labels.items():
        a, b = summary["fp32"][key], summary["int8"][key]
        lines.append([label, f"{a:.2f}", f"{b:.2f}", f"{b / a:.2f}x"])
    lines.append(["ONNX Runtime alone, 1 thread, p50 ms", f"{solo['fp32']:.2f}",
                  f"{solo['int8']:.2f}", f"{solo['int8'] / solo['fp32']:.2f}x"])  # fmt: skip
    lines.append(["ONNX Runtime alone, default threads, p50 ms", f"{pair['fp32']:.2f}",
                  f"{pair['int8']:.2f}", f"{pair['int8'] / pair['fp32']:.2f}x"])  # fmt: skip
    lines.append(["size on disk, MB", f"{sizes['fp32'] / 1e6:.1f}", f"{sizes['int8'] / 1e6:.1f}",
                  f"{sizes['int8'] / sizes['fp32']:.2f}x"])  # fmt: skip
    gate = report_outputs
    print(f"gate (16 held-out captures): top-1 {gate['top1_agreement']:.0%}, top-5 "
          f"{gate['topk_overlap']:.0%}, cosine {gate['cosine']:.4f}")  # fmt: skip
    print(f"{args.held_out} other crops through Triton: top-1 agreement "
          f"{agree['top1_agreement']:.1%}, top-5 overlap {agree['top5_overlap']:.1%}")  # fmt: skip
    print(f"INT8 instructions of this CPU: {int8_instructions()}")
    report("quantize_int8", lines, [], {
        "settings": vars(args), "runs": runs, "summary": summary, "in_process_p50_ms": solo,
        "in_process_default_threads_p50_ms": pair,
        "sizes": sizes, "agreement": agree, "gate": report_outputs,
        "quantization": int8["quantization"], "cpu_int8": int8_instructions(),
        "wall_seconds": round(time.monotonic() - launched, 1),
    })  # fmt: skip


if __name__ == "__main__":
    main()
