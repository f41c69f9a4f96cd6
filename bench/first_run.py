"""The first hour, measured: from ``make run`` in a fresh clone to a ready hub and a first
classified photo (issue 20).

    .venv/bin/python bench/first_run.py                       # the three cases, about 3 minutes
    .venv/bin/python bench/first_run.py --cases uv-warm

Each case clones this repository's committed HEAD into a temp dir (a fresh clone: no .venv, no
var/), runs ``make run`` there on free ports with nothing else set (SQLite, Redis and Triton
embedded, as on a user's machine), and records from the moment the command starts:

- **ready**: the hub answers ``GET /api/v1/health/live`` (packages installed, database
  migrated, Redis, Triton, the worker and the web server started);
- **first photo**: an operator token minted with ``manage.py apitoken`` (what signing in is in
  the browser), the demo classifier added with ``POST /api/v1/demo`` (upload, validate,
  compile, verify, package, serve) and the espresso photo classified through
  ``POST /api/v1/models/efficientnet-lite0/infer``; the top class must be ``espresso``.

Cases: ``uv-warm`` (uv's cache holds every package: a second clone on the same machine),
``uv-cold`` (an empty uv cache and no uv yet: uv is bootstrapped with pip, every package is
downloaded; the registry's speed dominates) and ``pip`` (``UV=none``: pip with its own cache,
the installer before this change). Results: bench/results/first_run-<time>.json.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._stack import ROOT, machine, table, tell, temp_workdir, write_results
from model_store import spawn
from tests.fixtures.stack import fresh_machine_env, interrupt

CASES = ("uv-warm", "uv-cold", "pip")
PHOTO = ROOT / "demo" / "images" / "coffee.png"
DEMO = "efficientnet-lite0"


def _call(port: int, method: str, path: str, token: str = "", body: Any = None) -> tuple[int, Any]:
    """One call to the hub on loopback: ``(status, JSON answer)``; ``(0, None)`` when nothing
    listens yet."""
    headers = {"Authorization": f"Token {token}"} if token else {}
    if body is not None:
        headers["Content-Type"] = "application/json"
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        connection.request(method, path, json.dumps(body) if body is not None else None, headers)
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read() or b"null")
    except OSError:
        return 0, None
    finally:
        connection.close()


def run_case(case: str, workdir: Path, timeout: float) -> dict[str, Any]:
    clone = workdir / case
    spawn.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    env = fresh_machine_env(clone / "var")
    env.pop("VIRTUAL_ENV", None)
    if case == "uv-cold":
        env["UV_CACHE_DIR"] = str(workdir / "uv-cache")
        env["UV_HOME"] = str(workdir / "uv-home")
    elif case == "pip":
        env["UV"] = "none"
    port = int(env["HUB_PORT"])
    log_path = workdir / f"{case}.log"
    tell(f"{case}: make run in a fresh clone …")
    with log_path.open("wb") as log:
        started = time.monotonic()
        proc = spawn.start(
            ["make", "run"], cwd=clone, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            while _call(port, "GET", "/api/v1/health/live")[0] != 200:
                if proc.poll() is not None or time.monotonic() - started > timeout:
                    raise SystemExit(f"{case}: not ready:\n{log_path.read_text(errors='replace')}")
                time.sleep(0.1)
            ready = time.monotonic() - started
            tell(f"{case}: ready after {ready:.1f} s")
            minted = spawn.run(
                [str(clone / ".venv/bin/python"), "manage.py", "apitoken", "bench", "--role",
                 "operator"],
                cwd=clone, env=env, capture_output=True, text=True, check=True, timeout=120,
            )  # fmt: skip
            token = minted.stdout.split()[-1]
            status, body = _call(port, "POST", "/api/v1/demo", token, {})
            if status != 201:
                raise SystemExit(f"{case}: adding the demo answered {status}: {body}")
            while not _serving(port, token):
                if time.monotonic() - started > timeout:
                    raise SystemExit(f"{case}: the demo was not served in {timeout} s")
                time.sleep(0.2)
            photo = base64.b64encode(PHOTO.read_bytes()).decode()
            inputs = {"inputs": {"input": {"image_b64": photo}}}
            status, answer = _call(port, "POST", f"/api/v1/models/{DEMO}/infer", token, inputs)
            first_photo = time.monotonic() - started
            top = _top_label(answer)
            tell(f"{case}: first photo after {first_photo:.1f} s ({top})")
            if status != 200 or top != "espresso":
                raise SystemExit(f"{case}: the photo answered {status}: {str(answer)[:400]}")
        finally:
            interrupt(proc)
    return {"case": case, "ready_s": round(ready, 2), "first_photo_s": round(first_photo, 2)}


def _serving(port: int, token: str) -> bool:
    model = _call(port, "GET", f"/api/v1/models/{DEMO}", token)[1] or {}
    return bool(model.get("serving_version"))


def _top_label(answer: Any) -> str:
    for output in (answer or {}).get("outputs", []):
        top = output.get("top_k") or []
        if top:
            return str(top[0].get("label"))
    return "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--timeout", type=float, default=600, help="seconds per case")
    parser.add_argument("--keep-temp", action="store_true", help="keep the clones and logs")
    args = parser.parse_args()
    if shutil.which("make") is None:
        raise SystemExit("make is needed")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    data: dict[str, Any] = {"benchmark": "first_run", "machine": machine()}
    data["load_average_start"] = os.getloadavg()
    results = []
    with temp_workdir("hub-bench-first-run-", args.keep_temp) as workdir:
        # uv-warm needs a warm cache: the cold case (or an earlier install) fills it.
        order = sorted(args.cases, key=lambda c: {"uv-cold": 0, "uv-warm": 1, "pip": 2}[c])
        for case in order:
            results.append(run_case(case, workdir, args.timeout))
    data["load_average_end"] = os.getloadavg()
    data["results"] = results
    rows = [("case", "ready s", "first photo s")]
    rows += [(r["case"], f"{r['ready_s']:.1f}", f"{r['first_photo_s']:.1f}") for r in results]
    print()
    print(table(rows))
    print(f"\n[bench] results: {write_results('first_run', data | {'stamp': stamp})}")


if __name__ == "__main__":
    main()
