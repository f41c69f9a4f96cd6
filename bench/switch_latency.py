"""Switching the serving version under live traffic, against Triton's own load time.

    .venv/bin/python bench/switch_latency.py                    # MLP, 4 clients, 6 switches
    .venv/bin/python bench/switch_latency.py --model demo --switches 4

Two versions of one model are created through the API of a private stack (or ``--url``):
by default two MLPs ``x[batch, 64] -> y[batch, 16]`` from ``tests/fixtures/triton.py``
(``mlp_onnx_bytes(64, 16, seed=1)`` and ``seed=2``, so the two versions answer differently);
with ``--model demo`` the demo ``demo/efficientnet-lite0/model.onnx`` twice (the second with
``allow_duplicate``; both answer the same, so only Triton's ``model_version`` tells them apart).
Version 1 is served (untimed), then ``--clients`` threads (default 4) infer without pause,
each over its own keep-alive connection straight to Triton's HTTP port (tritonclient, as
``TritonRuntime.infer`` does, but keeping the response's ``model_version``), and record every
request: when it was sent, when it came back, the version Triton says answered, the version
the numbers belong to (MLP: compared with onnxruntime in this process), or the error.

* **Product: click to READY.** ``--switches`` (default 6) switches alternating
  ``POST /api/v1/models/{name}/serve {"version": 2}`` and ``POST .../rollback`` (back to 1;
  ``--no-rollback`` serves 1 instead), each timed from sending the call to its 200, which
  the API returns once the job saw the version READY in Triton: the lock, the Celery job,
  the config rewrite, Triton's load and the API's own polling of the job are all inside.
* **Baseline: Triton's own load of the same model.** The same packaged versions are copied
  from ``<store>/sources/<name>/<v>/package/`` to ``<store>/repository/<name>_baseline/``
  (``config.pbtxt`` with ``name`` changed, as ``model_store.serving.packages.serving_config`` does),
  loaded once untimed at version 1, then ``--switches`` times alternately pinned to 2 and 1:
  ``config.pbtxt`` rewritten with ``version_policy { specific { versions: [N] } }``
  (untimed), then timed from ``TritonRuntime.load()`` until the repository index, polled
  every 50 ms like the product's worker does, shows version N READY.

  Why this and not unload/load cycles: it is exactly the Triton operation a product switch
  performs (load the new version while the old one still serves, then drop the old one),
  so the difference between the two is what the product adds (API, lock, database, Celery
  queueing and hand-offs, job bookkeeping, the API's wait for the job). An unload followed
  by a load would time a cold load after the old version is gone, a different operation,
  and measures Triton with nothing served, which the product never does.

  The baseline loads are interleaved with the product's switches (switch, ~1 s of traffic,
  baseline load, ~1 s, next switch ...), while the clients keep loading the machine, so both
  run under the same conditions; the baseline model itself gets no traffic.

Traffic stops ``--gap`` (1 s) after the last switch, and in any case ``--traffic-cap``
(120 s) after it started. Reported, per switch and overall:

* click-to-READY median and max, the median Triton load, **switch median - Triton load
  median** (goal: <= 0.5 s) and the ratio; also each switch minus the baseline load of the
  same version right after it (paired), and each switch minus its own Triton load as the
  job logged it ("Version N is READY after X s": what the product adds around the load),
  and the job's queueing before the worker took it;
* requests sent and failed **during the switches** (requests in flight at any moment
  between a switch's call and its 200) and over the whole switching phase; **goal: 0 failed**;
* which version answered each request **sent after** a switch returned, until the next
  switch: every one must come from the new version (goal: 0 "not new"); also when the
  first answer of the new version and the last of the old one arrived, relative to the
  call, and how long the new version already answered before the 200;
* client latency (median, p99, max, requests over 0.5 s) of requests in flight during a
  product switch, during a baseline load, and neither. (Triton 2.51 holds some HTTP
  inference connections for the whole duration of an HTTP load call, whoever makes it:
  expect a few requests per load, product or baseline, as slow as the load itself; a load
  over gRPC does not do that.)

Results: ``bench/results/switch_latency.json``. Nothing here asserts a timing.
With ``--url`` the script needs Triton's HTTP address (``--triton-url``), its repository-API
key (``TRITON_API_KEY`` in the environment) and the stack's store directory (``--store-root``)
on this machine; it leaves the model ``bench-switch-…``
behind (the API cannot delete models) and removes its ``…_baseline`` copy.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stack import (
    ROOT,
    Api,
    ApiError,
    add_stack_arguments,
    machine,
    median,
    percentile,
    stack_from_args,
    table,
    tell,
    temp_workdir,
    write_results,
)
from compile_overhead import FINISHED, sha256_of, upload

DEMO_MODEL = ROOT / "demo" / "efficientnet-lite0" / "model.onnx"
IN_FEATURES, OUT_FEATURES = 64, 16
POLL_S = 0.05  # the product's worker polls the repository index every 50 ms too
READY_RE = re.compile(r"Version (\d+) is READY after ([0-9.]+) s")


# --------------------------------------------------------------------------- versions


def add_version(api: Api, model: str, path: Path, allow_duplicate: bool) -> dict[str, Any]:
    """Upload ``path``, create a version from it and wait for its compile job."""
    sha = sha256_of(path)
    upload_id = upload(api, path, sha)
    t0 = time.perf_counter()
    payload = {"upload_id": upload_id, "sha256": sha, "allow_duplicate": allow_duplicate}
    created = api.call("POST", f"/api/v1/models/{model}/versions", payload, 201)
    while True:
        job = api.call("GET", f"/api/v1/jobs/{created['job']}")
        if job["state"] in FINISHED:
            break
        time.sleep(0.1)
    if job["state"] != "succeeded":
        raise ApiError(f"version job {job['id']} {job['state']}: {job['error']}")
    return {"version": int(created["version"]), "job_seconds": time.perf_counter() - t0}


def _ts(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def switch_call(api: Api, model: str, kind: str, version: int, reason: str) -> dict[str, Any]:
    """One serve or rollback call, timed from sending it to its answer.

    A 409 "switch_in_progress" (the periodic reconcile holds the model's lock for a moment)
    is retried after 0.2 s; the time is then that of the attempt that went through.
    """
    path = f"/api/v1/models/{model}/{kind}?wait=true"  # the blocking answer, timed
    payload: dict[str, Any] = {"reason": reason}
    if kind == "serve":
        payload["version"] = version
    body_bytes = json.dumps(payload).encode()
    headers = {"Content-Type": "application/json"}
    retries = 0
    while True:
        t0 = time.perf_counter()
        status, _, data = api.raw("POST", path, body_bytes, headers)
        t1 = time.perf_counter()
        body = json.loads(data) if data else {}
        if status == 409 and body.get("code") == "switch_in_progress" and retries < 50:
            retries += 1
            time.sleep(0.2)
            continue
        break
    loads = [float(m.group(2)) for line in body.get("log", []) if (m := READY_RE.search(line))]
    job: dict[str, Any] = {}
    if body.get("job"):
        with contextlib.suppress(ApiError):
            job = api.call("GET", f"/api/v1/jobs/{body['job']}")
    created, started, finished = (_ts(job.get(k)) for k in ("created", "started", "finished"))
    return {
        "kind": kind,
        "status": status,
        "t0": t0,
        "t1": t1,
        "seconds": t1 - t0,
        "retries": retries,
        "serving_version": body.get("serving_version"),
        "job": body.get("job"),
        "error": body.get("error", ""),
        "job_triton_load_seconds": loads[-1] if loads else None,
        "job_queue_seconds": (started - created).total_seconds() if created and started else None,
        "job_run_seconds": (finished - started).total_seconds() if started and finished else None,
        "log": body.get("log", []),
    }


# --------------------------------------------------------------------------- the baseline


class Baseline:
    """A copy of the product's packaged versions under ``<name>_baseline``, loaded directly."""

    def __init__(self, runtime: Any, store_root: Path, model: str, versions: list[int]) -> None:
        self.runtime = runtime
        self.store_root = store_root
        self.model = model
        self.name = f"{model}_baseline"
        self.versions = versions
        self.dir = store_root / "repository" / self.name
        self.installed = False

    def package(self, version: int) -> Path:
        return self.store_root / "sources" / self.model / str(version) / "package"

    def install(self) -> None:
        """Copies each package's version directory (files only; sources are read-only)."""
        if self.dir.exists():
            raise SystemExit(f"{self.dir} exists already; remove it or use another model name")
        self.installed = True
        for version in self.versions:
            src = self.package(version) / str(version)
            if not src.is_dir():
                raise SystemExit(f"no packaged version at {src}; is --store-root right?")
            dst = self.dir / str(version)
            dst.mkdir(parents=True)
            for path in sorted(src.iterdir()):
                if path.is_file():
                    shutil.copyfile(path, dst / path.name)

    def write_config(self, version: int) -> float:
        """That version's packaged config, renamed and pinned to it (untimed by callers)."""
        from model_store.config import parse_pbtxt, render_pbtxt
        from model_store.file_io import atomic_write_text

        t0 = time.perf_counter()
        cfg = parse_pbtxt((self.package(version) / "config.pbtxt").read_text(encoding="utf-8"))
        cfg.name = self.name
        cfg.version_policy_specific = [version]
        atomic_write_text(self.dir / "config.pbtxt", render_pbtxt(cfg))
        return time.perf_counter() - t0

    def rows(self) -> dict[str, str]:
        return {
            r["version"]: r["state"]
            for r in self.runtime.repository_index()
            if r["name"] == self.name
        }

    def load(self, version: int, timeout_s: float = 180.0) -> dict[str, Any]:
        """Timed: Triton's load call, then the index polled until ``version`` is READY."""
        config_s = self.write_config(version)
        t0 = time.perf_counter()
        self.runtime.load(self.name)
        t1 = time.perf_counter()
        polls = 0
        while True:
            rows = self.rows()
            polls += 1
            if rows.get(str(version)) == "READY":
                break
            if time.perf_counter() - t0 > timeout_s:
                raise RuntimeError(f"{self.name} v{version} not READY in {timeout_s} s: {rows}")
            time.sleep(POLL_S)
        t2 = time.perf_counter()
        return {
            "version": version,
            "t0": t0,
            "t1": t2,
            "seconds": t2 - t0,
            "load_call_seconds": t1 - t0,
            "polls": polls,
            "config_write_seconds": config_s,
            "index_at_ready": rows,
        }

    def remove(self) -> None:
        if not self.installed:
            return
        with contextlib.suppress(Exception):
            self.runtime.unload(self.name)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                states = set(self.rows().values())
                if not states & {"READY", "LOADING", "UNLOADING"}:
                    break
                time.sleep(0.1)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.installed = False


# --------------------------------------------------------------------------- traffic


@dataclass
class Sample:
    sent: float
    done: float
    version: int | None  # Triton's model_version in the response
    by_output: int | None  # whose numbers these are (None: cannot tell, e.g. the demo model)
    error: str = ""


class Traffic:
    """Client threads inferring without pause against Triton, each recording every request."""

    def __init__(
        self,
        http_url: str,
        model: str,
        inputs: list[np.ndarray],
        input_name: str,
        output_name: str,
        datatype: str,
        classify: Callable[[int, np.ndarray], int | None],
        cap_s: float,
    ) -> None:
        self.http_url, self.model = http_url, model
        self.inputs, self.input_name, self.output_name = inputs, input_name, output_name
        self.datatype, self.classify, self.cap_s = datatype, classify, cap_s
        self.samples: list[list[Sample]] = [[] for _ in inputs]
        self.stop = threading.Event()
        self.started = 0.0
        self.stopped = 0.0
        self.hit_cap = False
        self.threads = [
            threading.Thread(target=self._run, args=(i,), name=f"client-{i}", daemon=True)
            for i in range(len(inputs))
        ]

    def start(self) -> None:
        self.started = time.perf_counter()
        for thread in self.threads:
            thread.start()

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)
        self.stopped = time.perf_counter()
        self.hit_cap = self.stopped - self.started >= self.cap_s

    def all(self) -> list[Sample]:
        return sorted((s for per in self.samples for s in per), key=lambda s: s.sent)

    def _run(self, index: int) -> None:
        import tritonclient.http as httpclient
        from tritonclient.utils import InferenceServerException

        x = self.inputs[index]
        out = self.samples[index]
        deadline = self.started + self.cap_s
        client: Any = None
        try:
            while not self.stop.is_set() and time.perf_counter() < deadline:
                if client is None:
                    client = httpclient.InferenceServerClient(
                        self.http_url, connection_timeout=5.0, network_timeout=30.0
                    )
                tensor = httpclient.InferInput(self.input_name, list(x.shape), self.datatype)
                tensor.set_data_from_numpy(x, binary_data=True)
                wanted = httpclient.InferRequestedOutput(self.output_name, binary_data=True)
                sent = time.perf_counter()
                try:
                    result = client.infer(self.model, [tensor], outputs=[wanted])
                    version = result.get_response().get("model_version")
                    y = result.as_numpy(self.output_name)
                except Exception as exc:
                    out.append(Sample(sent, time.perf_counter(), None, None, _short(exc)))
                    if not isinstance(exc, InferenceServerException):
                        with contextlib.suppress(Exception):
                            client.close()
                        client = None
                    time.sleep(0.005)  # a failing server must not turn this into a busy loop
                    continue
                done = time.perf_counter()
                v = int(version) if version not in (None, "") else None
                out.append(Sample(sent, done, v, self.classify(index, y)))
        finally:
            if client is not None:
                with contextlib.suppress(Exception):
                    client.close()
            gevent = sys.modules.get("gevent")
            if gevent is not None:  # tritonclient's gevent hub is per thread; free it
                with contextlib.suppress(Exception):
                    gevent.get_hub().destroy(destroy_loop=True)


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


