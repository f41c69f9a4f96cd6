"""The compile job's overhead over running the same build steps directly, in the same run.

    .venv/bin/python bench/compile_overhead.py --runs 3

For two models, the demo ``demo/efficientnet-lite0/model.onnx`` (18.6 MB) and a small MLP
built here with ``onnx.helper``:

* **direct** (the baseline): in this process, what the ``onnxruntime`` target's build does
  with default options, through the same functions: ``model_store.compile.optimise``'s
  ``simplify_model`` (onnxslim) then ``ort_optimise(..., "basic")``, writing ``model.onnx``.
* **job** (the product): the file is uploaded through the chunked API of a private stack
  (or ``--url``), then timed from the ``POST /api/v1/models/{name}/versions`` that creates the
  version until ``GET /api/v1/jobs/{id}`` (polled every 50 ms) says ``succeeded``. The job
  also validates, verifies (runs source and artifact on the same inputs) and packages, which
  the baseline does not; its per-step durations come from the job's ``steps`` timestamps.

One untimed warm-up of each (imports onnxslim/onnxruntime in this process and in the worker),
then ``--runs`` interleaved repetitions; medians. Reports job wall / direct (goal <= 1.2x plus
queueing) and the fairer compile step / direct. Results: ``bench/results/compile_overhead.json``.
Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import shutil
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stack import (
    ROOT,
    Api,
    ApiError,
    add_stack_arguments,
    machine,
    median,
    stack_from_args,
    table,
    tell,
    temp_workdir,
    write_results,
)

DEMO_MODEL = ROOT / "demo" / "efficientnet-lite0" / "model.onnx"
FINISHED = ("succeeded", "failed", "cancelled")
STEP_NAMES = ("validate", "compile", "verify", "package")


# --------------------------------------------------------------------------- models


def make_mlp(path: Path, features: int = 64, hidden: int = 256, classes: int = 10) -> Path:
    """A three-layer MLP ``x[batch, features] -> y[batch, classes]`` (MatMul/Add/Relu)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    sizes = [features, hidden, hidden, classes]
    nodes, inits = [], []
    current = "x"
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        w = (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32)
        b = (rng.standard_normal(n_out) * 0.01).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"W{i}"), numpy_helper.from_array(b, f"B{i}")]
        last = i == len(sizes) - 2
        nodes.append(helper.make_node("MatMul", [current, f"W{i}"], [f"mm{i}"]))
        nodes.append(helper.make_node("Add", [f"mm{i}", f"B{i}"], ["y" if last else f"pre{i}"]))
        if not last:
            nodes.append(helper.make_node("Relu", [f"pre{i}"], [f"h{i}"]))
            current = f"h{i}"
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", features])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", classes])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save_model(model, str(path))
    return path


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


# --------------------------------------------------------------------------- the baseline


def direct_build(source: Path, workdir: Path) -> dict[str, float]:
    """simplify (onnxslim) -> ORT offline optimisation 'basic' -> model.onnx, timed."""
    from model_store.compile import optimise

    build = workdir / "direct-build"
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir(parents=True)
    lines: list[str] = []
    t0 = time.perf_counter()
    slim = optimise.simplify_model(source, build / "slim.onnx", log=lines.append).output
    t1 = time.perf_counter()
    optimise.ort_optimise(slim, build / "model.onnx", "basic", log=lines.append)
    t2 = time.perf_counter()
    size = (build / "model.onnx").stat().st_size
    shutil.rmtree(build, ignore_errors=True)
    return {
        "seconds": t2 - t0,
        "simplify_seconds": t1 - t0,
        "ort_optimise_seconds": t2 - t1,
        "artifact_bytes": size,
        "log": lines,  # type: ignore[dict-item]
    }


# --------------------------------------------------------------------------- the product


