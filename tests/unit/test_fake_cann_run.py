"""tests/fakes/cann_run.py: the stand-in CANN .run packages behave as the installers do in the
ways the image recipe relies on (tests/fakes/README.md, "CANN's .run packages")."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

import pytest

from model_store import spawn
from tests.fakes.cann_run import make_run_packages

ARCH = platform.machine()


def _install(package: Path, *args: str, answer: str = "") -> spawn.subprocess.CompletedProcess[str]:
    env = {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "HOME": "/nonexistent"}
    return spawn.run(["bash", str(package), *args], input=answer, stdin=None, env=env,
                     capture_output=True,
                     text=True, timeout=120, check=False)  # fmt: skip


@pytest.mark.parametrize(("version", "home", "kernels"), [
    ("8.3.RC1", "ascend-toolkit/latest", "ascend310p"),
    ("8.5.0", "cann", "ascend310p"),
])  # fmt: skip
def test_toolkit_then_operators_install_the_layout_of_the_release(
    tmp_path: Path, version: str, home: str, kernels: str
) -> None:
    toolkit, ops = make_run_packages(tmp_path / "packages", version, ARCH, "310p")
    target = tmp_path / "Ascend"
    refused = _install(ops, "--install", "--quiet", f"--install-path={target}")
    assert refused.returncode == 1 and "install the toolkit first" in refused.stderr

    done = _install(toolkit, "--install", f"--install-path={target}", answer="y\n")
    assert done.returncode == 0 and "install success" in done.stdout, done.stderr
    assert (target / home / "bin" / "atc").is_file()
    assert (target / home / "python" / "site-packages" / "acl").exists()
    info = target / home / f"{ARCH}-linux"
    assert f"version={version}" in (info / "ascend_toolkit_install.info").read_text()
    assert not (info / "ascend_ops_install.info").exists()  # the ops package's own file
    assert not (target / "driver").exists()  # CANN packages carry no driver

    done = _install(ops, "--install", "--quiet", f"--install-path={target}")
    assert done.returncode == 0, done.stderr
    assert (target / home / "opp/built-in/op_impl/ai_core/tbe/kernel" / kernels).is_dir()
    assert (info / "ascend_ops_install.info").exists() == (home == "cann")


def test_the_licence_question_wants_yes_unless_quiet(tmp_path: Path) -> None:
    toolkit, _ = make_run_packages(tmp_path / "packages", "8.3.RC1", ARCH)
    done = _install(toolkit, "--install", f"--install-path={tmp_path / 'A'}", answer="n\n")
    assert done.returncode == 1 and "licence not accepted" in done.stderr
    assert not (tmp_path / "A").exists()
    assert _install(toolkit, f"--install-path={tmp_path / 'A'}").returncode == 1  # no --install


def test_a_package_for_another_architecture_refuses(tmp_path: Path) -> None:
    other = "aarch64" if ARCH == "x86_64" else "x86_64"
    toolkit, _ = make_run_packages(tmp_path / "packages", "8.3.RC1", other)
    done = _install(toolkit, "--install", "--quiet", f"--install-path={tmp_path / 'A'}")
    assert done.returncode == 1 and f"this package is for {other}" in done.stderr
