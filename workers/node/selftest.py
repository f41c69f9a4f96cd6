"""``python -m workers.node.selftest``: the Ascend self-test on a node (docs/selftest.md).

The same stages, lines and report as the hub's ``manage.py ascend_selftest``
(:mod:`model_store.ascend.selftest.session`), with the node's own settings instead of the
hub's: its Triton (``TRITON_URL``, ``TRITON_API_KEY``), its store (``NODE_REPOSITORY``) and its
environment (CANN under ``ASCEND_ROOT``, ``WORKER_NPU``). A node has no Django and no database;
the self-test needs neither. On the recommended layout (deploy/node/) run it in the node worker:

    docker compose exec -T node-worker python -m workers.node.selftest \\
        --npu-ge-in-serving-triton --json - > selftest.json

Exit status: 0 passed, 1 a stage failed or was skipped for want of another, 2 a usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from model_store.ascend.selftest import DemoAssets, InvalidDevice, SelftestContext
from model_store.ascend.selftest.session import (
    ReportNotWritten,
    entrypoint_environment,
    rerun_in,
    run_session,
)
from model_store.diagnostics.host_checks import ascend_root
from model_store.runtime.client import TritonRuntime
from model_store.store import ModelStore
from workers.node.reporting import hub_version
from workers.node.settings import NodeSettingsError, read_settings

ROOT = Path(__file__).resolve().parents[2]
USAGE_ERROR = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m workers.node.selftest",
        description="Check this Ascend node stage by stage with the bundled demo model.",
    )
    parser.add_argument(
        "--json",
        metavar="FILE",
        help="write the JSON report to FILE ('-': stdout)",
    )
    parser.add_argument(
        "--device",
        metavar="N",
        type=int,
        help="test NPU N only: the id the serving Triton's pyACL gives (from 0 in its container)",
    )
    parser.add_argument(
        "--npu-ge-in-serving-triton",
        action="store_true",
        help="load the npu_ge trial into this node's Triton (give it while it serves nothing)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if argv is None:  # from the command line: in the environment the node worker runs with
        rerun_in(entrypoint_environment(ROOT / "deploy" / "entrypoint.sh"))
    if args.device is not None and args.device < 0:
        print("--device is a device id: a whole number from 0.", file=sys.stderr)
        return USAGE_ERROR
    try:
        settings = read_settings()
    except NodeSettingsError as exc:
        print(f"The node's settings: {exc}", file=sys.stderr)
        return USAGE_ERROR
    console = sys.stderr if args.json == "-" else sys.stdout
    runtime = TritonRuntime(
        http_url=settings.triton_http, api_key=settings.triton_api_key, timeout=600.0
    )
    try:
        with tempfile.TemporaryDirectory(prefix="ascend-selftest-") as scratch:
            ctx = SelftestContext(
                env=dict(os.environ),
                store=ModelStore(settings.store_root),
                runtime=runtime,
                demo=DemoAssets.from_checkout(ROOT / "demo"),
                scratch=Path(scratch),
                device=args.device,
                ascend_root=ascend_root(os.environ),
                npu_ge_in_serving_triton=args.npu_ge_in_serving_triton,
            )
            return run_session(
                ctx, hub_version=hub_version(), json_target=args.json, console=console
            )
    except InvalidDevice as exc:
        print(str(exc.message), file=sys.stderr)
        return USAGE_ERROR
    except ReportNotWritten as exc:
        print(str(exc), file=sys.stderr)
        return 1
    finally:
        runtime.close()


if __name__ == "__main__":
    sys.exit(main())