def upload(api: Api, path: Path, sha256: str) -> str:
    """The chunked upload of ``path`` on ``api``'s connection; returns the upload id."""
    size = path.stat().st_size
    created = api.call(
        "POST", "/api/v1/uploads", {"filename": path.name, "size": size, "sha256": sha256}, 201
    )
    chunk = int(created["chunk_bytes"])
    offset = 0
    with path.open("rb") as src:
        while piece := src.read(chunk):
            status, _, body = api.raw(
                "PUT",
                f"/api/v1/uploads/{created['id']}",
                body=piece,
                headers={"Upload-Offset": str(offset), "Content-Type": "application/octet-stream"},
            )
            if status != 200:
                raise ApiError(f"PUT chunk at {offset} -> {status}: {body[:300]!r}")
            offset += len(piece)
    return str(created["id"])


def _ts(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def _seconds(a: datetime | None, b: datetime | None) -> float | None:
    return (b - a).total_seconds() if a and b else None


def job_run(api: Api, model: str, path: Path, sha256: str, poll: float) -> dict[str, Any]:
    """Upload (untimed), then time POST versions -> job succeeded."""
    upload_id = upload(api, path, sha256)
    t0 = time.perf_counter()
    created = api.call(
        "POST",
        f"/api/v1/models/{model}/versions",
        {"upload_id": upload_id, "sha256": sha256, "allow_duplicate": True},
        201,
    )
    post_s = time.perf_counter() - t0
    polls = 0
    while True:
        job = api.call("GET", f"/api/v1/jobs/{created['job']}")
        polls += 1
        if job["state"] in FINISHED:
            break
        time.sleep(poll)
    wall = time.perf_counter() - t0
    if job["state"] != "succeeded":
        raise ApiError(f"job {job['id']} {job['state']}: {job['error']}")
    steps: dict[str, Any] = {}
    previous_end = _ts(job["created"])
    handoffs = 0.0
    for step in job["steps"]:
        started, finished = _ts(step.get("started")), _ts(step.get("finished"))
        gap = _seconds(previous_end, started) or 0.0
        steps[step["name"]] = {
            "seconds": _seconds(started, finished),
            "wait_before_seconds": gap,  # queueing (first step) or the chain's hand-off
            "state": step["state"],
            "message": step.get("message", ""),
        }
        handoffs += gap
        previous_end = finished
    tail = _seconds(previous_end, _ts(job["finished"])) or 0.0
    return {
        "version": created["version"],
        "job": created["job"],
        "wall_seconds": wall,
        "post_seconds": post_s,
        "server_seconds": _seconds(_ts(job["created"]), _ts(job["finished"])),
        "queue_seconds": steps[job["steps"][0]["name"]]["wait_before_seconds"],
        "waits_between_steps_seconds": handoffs + tail,
        "polls": polls,
        "steps": steps,
        "log": [line["text"] for line in job.get("log", [])],
    }


# --------------------------------------------------------------------------- main


def summarise(direct: list[dict[str, Any]], jobs: list[dict[str, Any]]) -> dict[str, Any]:
    d = median([r["seconds"] for r in direct])
    wall = median([r["wall_seconds"] for r in jobs])
    steps = {
        name: median([r["steps"][name]["seconds"] for r in jobs if name in r["steps"]])
        for name in STEP_NAMES
    }
    return {
        "direct_median_seconds": d,
        "direct_simplify_median_seconds": median([r["simplify_seconds"] for r in direct]),
        "direct_ort_optimise_median_seconds": median([r["ort_optimise_seconds"] for r in direct]),
        "job_wall_median_seconds": wall,
        "job_post_median_seconds": median([r["post_seconds"] for r in jobs]),
        "job_queue_median_seconds": median([r["queue_seconds"] for r in jobs]),
        "job_waits_median_seconds": median([r["waits_between_steps_seconds"] for r in jobs]),
        "job_step_median_seconds": steps,
        "ratio_job_wall_to_direct": wall / d,
        "job_wall_minus_direct_seconds": wall - d,
        "compile_step_minus_direct_seconds": steps["compile"] - d,
        "ratio_compile_step_to_direct": steps["compile"] / d,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="timed repetitions (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    parser.add_argument("--poll", type=float, default=0.05, help="job poll interval, s")
    parser.add_argument(
        "--models", default="efficientnet-lite0,mlp", help="which models (default both)"
    )
    add_stack_arguments(parser)
    args = parser.parse_args()

    results: dict[str, Any] = {"benchmark": "compile_overhead", "machine": machine()}
    results["settings"] = {"runs": args.runs, "warmup": args.warmup, "poll_seconds": args.poll}
    with temp_workdir("hub-bench-compile-", args.keep_temp) as workdir:
        sources = {"efficientnet-lite0": DEMO_MODEL, "mlp": make_mlp(workdir / "mlp.onnx")}
        wanted = [m.strip() for m in args.models.split(",") if m.strip()]
        with stack_from_args(args, workdir) as (url, token, stack):
            results["stack"] = (
                f"private (python -m webapp.stack, worker concurrency {args.worker_concurrency})"
                if stack
                else url
            )
            api = Api(url, token)
            try:
                stamp = int(time.time())
                per_model: dict[str, Any] = {}
                for key in wanted:
                    source = sources[key]
                    sha = sha256_of(source)
                    name = f"bench-{key}-{stamp}"
                    api.call("POST", "/api/v1/models", {"name": name, "target": "onnxruntime"}, 201)
                    tell(f"{key}: {source.stat().st_size / 1e6:.1f} MB, model {name}")
                    warm_direct = [direct_build(source, workdir) for _ in range(args.warmup)]
                    warm_jobs = [
                        job_run(api, name, source, sha, args.poll) for _ in range(args.warmup)
                    ]
                    for w in warm_direct:
                        tell(f"  warm-up direct {w['seconds']:.2f} s")
                    for w in warm_jobs:
                        tell(f"  warm-up job {w['wall_seconds']:.2f} s")
                    direct: list[dict[str, Any]] = []
                    jobs: list[dict[str, Any]] = []
                    for run in range(args.runs):
                        # Alternate which goes first, so a drift in machine load hits both.
                        order = ("direct", "job") if run % 2 == 0 else ("job", "direct")
                        for kind in order:
                            if kind == "direct":
                                direct.append(direct_build(source, workdir))
                            else:
                                jobs.append(job_run(api, name, source, sha, args.poll))
                        steps = jobs[-1]["steps"]
                        tell(
                            f"  run {run + 1}: direct {direct[-1]['seconds']:.2f} s, "
                            f"job {jobs[-1]['wall_seconds']:.2f} s ("
                            + ", ".join(f"{n} {s['seconds']:.2f}" for n, s in steps.items())
                            + f"; waits {jobs[-1]['waits_between_steps_seconds']:.2f})"
                        )
                    per_model[key] = {
                        "source": str(source.relative_to(ROOT)) if key != "mlp" else "generated",
                        "source_bytes": source.stat().st_size,
                        "model": name,
                        "warmup_direct": warm_direct,
                        "warmup_jobs": warm_jobs,
                        "direct": direct,
                        "jobs": jobs,
                        "summary": summarise(direct, jobs),
                    }
            finally:
                api.close()
    results["models"] = per_model
    results["goals"] = {"ratio_job_wall_to_direct_max": "1.2 plus queueing"}
    path = write_results("compile_overhead", results)

    rows = [
        ("model", "direct", "job wall", "job/direct", "job-direct", "compile", "compile/direct",
         "validate", "verify", "package", "waits", "POST"),
    ]  # fmt: skip
    for key, data in per_model.items():
        s = data["summary"]
        st = s["job_step_median_seconds"]
        rows.append(
            (
                key,
                f"{s['direct_median_seconds']:.2f}",
                f"{s['job_wall_median_seconds']:.2f}",
                f"{s['ratio_job_wall_to_direct']:.2f}x",
                f"{s['job_wall_minus_direct_seconds']:.2f}",
                f"{st['compile']:.2f}",
                f"{s['ratio_compile_step_to_direct']:.2f}x",
                f"{st['validate']:.2f}",
                f"{st['verify']:.2f}",
                f"{st['package']:.2f}",
                f"{s['job_waits_median_seconds']:.2f}",
                f"{s['job_post_median_seconds']:.2f}",
            )
        )
    print()
    print(f"Medians of {args.runs} runs, seconds (direct = onnxslim + ORT 'basic' in-process)")
    print(table(rows))
    print()
    print(
        "job wall: POST versions -> job succeeded (validate + compile + verify + package + "
        "queueing); waits: queue before the first step plus the hand-offs between steps"
    )
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