def model_io(runtime: Any, model: str) -> tuple[str, list[int], str, str]:
    """(input name, shape with batch 1, Triton datatype, output name) from the metadata."""
    meta = runtime.model_metadata(model)
    first_in, first_out = meta["inputs"][0], meta["outputs"][0]
    shape = [1 if int(d) < 0 else int(d) for d in first_in["shape"]]
    return first_in["name"], shape, first_in["datatype"], first_out["name"]


# --------------------------------------------------------------------------- analysis


def _stats(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "p99": None, "max": None}
    return {"median": median(values), "p99": percentile(values, 99), "max": max(values)}


def _answered(sample: Sample) -> int | None:
    """The version that answered: Triton's word, checked against the numbers when we can."""
    return sample.version if sample.by_output in (None, sample.version) else -1


SLOW_S = 0.5


def analyse(
    samples: list[Sample],
    switches: list[dict[str, Any]],
    loads: list[dict[str, Any]],
    traffic_end: float,
) -> dict[str, Any]:
    windows = [(s["t0"], s["t1"]) for s in switches]
    load_windows = [(b["t0"], b["t1"]) for b in loads]
    phase_start = windows[0][0] if windows else traffic_end

    def overlaps(s: Sample, spans: list[tuple[float, float]]) -> bool:
        return any(s.sent < t1 and s.done > t0 for t0, t1 in spans)

    def in_window(s: Sample) -> bool:
        return overlaps(s, windows)

    per_switch: list[dict[str, Any]] = []
    for i, sw in enumerate(switches):
        t0, t1 = sw["t0"], sw["t1"]
        until = switches[i + 1]["t0"] if i + 1 < len(switches) else traffic_end
        during = [s for s in samples if s.sent < t1 and s.done > t0]
        after = [s for s in samples if t1 <= s.sent < until]
        to, frm = sw["to"], sw["from"]
        since_call = [s for s in samples if s.sent >= t0 and s.sent < until]
        new = [s.done - t0 for s in since_call if not s.error and _answered(s) == to]
        old = [s.done - t0 for s in since_call if not s.error and _answered(s) == frm]
        stale = [s for s in after if s.error or _answered(s) != to]
        per_switch.append(
            {
                "during": {
                    "requests": len(during),
                    "failed": sum(1 for s in during if s.error),
                    "versions": dict(Counter(str(_answered(s)) for s in during if not s.error)),
                },
                "after": {
                    "requests": len(after),
                    "failed": sum(1 for s in after if s.error),
                    "versions": dict(Counter(str(_answered(s)) for s in after if not s.error)),
                    "not_new_version": len(stale),
                    "first_answer_version": _answered(after[0]) if after else None,
                    "seconds_observed": until - t1,
                },
                "first_new_answer_after_call_seconds": min(new) if new else None,
                "last_old_answer_after_call_seconds": max(old) if old else None,
                # how long the new version already answered before the API said READY
                "new_answering_before_return_seconds": (t1 - t0) - min(new) if new else None,
            }
        )
    phase = [s for s in samples if s.sent >= phase_start]
    windowed = [s for s in phase if in_window(s)]
    outside = [s for s in phase if not in_window(s)]
    baseline_w = [s for s in outside if overlaps(s, load_windows)]
    quiet = [s for s in outside if not overlaps(s, load_windows)]
    groups = {"switch_windows": windowed, "baseline_loads": baseline_w, "quiet": quiet}
    latency = {
        label: [s.done - s.sent for s in group if not s.error] for label, group in groups.items()
    }
    before = [s for s in samples if s.sent < phase_start]
    errors = Counter(s.error for s in samples if s.error)
    return {
        "per_switch": per_switch,
        "requests_total": len(samples),
        "failed_total": sum(1 for s in samples if s.error),
        "before_switches": {
            "requests": len(before),
            "failed": sum(1 for s in before if s.error),
            "versions": dict(Counter(str(_answered(s)) for s in before if not s.error)),
        },
        "during_switches": {
            "requests": len(windowed),
            "failed": sum(1 for s in windowed if s.error),
        },
        "switching_phase": {"requests": len(phase), "failed": sum(1 for s in phase if s.error)},
        "after_switches_not_new_version": sum(p["after"]["not_new_version"] for p in per_switch),
        "answers_not_matching_reported_version": sum(1 for s in samples if _answered(s) == -1),
        # switching phase only; "baseline_loads": in flight during a baseline load and not
        # during a product switch; "quiet": neither
        "client_latency_seconds": {
            label: _stats(values) | {"requests": len(values)} for label, values in latency.items()
        },
        "client_requests_slower_than_seconds": SLOW_S,
        "client_slow_requests": {
            label: sum(1 for v in values if v > SLOW_S) for label, values in latency.items()
        },
        "throughput_requests_per_second": len(samples) / max(1e-9, traffic_end - samples[0].sent)
        if samples
        else 0.0,
        "error_kinds": dict(errors.most_common(10)),
    }


