"""The fake toolkit for pytest: ``make_fake_toolkit`` with the ``ATC_PATH`` contract, and the
``fake_cann`` fixture (tests only).

The folder itself is made by :mod:`tests.fakes.toolkit` (see its docstring for the layout).
This older entry point builds the ``ascend-toolkit`` layout *without* pyACL, so a worker given
its environment can compile but not run OMs, and returns ``ATC_PATH`` and
``ASCEND_TOOLKIT_HOME`` (no ``PATH``, so the fake ``npu-smi`` stays out of reach).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fakes.toolkit import FAKE_ATC, FAKE_CANN_VERSION, FAKES_DIR
from tests.fakes.toolkit import make_fake_toolkit as make_toolkit_folder

__all__ = ["FAKES_DIR", "FAKE_ATC", "FAKE_CANN_VERSION", "fake_cann", "make_fake_toolkit"]


def make_fake_toolkit(root: Path, version: str = FAKE_CANN_VERSION) -> dict[str, str]:
    """Creates a compile-only fake toolkit under ``root``; returns ``ATC_PATH`` and
    ``ASCEND_TOOLKIT_HOME``."""
    home = make_toolkit_folder(root, version=version, pyacl=False)["ASCEND_TOOLKIT_HOME"]
    return {"ATC_PATH": str(Path(home) / "bin" / "atc"), "ASCEND_TOOLKIT_HOME": home}


@pytest.fixture
def fake_cann(tmp_path: Path) -> dict[str, str]:
    """A worker's environment with a fresh fake toolkit: ``ATC_PATH``, ``ASCEND_TOOLKIT_HOME``
    and this process's ``PATH`` (ATC runs ``python3`` from it, as the real one does)."""
    return {**make_fake_toolkit(tmp_path / "Ascend"), "PATH": os.environ.get("PATH", os.defpath)}
