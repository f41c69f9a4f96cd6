"""Start-up time and idle memory of the embedded stack (`python -m webapp.stack`).

Starts the stack on free ports in a temporary var dir (as on a fresh machine with .venv
present), measures the time from the command to the "ready" line, waits for it to settle, and
sums the proportional set size (PSS: shared pages divided among the processes that share them)
of every process it started. Run: `.venv/bin/python bench/stack_footprint.py [--settle 10]`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from model_store import spawn  # noqa: E402
from tests.fixtures.stack import fresh_machine_env  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settle", type=float, default=10.0, help="seconds idle before measuring")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = fresh_machine_env(Path(tmp) / "var")
        env.pop("HUB_WORKER_CONCURRENCY")  # measure the default (2 worker processes)
        log = Path(tmp) / "stack.log"
        started = time.monotonic()
        with log.open("wb") as out:
            proc = spawn.start(
                [sys.executable, "-m", "webapp.stack"], cwd=ROOT, env=env, stdout=out,
                stderr=subprocess.STDOUT, new_session=True,
            )  # fmt: skip
        try:
            while "Triton Model Hub is ready" not in log.read_text(errors="replace"):
                if proc.poll() is not None or time.monotonic() - started > 300:
                    sys.exit(f"the stack did not start:\n{log.read_text()}")
                time.sleep(0.05)
            ready_s = time.monotonic() - started
            time.sleep(args.settle)
            rows = []
            for p in [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]:
                with_mem = p.memory_full_info()
                rows.append(
                    {"process": " ".join(p.cmdline())[:80], "pss_mib": with_mem.pss / 2**20}
                )
        finally:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(90)
    total = sum(r["pss_mib"] for r in rows)
    for row in sorted(rows, key=lambda r: -r["pss_mib"]):
        print(f"{row['pss_mib']:8.1f} MiB  {row['process']}")
    print(f"command to ready: {ready_s:.1f} s")
    print(f"idle memory (PSS, {len(rows)} processes): {total:.0f} MiB")
    results = ROOT / "bench" / "results"
    results.mkdir(exist_ok=True)
    (results / "stack_footprint.json").write_text(
        json.dumps({"ready_seconds": ready_s, "idle_pss_mib": total, "processes": rows}, indent=2)
    )


if __name__ == "__main__":
    main()
