"""deploy/triton/ascend/: the Ascend Triton image recipe, without building it.

The build itself runs in the compose suite (``make compose-images`` and
docs/deploy-ascend.md's command, on stand-in CANN packages). Here: every source is pinned and
fetched with TLS checks on, and build.sh finds the packages by each release's naming, checks
them, and hands Docker what the Dockerfile expects (a recording stand-in for ``docker``).
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
from pathlib import Path

import pytest

from model_store import spawn
from tests.compose import deploy_page
from tests.fakes.cann_run import make_run_packages, package_names

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "deploy" / "triton" / "ascend"
BUILD = RECIPE / "build.sh"
ARCH = platform.machine()


def _requirements(path: Path) -> list[str]:
    """Each requirement of a pip file with its continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    return [line for line in text.splitlines() if line and not line.lstrip().startswith("#")]


@pytest.mark.parametrize("name", ["requirements.txt", "triton.txt"])
def test_every_python_package_is_pinned_by_version_and_hash(name: str) -> None:
    for line in _requirements(RECIPE / name):
        assert re.match(r"^[a-z0-9_.-]+==[^ ;]+", line, re.I), line
        assert "--hash=sha256:" in line, line


def test_triton_comes_from_both_architectures_wheels() -> None:
    (line,) = _requirements(RECIPE / "triton.txt")
    assert line.startswith("nvidia-pytriton==0.7.0")
    assert len(re.findall(r"--hash=sha256:[0-9a-f]{64}", line)) == 2


def test_sources_are_fetched_by_full_hash_with_tls_checks_on() -> None:
    ge = (RECIPE / "ge-backend.Dockerfile").read_text()
    for name in ("GE_BACKEND", "TRITON_CORE", "TRITON_COMMON", "TRITON_BACKEND"):
        assert re.search(rf"^ARG {name}_COMMIT=[0-9a-f]{{40}}$", ge, re.M), name
    assert "GE_BACKEND_COMMIT=5a82641" in ge
    for arch in ("X86_64", "AARCH64"):
        assert re.search(rf"^ARG ORT_SHA256_{arch}=[0-9a-f]{{64}}$", ge, re.M), arch
    assert "sha256sum -c" in ge and "rev-parse HEAD" in ge
    # The Triton repositories come from the fetched commits, never from FetchContent's branch.
    assert ge.count("FETCHCONTENT_SOURCE_DIR_REPO-") == 3 and "FULLY_DISCONNECTED=ON" in ge
    for path in RECIPE.iterdir():
        text = path.read_text()
        for unsafe in ("GIT_SSL_NO_VERIFY", "no-check-certificate", "CMAKE_TLS_VERIFY",
                       "--trusted-host", "-k ", "--insecure"):  # fmt: skip
            assert unsafe not in text, (path.name, unsafe)
    dockerfile = (RECIPE / "Dockerfile").read_text()
    assert dockerfile.count("--require-hashes") == 2 and "sha256sum -c" in dockerfile


def test_the_operator_package_follows_each_releases_naming() -> None:
    assert package_names("8.3.RC1", "x86_64", "310p") == (
        "Ascend-cann-toolkit_8.3.RC1_linux-x86_64.run",
        "Ascend-cann-kernels-310p_8.3.RC1_linux-x86_64.run",
    )
    assert (
        package_names("8.5.0", "aarch64", "A3")[1] == "Ascend-cann-A3-ops_8.5.0_linux-aarch64.run"
    )


def _fake_docker(tmp_path: Path) -> tuple[Path, Path]:
    """A ``docker`` that records each call's arguments, one call per line."""
    log = tmp_path / "docker.log"
    script = tmp_path / "docker"
    script.write_text(f'#!/bin/bash\necho "$*" >> {log}\n')
    script.chmod(0o755)
    return script, log


def _build(tmp_path: Path, *args: str) -> spawn.subprocess.CompletedProcess[str]:
    docker, _ = _fake_docker(tmp_path)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "DOCKER": str(docker)}
    return spawn.run(["bash", str(BUILD), *args], env=env, capture_output=True, text=True,
                     timeout=120, check=False)  # fmt: skip


