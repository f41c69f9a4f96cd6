"""A fake CANN toolkit layout on disk, holding the fake ``atc`` (for tests only).

The layout mirrors a default install closely enough for ``cann_status`` and
``atc_environment`` to treat it like the real one::

    <root>/ascend-toolkit/latest/
        bin/atc                                   # runs tests/fakes/atc with this interpreter
        opp/  compiler/  lib64/
        <arch>-linux/ascend_toolkit_install.info  # version=<version>

``bin/atc`` is a two-line shell wrapper that runs the fake with the test's own
Python: the fake needs ``onnx``, and ``python3`` on PATH may be another interpreter.
"""

from __future__ import annotations

import os
import platform
import shlex
import sys
from pathlib import Path

import pytest

FAKES_DIR = Path(__file__).resolve().parent
#: The fake atc script itself.
FAKE_ATC = FAKES_DIR / "atc"
FAKE_CANN_VERSION = "8.0.RC3"


def make_fake_toolkit(root: Path, version: str = FAKE_CANN_VERSION) -> dict[str, str]:
    """Creates the fake toolkit under ``root``; returns ``ATC_PATH`` and ``ASCEND_TOOLKIT_HOME``."""
    home = root / "ascend-toolkit" / "latest"
    for sub in ("bin", "opp", "compiler", "lib64"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    info = home / f"{platform.machine()}-linux" / "ascend_toolkit_install.info"
    info.parent.mkdir(parents=True, exist_ok=True)
    info.write_text(
        f"package_name=Ascend-cann-toolkit\nversion={version}\narch={platform.machine()}\n"
    )
    atc = home / "bin" / "atc"
    atc.write_text(
        "#!/bin/sh\n"
        "# Fake ATC for tests (tests/fakes/atc); not the real Ascend Tensor Compiler.\n"
        f'exec {shlex.quote(sys.executable)} {shlex.quote(str(FAKE_ATC))} "$@"\n'
    )
    atc.chmod(0o755)
    return {"ATC_PATH": str(atc), "ASCEND_TOOLKIT_HOME": str(home)}


@pytest.fixture
def fake_cann(tmp_path: Path) -> dict[str, str]:
    """A worker's environment with a fresh fake toolkit: ``ATC_PATH``, ``ASCEND_TOOLKIT_HOME``
    and this process's ``PATH`` (ATC runs ``python3`` from it, as the real one does)."""
    return {**make_fake_toolkit(tmp_path / "Ascend"), "PATH": os.environ.get("PATH", os.defpath)}