# --------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=("mlp", "demo"), default="mlp", help="default mlp")
    parser.add_argument("--clients", type=int, default=4, help="client threads (default 4)")
    parser.add_argument("--switches", type=int, default=6, help="timed switches (default 6)")
    parser.add_argument("--gap", type=float, default=1.0, help="traffic between steps, s")
    parser.add_argument("--traffic-cap", type=float, default=120.0, help="traffic hard cap, s")
    parser.add_argument(
        "--no-rollback", action="store_true", help="serve v1 explicitly instead of rollback"
    )
    parser.add_argument(
        "--triton-url", default="127.0.0.1:8000", help="with --url: Triton's HTTP host:port"
    )
    parser.add_argument(
        "--store-root",
        type=Path,
        default=ROOT / "var" / "store",
        help="with --url: the stack's MODEL_STORE_ROOT (default var/store)",
    )
    add_stack_arguments(parser)
    args = parser.parse_args()
    if args.switches < 1 or args.clients < 1:
        parser.error("--switches and --clients must be >= 1")

    from model_store.runtime.client import TritonRuntime
    from tests.fixtures.triton import mlp_onnx_bytes, reference_outputs

    results: dict[str, Any] = {"benchmark": "switch_latency", "machine": machine()}
    results["settings"] = {
        "model": args.model,
        "clients": args.clients,
        "switches": args.switches,
        "gap_seconds": args.gap,
        "traffic_cap_seconds": args.traffic_cap,
        "rollback": not args.no_rollback,
        "poll_seconds": POLL_S,
    }
    with temp_workdir("hub-bench-switch-", args.keep_temp) as workdir:
        if args.model == "mlp":
            payloads = {
                v: mlp_onnx_bytes(in_features=IN_FEATURES, out_features=OUT_FEATURES, seed=v)
                for v in (1, 2)
            }
            files = {}
            for v, data in payloads.items():
                files[v] = workdir / f"mlp-v{v}.onnx"
                files[v].write_bytes(data)
        else:
            payloads, files = {}, {1: DEMO_MODEL, 2: DEMO_MODEL}
        with stack_from_args(args, workdir) as (url, token, stack):
            if stack is not None:
                triton_url = f"127.0.0.1:{stack.env['HUB_TRITON_HTTP_PORT']}"
                store_root = stack.var_dir / "store"
                workers = args.worker_concurrency
                results["stack"] = f"private (python -m webapp.stack, worker concurrency {workers})"
            else:
                triton_url, store_root = args.triton_url, args.store_root.resolve()
                results["stack"] = url
            api = Api(url, token)
            key = stack.env["TRITON_API_KEY"] if stack is not None else None
            runtime = TritonRuntime(
                triton_url, timeout=30.0, api_key=key or os.environ.get("TRITON_API_KEY")
            )
            name = f"bench-switch-{int(time.time())}"
            baseline = Baseline(runtime, store_root, name, [1, 2])
            traffic: Traffic | None = None
            try:
                api.call("POST", "/api/v1/models", {"name": name, "target": "onnxruntime"}, 201)
                tell(f"model {name} ({args.model}); Triton {triton_url}; store {store_root}")
                versions = {}
                for v in (1, 2):
                    versions[v] = add_version(api, name, files[v], allow_duplicate=v == 2)
                    if versions[v]["version"] != v:
                        raise SystemExit(f"expected version {v}, got {versions[v]}")
                    tell(f"  version {v} packaged in {versions[v]['job_seconds']:.1f} s")
                initial = switch_call(api, name, "serve", 1, "benchmark: first release")
                if initial["status"] != 200:
                    raise ApiError(f"serving v1 failed: {initial['status']} {initial['error']}")
                tell(f"  v1 served (first load, untimed) in {initial['seconds']:.2f} s")

                baseline.install()
                baseline_initial = baseline.load(1)
                tell(f"  baseline {baseline.name} v1 loaded in {baseline_initial['seconds']:.2f} s")

                input_name, shape, datatype, output_name = model_io(runtime, name)
                rng = np.random.default_rng(7)
                inputs = [
                    rng.standard_normal(shape).astype(np.float32) for _ in range(args.clients)
                ]
                refs = (
                    [{v: reference_outputs(p, x) for v, p in payloads.items()} for x in inputs]
                    if payloads
                    else []
                )

                def classify(index: int, y: np.ndarray) -> int | None:
                    if not refs:
                        return None
                    for v, ref in refs[index].items():
                        if y.shape == ref.shape and np.allclose(y, ref, rtol=1e-3, atol=1e-4):
                            return v
                    return -1

                traffic = Traffic(
                    triton_url, name, inputs, input_name, output_name, datatype, classify,
                    args.traffic_cap,
                )  # fmt: skip
                traffic.start()
                tell(f"  {args.clients} clients inferring; {args.switches} switches follow")
                time.sleep(args.gap)
                switches: list[dict[str, Any]] = []
                loads: list[dict[str, Any]] = []
                current = 1
                for i in range(args.switches):
                    to = 2 if current == 1 else 1
                    kind = "rollback" if i % 2 == 1 and not args.no_rollback else "serve"
                    sw = switch_call(api, name, kind, to, f"benchmark switch {i + 1}")
                    sw |= {"from": current, "to": to}
                    with contextlib.suppress(Exception):
                        sw["index_after_return"] = {
                            r["version"]: r["state"]
                            for r in runtime.repository_index()
                            if r["name"] == name
                        }
                    switches.append(sw)
                    if sw["status"] == 200 and sw["serving_version"] is not None:
                        current = int(sw["serving_version"])
                    time.sleep(args.gap)
                    loads.append(baseline.load(to))
                    tell(
                        f"  {i + 1}: {kind} v{sw['from']}->v{to}: {sw['status']} in "
                        f"{sw['seconds']:.2f} s (Triton load in the job "
                        f"{_fmt(sw['job_triton_load_seconds'])}); baseline load v{to} "
                        f"{loads[-1]['seconds']:.2f} s"
                    )
                    time.sleep(args.gap)
                traffic.finish()
            finally:
                if traffic is not None and not traffic.stop.is_set():
                    traffic.finish()
                baseline.remove()
                runtime.close()
                api.close()

    samples = traffic.all()
    analysis = analyse(samples, switches, loads, traffic.stopped)
    ok = [s["seconds"] for s in switches if s["status"] == 200]
    base = [b["seconds"] for b in loads]
    sw_med, sw_max, base_med = median(ok) if ok else None, max(ok) if ok else None, median(base)
    job_loads = [s["job_triton_load_seconds"] for s in switches if s["job_triton_load_seconds"]]
    # each switch against the baseline load of the same version right after it
    paired = [
        s["seconds"] - b["seconds"]
        for s, b in zip(switches, loads, strict=True)
        if s["status"] == 200
    ]
    # what the product adds around its own Triton load (API, lock, Celery, job, polling)
    around = [
        s["seconds"] - s["job_triton_load_seconds"]
        for s in switches
        if s["status"] == 200 and s["job_triton_load_seconds"] is not None
    ]
    before_return = [
        p["new_answering_before_return_seconds"]
        for p in analysis["per_switch"]
        if p["new_answering_before_return_seconds"] is not None
    ]
    queues = [s["job_queue_seconds"] for s in switches if s["job_queue_seconds"] is not None]
    summary = {
        "switches_ok": len(ok),
        "switches_failed": len(switches) - len(ok),
        "switch_median_seconds": sw_med,
        "switch_max_seconds": sw_max,
        "switch_min_seconds": min(ok) if ok else None,
        "triton_load_median_seconds": base_med,
        "triton_load_max_seconds": max(base),
        "switch_median_minus_triton_load_seconds": sw_med - base_med if sw_med else None,
        "switch_max_minus_triton_load_median_seconds": sw_max - base_med if sw_max else None,
        "ratio_switch_to_triton_load": sw_med / base_med if sw_med else None,
        "paired_difference_median_seconds": median(paired) if paired else None,
        "paired_difference_max_seconds": max(paired) if paired else None,
        "switch_minus_own_triton_load_median_seconds": median(around) if around else None,
        "switch_minus_own_triton_load_max_seconds": max(around) if around else None,
        "new_version_answering_before_return_median_seconds": median(before_return)
        if before_return
        else None,
        "job_triton_load_median_seconds": median(job_loads) if job_loads else None,
        "job_queue_median_seconds": median(queues) if queues else None,
        "requests_during_switches": analysis["during_switches"]["requests"],
        "failed_during_switches": analysis["during_switches"]["failed"],
        "requests_switching_phase": analysis["switching_phase"]["requests"],
        "failed_switching_phase": analysis["switching_phase"]["failed"],
        "answers_after_return_not_new_version": analysis["after_switches_not_new_version"],
        "traffic_seconds": traffic.stopped - traffic.started,
        "traffic_hit_cap": traffic.hit_cap,
    }
    results |= {
        "model": {
            "name": name,
            "kind": args.model,
            "source": str(DEMO_MODEL.relative_to(ROOT)) if args.model == "demo" else "generated",
            "versions": versions,
            "io": {"input": input_name, "shape": shape, "datatype": datatype},
        },
        "initial_serve": {k: v for k, v in initial.items() if k not in ("t0", "t1")},
        "baseline_initial_load": {k: v for k, v in baseline_initial.items() if k != "t0"},
        "switches": [
            {k: v for k, v in sw.items() if k not in ("t0", "t1")} | {"traffic": per}
            for sw, per in zip(switches, analysis.pop("per_switch"), strict=True)
        ],
        "baseline_loads": [{k: v for k, v in b.items() if k not in ("t0", "t1")} for b in loads],
        "traffic": analysis,
        "summary": summary,
        "goals": {
            "switch_minus_triton_load_max_seconds": 0.5,
            "failed_during_switches": 0,
            "answers_after_return_not_new_version": 0,
        },
    }
    if args.keep_temp:
        results["samples"] = [asdict(s) for s in samples]
    path = write_results("switch_latency", results)
    report(results, path)
    return 0