@pytest.mark.parametrize(("version", "chip"), [("8.3.RC1", "310p"), ("8.5.0", "910b")])
def test_build_checks_the_packages_and_hands_docker_their_hashes(
    tmp_path: Path, version: str, chip: str
) -> None:
    packages = tmp_path / "cann"
    toolkit, ops = make_run_packages(packages, version, ARCH, chip)
    ge = tmp_path / "ge"
    ge.mkdir()
    (ge / "libtriton_npu_ge.so").write_bytes(b"\x7fELF")
    done = _build(
        tmp_path, "--cann", version, "--chip", chip, "--packages", str(packages),
        "--ge-backend", str(ge), "--base", "debian:12", "--tag", "hub/ascend:t",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "docker.log").read_text().splitlines()
    builds = [c for c in calls if c.startswith("build ")]
    assert len(builds) == 2 and "--target base" in builds[0] and "--target final" in builds[1]
    for package in (toolkit, ops):
        digest = hashlib.sha256(package.read_bytes()).hexdigest()
        assert digest in builds[0] and f"/packages/{package.name}" in builds[0]
    assert f"ARCH={ARCH}" in builds[0] and "BASE_IMAGE=debian:12" in builds[0]
    assert f"-t hub/ascend:{version}-{chip}-{ARCH}" in builds[1]
    assert f"CANN_VERSION={version}" in builds[1]
    assert "private registry" in done.stderr


def test_build_names_the_missing_package_and_what_the_folder_has(tmp_path: Path) -> None:
    packages = tmp_path / "cann"
    toolkit, _ = make_run_packages(packages, "8.5.0", ARCH, "310p")
    # An operator who downloaded the 8.5 toolkit but the old kernels package.
    (packages / f"Ascend-cann-kernels-310p_8.5.0_linux-{ARCH}.run").write_text("")
    (packages / f"Ascend-cann-310p-ops_8.5.0_linux-{ARCH}.run").unlink()
    done = _build(tmp_path, "--cann", "8.5.0", "--chip", "310p", "--packages", str(packages))
    assert done.returncode == 2
    assert f"missing {packages}/Ascend-cann-310p-ops_8.5.0_linux-{ARCH}.run" in done.stderr
    assert toolkit.name in done.stderr and "hiascend.com" in done.stderr
    assert not (tmp_path / "docker.log").exists()


OTHER_ARCH = "aarch64" if ARCH == "x86_64" else "x86_64"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--cann", "8.3.RC1", "--chip", "310p"], "--packages are required"),
        (["--arch", "riscv64"], "must be x86_64 or aarch64"),
        (["--arch", OTHER_ARCH], "build on a"),
        (["--cann", "8;rm -rf /"], "not a CANN version"),
        (["--chip", "A3"], "needs CANN 8.5 or later"),
    ],
)
def test_build_refuses_bad_arguments_before_docker(
    tmp_path: Path, args: list[str], said: str
) -> None:
    """Later options win, so each case changes one of a good set (or, first, gives no folder)."""
    packages = tmp_path / "cann"
    make_run_packages(packages, "8.3.RC1", ARCH, "310p")
    good = ["--cann", "8.3.RC1", "--chip", "310p", "--packages", str(packages)]
    done = _build(tmp_path, *(args if "--packages are required" in said else [*good, *args]))
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert not (tmp_path / "docker.log").exists()


def test_the_deploy_page_gives_the_recipe_command_and_the_first_commands() -> None:
    page = deploy_page.blocks()
    assert list(page) == ["ascend-image", "one-host-env", "one-host-up", "one-host-selftest"]
    (build,) = deploy_page.commands(page["ascend-image"])
    assert build[0] == "deploy/triton/ascend/build.sh" and (ROOT / build[0]).is_file()
    assert {"--cann", "--chip", "--packages"} <= set(build)
    assert "COMPOSE_FILE=docker-compose.yml:deploy/hub-ascend.yml" in page["one-host-env"]
    (selftest,) = deploy_page.commands(page["one-host-selftest"])
    assert selftest[:3] == ["docker-compose", "exec", "-T"] and "ascend_selftest" in selftest
