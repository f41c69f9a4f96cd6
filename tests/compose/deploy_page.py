"""docs/deploy-ascend.md as a script: the commands it gives, run as written in a clean checkout.

The page marks each command block a test runs with ``<!-- run: NAME -->`` on the line before
its fenced ``sh`` block. What stands in for the Atlas host is set around the commands, never in
them: ``HOME`` holds the operator's ``~/cann-packages`` (stand-in ``.run`` packages of the CANN
version and chip the page names), and the recipe's documented environment defaults point it at
this machine's base image, wheels and the stand-in GE backend (``ASCEND_BASE_IMAGE``,
``ASCEND_WHEELS``, ``ASCEND_GE_BACKEND``).
"""

from __future__ import annotations

import os
import platform
import re
import shlex
from pathlib import Path

from model_store import spawn
from tests.fakes.cann_run import make_run_packages

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "deploy-ascend.md"
_BLOCK = re.compile(r"<!-- run: (?P<name>[\w-]+) -->\n```sh\n(?P<body>.*?)```", re.S)


def blocks(page: Path = PAGE) -> dict[str, str]:
    """Every marked block of the page, by name, in the page's order."""
    return {m["name"]: m["body"] for m in _BLOCK.finditer(page.read_text())}


def commands(block: str) -> list[list[str]]:
    """The block's commands, one per line (no continuation lines on this page), split as a
    shell would."""
    return [shlex.split(line) for line in block.splitlines() if line.strip()]


def clean_checkout(folder: Path) -> Path:
    """A clone of this repository's committed state: what an operator checks out."""
    checkout = folder / "triton-model-hub"
    spawn.run(["git", "clone", "--quiet", str(ROOT), str(checkout)], check=True, timeout=300)
    return checkout


def operator_home(folder: Path, build_command: list[str]) -> Path:
    """A home whose ``--packages`` folder holds stand-ins of the packages the command names."""
    home = folder / "home"
    options = dict(zip(build_command[1::2], build_command[2::2], strict=False))
    packages = Path(options["--packages"].replace("~", str(home), 1))
    make_run_packages(packages, options["--cann"], platform.machine(), options["--chip"])
    return home


def run_block(block: str, checkout: Path, env: dict[str, str], timeout: float = 1800) -> str:
    """The block in bash, in the checkout, stopping at the first failing command."""
    done = spawn.run(
        ["bash", "-euo", "pipefail", "-c", block], cwd=checkout, capture_output=True, text=True,
        timeout=timeout, check=False, env={"PATH": os.environ["PATH"], **env},
    )  # fmt: skip
    if done.returncode != 0:
        raise AssertionError(
            f"docs/deploy-ascend.md block failed ({done.returncode}):\n{block}\n"
            f"{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
        )
    return done.stdout


def env_lines(text: str) -> dict[str, str]:
    """``NAME=value`` lines of an env file (comments and blank lines skipped)."""
    settings = {}
    for line in text.splitlines():
        if re.match(r"^[A-Z_]+=", line):
            name, value = line.split("=", 1)
            settings[name] = value
    return settings