def _fmt(value: float | None, unit: str = " s") -> str:
    return "-" if value is None else f"{value:.2f}{unit}"


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


def report(results: dict[str, Any], path: Path) -> None:
    rows = [
        ("#", "switch", "status", "click->READY", "load in job", "queue",
         "Triton load", "req during", "failed", "answered after", "not new"),
    ]  # fmt: skip
    for i, (sw, base) in enumerate(
        zip(results["switches"], results["baseline_loads"], strict=True)
    ):
        after = sw["traffic"]["after"]
        answered = ", ".join(f"v{v}:{n}" for v, n in sorted(after["versions"].items()))
        rows.append(
            (
                str(i + 1),
                f"{sw['kind']} v{sw['from']}->v{sw['to']}",
                str(sw["status"]),
                _fmt(sw["seconds"], ""),
                _fmt(sw["job_triton_load_seconds"], ""),
                _fmt(sw["job_queue_seconds"], ""),
                _fmt(base["seconds"], ""),
                str(sw["traffic"]["during"]["requests"]),
                str(sw["traffic"]["during"]["failed"] + after["failed"]),
                answered or "-",
                str(after["not_new_version"]),
            )
        )
    s = results["summary"]
    t = results["traffic"]
    print()
    print(
        f"{results['settings']['switches']} switches of {results['model']['name']} "
        f"({results['settings']['model']}) under {results['settings']['clients']} clients; seconds"
    )
    print(table(rows))
    print()
    diff = s["switch_median_minus_triton_load_seconds"]
    print(
        f"click->READY: median {_fmt(s['switch_median_seconds'])}, max "
        f"{_fmt(s['switch_max_seconds'])}; Triton load (baseline): median "
        f"{_fmt(s['triton_load_median_seconds'])}; Triton load inside the job: median "
        f"{_fmt(s['job_triton_load_median_seconds'])}"
    )
    verdict = "met" if diff is not None and diff <= 0.5 else "not met"
    ratio = s["ratio_switch_to_triton_load"]
    print(
        f"switch - Triton load: {_fmt(diff)} median (max switch - median load "
        f"{_fmt(s['switch_max_minus_triton_load_median_seconds'])}); ratio "
        f"{_fmt(ratio, 'x')}. Goal <= 0.5 s: {verdict}"
    )
    print(
        f"paired (each switch - the baseline load right after it): median "
        f"{_fmt(s['paired_difference_median_seconds'])}, max "
        f"{_fmt(s['paired_difference_max_seconds'])}; switch - its own Triton load in the job: "
        f"median {_fmt(s['switch_minus_own_triton_load_median_seconds'])}, max "
        f"{_fmt(s['switch_minus_own_triton_load_max_seconds'])}; the new version answered "
        f"{_fmt(s['new_version_answering_before_return_median_seconds'])} (median) before the 200"
    )
    print(
        f"requests during switches: {s['requests_during_switches']} sent, "
        f"{s['failed_during_switches']} failed (goal 0: "
        f"{'met' if s['failed_during_switches'] == 0 else 'not met'}); whole switching phase "
        f"{s['requests_switching_phase']} sent, {s['failed_switching_phase']} failed; "
        f"{t['requests_total']} requests in {s['traffic_seconds']:.1f} s"
    )
    stale = s["answers_after_return_not_new_version"]
    print(
        f"answers to requests sent after a switch returned that did not come from the new "
        f"version: {stale} (goal 0: {'met' if stale == 0 else 'not met'}); answers whose "
        f"numbers disagree with their model_version: {t['answers_not_matching_reported_version']}"
    )
    slow = t["client_slow_requests"]
    for label, lat in t["client_latency_seconds"].items():
        print(
            f"client latency, {label.replace('_', ' ')} ({lat['requests']} requests): median "
            f"{_ms(lat['median'])}, p99 {_ms(lat['p99'])}, max {_ms(lat['max'])}; "
            f"{slow[label]} slower than {t['client_requests_slower_than_seconds']} s"
        )
    if t["error_kinds"]:
        print(f"errors: {t['error_kinds']}")
    print(f"results: {path}")


if __name__ == "__main__":
    sys.exit(main())
