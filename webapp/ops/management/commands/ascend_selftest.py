"""`python manage.py ascend_selftest [--json FILE] [--device N]`: first contact with Ascend.

Runs the stages of :mod:`model_store.ascend.selftest` (CANN, ATC's Python, the NPUs, the SoC,
ATC compiling the demo model, pyACL on each NPU, Triton through ``acl`` and ``npu_ge``, the
same top-1 everywhere) with this hub's settings, prints each stage as it finishes, and writes
the JSON report an operator attaches to a bug (docs/selftest.md). Exit status: 0 when every
stage passed or does not apply here, 1 when one failed or could not run, 2 for a bad
``--device``. What it loads into Triton has a temporary name and is removed again; its scratch
files are removed at the end, also on failure or Ctrl-C.
"""

from __future__ import annotations

import os
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from model_store.ascend.selftest import DemoAssets, InvalidDevice, SelftestContext
from model_store.ascend.selftest.session import (
    ReportNotWritten,
    entrypoint_environment,
    rerun_in,
    run_session,
)
from model_store.diagnostics.host_checks import ascend_root
from webapp.ops.triton import get_runtime
from webapp.ops.triton_files import triton_backends_dir
from webapp.registry.catalogue.storage import get_store

USAGE_ERROR = 2


def hub_version() -> str:
    """The version in the checkout's pyproject.toml (the hub is run from its checkout)."""
    try:
        with (Path(settings.BASE_DIR) / "pyproject.toml").open("rb") as fh:
            return str(tomllib.load(fh)["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"


def _device(value: str) -> int:
    """``--device``: a device id, a whole number from 0."""
    if not value.isdigit():
        raise CommandError(
            f"--device {value!r} is not a device id: give a whole number from 0 (the Device "
            "column of `npu-smi info`).",
            returncode=USAGE_ERROR,
        )
    return int(value)


def worker_environment() -> dict[str, str]:
    """The environment the worker itself runs with (:func:`entrypoint_environment` with the
    hub image's entrypoint)."""
    return entrypoint_environment(Path(settings.BASE_DIR) / "deploy" / "entrypoint.sh")


class Command(BaseCommand):
    help = (
        "Check this Ascend host stage by stage (CANN, ATC, npu-smi, pyACL, Triton) with the "
        "bundled demo model, and write a report to attach to a bug (docs/selftest.md)."
    )

    def _run_in_the_workers_environment(self) -> None:
        """From the command line, start again in the worker's environment when this one lacks
        CANN's: the loader reads LD_LIBRARY_PATH (pyACL's libraries) only at start."""
        if sys.argv[1:2] != ["ascend_selftest"]:
            return  # called from code (call_command): its caller set the environment
        rerun_in(worker_environment())

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--json",
            metavar="FILE",
            help="write the JSON report to FILE ('-' for standard output)",
        )
        parser.add_argument(
            "--device",
            metavar="N",
            help="run the pyACL stage on NPU N only (default: every NPU pyACL reports)",
        )
        parser.add_argument(
            "--npu-ge-in-serving-triton",
            action="store_true",
            help="load the npu_ge trial into the Triton that serves (by default it is not: a "
            "failed GE load blocks every later npu_ge load there until Triton restarts; use it "
            "on a Triton that serves nothing yet, docs/selftest.md)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self._run_in_the_workers_environment()
        device = _device(options["device"]) if options.get("device") is not None else None
        json_target: str | None = options.get("json")
        # With the report on standard output, the stage lines go to standard error.
        console = sys.stderr if json_target == "-" else sys.stdout
        runtime = get_runtime()
        try:
            with tempfile.TemporaryDirectory(prefix="ascend-selftest-") as scratch:
                ctx = SelftestContext(
                    env=dict(os.environ),
                    store=get_store(),
                    runtime=runtime,
                    demo=DemoAssets.from_checkout(Path(settings.BASE_DIR) / "demo"),
                    scratch=Path(scratch),
                    backends_dir=triton_backends_dir(),
                    device=device,
                    # ASCEND_ROOT, as the worker's host report reads it: a `docker compose
                    # exec` does not pass the entrypoint that sources set_env.sh, so the
                    # install is found under the root compose mounts.
                    ascend_root=ascend_root(os.environ),
                    npu_ge_in_serving_triton=bool(options.get("npu_ge_in_serving_triton")),
                )
                status = run_session(
                    ctx, hub_version=hub_version(), json_target=json_target, console=console
                )
        except InvalidDevice as exc:
            raise CommandError(exc.message, returncode=USAGE_ERROR) from exc
        except ReportNotWritten as exc:
            raise CommandError(str(exc)) from exc
        finally:
            runtime.close()
        if status:
            raise CommandError(
                "The self-test did not pass; the stages marked FAILED say what to do next.",
                returncode=status,
            )
