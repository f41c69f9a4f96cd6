"""CANN installs beyond the toolkit under the driver's root (docs/cann.md#install-layouts).

- Inference-only hosts with a runtime package, nnae or nnrt (pyACL and the runtime, no ATC):
  the entrypoint sources its set_env.sh, discovery says "runtime only: pyACL, no ATC".
- CANN installed by a non-root user under its home, apart from the driver: ASCEND_TOOLKIT_ROOT
  names the folder, for the entrypoint, discovery, compose and deploy/ascend-host-env.sh.
- Without either, everything behaves as before.

Discovery runs in-process on the fake installs of tests/fakes/toolkit.py; the entrypoint and
deploy/ascend-host-env.sh run for real with bash against the same trees.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from model_store import spawn
from model_store.compile.atc.environment import LAYOUT_NAMES, MISSING_HINT, cann_status
from model_store.targets import get_target
from tests.fakes.toolkit import (
    FAKE_CANN_VERSION,
    make_fake_toolkit,
    make_fake_user_install,
    set_env_script,
    toolkit_home,
)
from tests.unit.test_compose import (
    environment,
    hub_with_ascend,
    mounts,
    normalise,
    run_hub_entrypoint,
)

ROOT = Path(__file__).resolve().parents[2]
HUB_ENTRYPOINT = ROOT / "deploy" / "entrypoint.sh"
HOST_ENV = ROOT / "deploy" / "ascend-host-env.sh"
FAKE_NPU_SMI = ROOT / "tests" / "fakes" / "npu-smi"

requires_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")


def _driver_only(root: Path) -> Path:
    """An ASCEND_ROOT holding the driver and no CANN (CANN is elsewhere or absent)."""
    (root / "driver" / "lib64" / "driver").mkdir(parents=True)
    return root


# --- discovery ----------------------------------------------------------------------------------


@pytest.mark.parametrize("package", ["nnae", "nnrt"])
def test_a_runtime_package_is_runtime_only(tmp_path: Path, package: str) -> None:
    root = tmp_path / "Ascend"
    env = make_fake_toolkit(root, layout=package)  # type: ignore[arg-type]
    home = toolkit_home(root, package)  # type: ignore[arg-type]
    assert env[f"ASCEND_{package.upper()}_HOME"] == str(home)
    assert (home / "python" / "site-packages" / "acl").is_dir()
    assert not (home / "bin" / "atc").exists()

    status = cann_status({"ASCEND_ROOT": str(root), "PATH": ""})
    assert not status.available and status.atc_path is None and status.toolkit_home is None
    assert status.layout == package
    assert status.runtime_home == str(home)
    assert status.set_env == str(set_env_script(root, package))
    assert status.version == FAKE_CANN_VERSION
    assert str(status.reason) == (
        f"runtime only: pyACL, no ATC ({LAYOUT_NAMES[package]!s} at {home}); {MISSING_HINT!s}."
    )
    assert status.as_dict()["runtime_home"] == str(home)


def test_the_acl_target_cannot_compile_on_a_runtime_only_host(tmp_path: Path) -> None:
    root = tmp_path / "Ascend"
    make_fake_toolkit(root, layout="nnrt")
    said = str(get_target("acl").status({"ASCEND_ROOT": str(root), "PATH": ""}).reason)
    assert said.startswith("needs CANN: runtime only: pyACL, no ATC (")


def test_the_toolkit_wins_over_a_runtime_package(tmp_path: Path) -> None:
    root = tmp_path / "Ascend"
    make_fake_toolkit(root, layout="nnrt")
    make_fake_toolkit(root, layout="ascend-toolkit")
    status = cann_status({"ASCEND_ROOT": str(root), "PATH": ""})
    assert status.available and status.layout == "ascend-toolkit"
    assert status.runtime_home is None


def test_nnae_is_tried_before_nnrt_and_its_variable_before_the_roots(tmp_path: Path) -> None:
    root = tmp_path / "Ascend"
    make_fake_toolkit(root, layout="nnrt")
    make_fake_toolkit(root, layout="nnae")
    assert cann_status({"ASCEND_ROOT": str(root), "PATH": ""}).layout == "nnae"
    # What nnrt's set_env.sh exports names it, wherever the roots point.
    elsewhere = tmp_path / "elsewhere"
    make_fake_toolkit(elsewhere, layout="nnrt")
    status = cann_status(
        {"ASCEND_NNRT_HOME": str(toolkit_home(elsewhere, "nnrt")), "ASCEND_ROOT": str(tmp_path)}
        | {"PATH": ""}
    )
    assert status.layout == "nnrt" and status.runtime_home == str(toolkit_home(elsewhere, "nnrt"))


def test_a_runtime_package_under_home_is_found_too(tmp_path: Path) -> None:
    user = tmp_path / "home" / "ai"
    make_fake_user_install(user, layout="nnrt")
    status = cann_status({"ASCEND_ROOT": str(tmp_path / "none"), "HOME": str(user), "PATH": ""})
    assert status.layout == "nnrt"
    assert status.runtime_home == str(user / "Ascend" / "nnrt" / "latest")


@pytest.mark.parametrize("layout", ["ascend-toolkit", "cann"])
def test_a_non_root_install_is_found_through_ascend_toolkit_root(
    tmp_path: Path, layout: str
) -> None:
    driver_root = _driver_only(tmp_path / "usr" / "Ascend")
    cann_root = make_fake_user_install(tmp_path / "home" / "ai", layout=layout)  # type: ignore[arg-type]
    assert not (cann_root / "driver").exists()
    # The worker's HOME is the image's, not the installer's.
    env = {
        "ASCEND_ROOT": str(driver_root),
        "ASCEND_TOOLKIT_ROOT": str(cann_root),
        "HOME": str(tmp_path / "image-home"),
        "PATH": "",
    }
    status = cann_status(env)
    assert status.available and status.layout == layout
    assert status.toolkit_home == str(toolkit_home(cann_root, layout))
    # The host report, diagnostics and self-test pass the driver root's homes: still found.
    from model_store.compile.atc.environment import default_toolkit_homes

    passed = cann_status(env, default_homes=default_toolkit_homes(driver_root, env["HOME"]))
    assert passed.toolkit_home == status.toolkit_home
    # Without the setting, as before: not found.
    del env["ASCEND_TOOLKIT_ROOT"]
    assert not cann_status(env).available


def test_an_ascend_toolkit_root_without_cann_says_so(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {"ASCEND_ROOT": str(tmp_path / "none"), "ASCEND_TOOLKIT_ROOT": str(empty), "PATH": ""}
    status = cann_status(env)
    assert not status.available
    assert str(status.reason).startswith(
        f"ASCEND_TOOLKIT_ROOT={empty} holds no CANN (looked for cann/, ascend-toolkit/latest/, "
        "nnae/latest/ and nnrt/latest/); set ATC_PATH"
    )


def test_without_the_new_settings_discovery_says_what_it_said(tmp_path: Path) -> None:
    env = {"ASCEND_ROOT": str(tmp_path), "PATH": ""}
    status = cann_status(env)
    assert status.as_dict() == cann_status(env | {"ASCEND_TOOLKIT_ROOT": ""}).as_dict()
    assert str(status.reason) == f"ATC (CANN toolkit) is not installed here; {MISSING_HINT!s}."
    assert (status.layout, status.version, status.set_env, status.runtime_home) == (None,) * 4
    make_fake_toolkit(tmp_path, layout="cann")
    found = cann_status(env)
    assert found.available and found.toolkit_home == str(tmp_path / "cann")
    assert found.reason == cann_status(env | {"ASCEND_TOOLKIT_ROOT": ""}).reason


# --- the entrypoint, run for real ---------------------------------------------------------------


def _entrypoint(env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    done = run_hub_entrypoint(env)
    assert done.returncode == 0, done.stderr
    return done, dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


@requires_bash
@pytest.mark.parametrize("package", ["nnae", "nnrt"])
def test_the_entrypoint_sets_up_a_runtime_package(tmp_path: Path, package: str) -> None:
    root = _driver_only(tmp_path / "Ascend")
    make_fake_toolkit(root, layout=package)  # type: ignore[arg-type]
    home = toolkit_home(root, package)  # type: ignore[arg-type]
    done, env = _entrypoint({"ASCEND_ROOT": str(root), "ASCEND_TOOLKIT_ROOT": ""})
    assert env[f"ASCEND_{package.upper()}_HOME"] == str(home)
    assert str(home / "python" / "site-packages") in env["PYTHONPATH"].split(":")  # pyACL
    assert str(root / "driver" / "lib64" / "driver") in env["LD_LIBRARY_PATH"].split(":")
    assert "ASCEND_TOOLKIT_HOME" not in env
    assert f"{root / package} is CANN's {package} package: runtime only" in done.stderr
    status = cann_status(env)
    assert not status.available and status.layout == package


@requires_bash
def test_the_entrypoint_tries_toolkits_first_then_nnae_then_nnrt(tmp_path: Path) -> None:
    root = tmp_path / "Ascend"
    for layout in ("nnrt", "nnae", "ascend-toolkit", "cann"):
        make_fake_toolkit(root, layout=layout)
        done, env = _entrypoint({"ASCEND_ROOT": str(root)})
        home = toolkit_home(root, layout)
        if layout in ("nnae", "nnrt"):
            assert env[f"ASCEND_{layout.upper()}_HOME"] == str(home)
        else:
            assert env["ASCEND_TOOLKIT_HOME"] == str(home)
            assert "runtime only" not in done.stderr


@requires_bash
@pytest.mark.parametrize("layout", ["ascend-toolkit", "cann"])
def test_the_entrypoint_finds_cann_under_ascend_toolkit_root_and_the_driver_under_ascend_root(
    tmp_path: Path, layout: str
) -> None:
    driver_root = _driver_only(tmp_path / "usr" / "Ascend")
    cann_root = make_fake_user_install(tmp_path / "home" / "ai", layout=layout)  # type: ignore[arg-type]
    _, env = _entrypoint(
        {
            "ASCEND_ROOT": str(driver_root),
            "ASCEND_TOOLKIT_ROOT": str(cann_root),
            "HOME": str(tmp_path / "image-home"),
        }
    )
    assert env["ASCEND_TOOLKIT_HOME"] == str(toolkit_home(cann_root, layout))  # type: ignore[arg-type]
    assert str(driver_root / "driver" / "lib64" / "driver") in env["LD_LIBRARY_PATH"].split(":")
    assert cann_status(env).available


@requires_bash
def test_the_entrypoint_names_the_setting_it_looked_under(tmp_path: Path) -> None:
    root = tmp_path / "Ascend"
    make_fake_toolkit(root)
    empty = tmp_path / "empty"
    empty.mkdir()
    done, env = _entrypoint({"ASCEND_ROOT": str(root), "ASCEND_TOOLKIT_ROOT": str(empty)})
    assert f"no CANN set_env.sh under ASCEND_TOOLKIT_ROOT={empty}" in done.stderr
    assert "ASCEND_TOOLKIT_HOME" not in env  # CANN is looked for there only
    # Empty, as compose passes it by default: ASCEND_ROOT's CANN, as before.
    done, env = _entrypoint({"ASCEND_ROOT": str(root), "ASCEND_TOOLKIT_ROOT": ""})
    assert env["ASCEND_TOOLKIT_HOME"] == str(toolkit_home(root))
    assert done.stderr == ""


# --- deploy/ascend-host-env.sh, run for real ----------------------------------------------------


def _host_env(tmp_path: Path, **extra: str) -> tuple[list[str], str]:
    """The script's CANN lines (comments starting "# CANN" and ASCEND_TOOLKIT_ROOT=) and its
    stderr, on a host with the driver under tmp_path/Ascend and the fake npu-smi."""
    dev = tmp_path / "dev"
    dev.mkdir(exist_ok=True)
    (dev / "davinci_manager").touch()
    (tmp_path / "Ascend" / "driver").mkdir(parents=True, exist_ok=True)
    tools = tmp_path / "tools"
    if not tools.exists():
        tools.mkdir()
        (tools / "npu-smi").symlink_to(FAKE_NPU_SMI)
    (tmp_path / "homes").mkdir(exist_ok=True)
    env = {
        "PATH": f"{tools}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HUB_DEV_DIR": str(dev),
        "ASCEND_ROOT": str(tmp_path / "Ascend"),
        "HUB_HOME_BASE": str(tmp_path / "homes"),
        **extra,
    }
    done = spawn.run(
        ["bash", str(HOST_ENV)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[2] == f"ASCEND_ROOT={tmp_path / 'Ascend'}"
    cann = [line for line in lines if line.startswith(("# CANN", "ASCEND_TOOLKIT_ROOT="))]
    return cann, done.stderr


@requires_bash
def test_host_env_names_the_toolkit_under_ascend_root_and_nothing_more(tmp_path: Path) -> None:
    make_fake_toolkit(tmp_path / "Ascend", layout="cann")
    lines, _ = _host_env(tmp_path)
    assert lines == [
        f"# CANN: {tmp_path / 'Ascend' / 'cann' / 'set_env.sh'}, the CANN toolkit: ATC and "
        f"pyACL (version {FAKE_CANN_VERSION})"
    ]


@requires_bash
@pytest.mark.parametrize("where", ["homes", "HOME"])
def test_host_env_prints_ascend_toolkit_root_for_a_non_root_install(
    tmp_path: Path, where: str
) -> None:
    user = tmp_path / "homes" / "ai"
    cann_root = make_fake_user_install(user, layout="ascend-toolkit")
    # Run as root (another HOME: /home/* is searched) or as the installer (HOME is searched).
    lines, _ = _host_env(tmp_path, HOME=str(user if where == "HOME" else tmp_path / "root"))
    assert lines == [
        f"# CANN: {cann_root / 'ascend-toolkit' / 'set_env.sh'}, the CANN toolkit: ATC and "
        f"pyACL (version {FAKE_CANN_VERSION})",
        f"ASCEND_TOOLKIT_ROOT={cann_root}",
    ]


@requires_bash
def test_host_env_says_a_runtime_package_cannot_compile(tmp_path: Path) -> None:
    make_fake_toolkit(tmp_path / "Ascend", layout="nnrt")
    lines, _ = _host_env(tmp_path)
    assert lines == [
        f"# CANN: {tmp_path / 'Ascend' / 'nnrt' / 'set_env.sh'}, CANN's nnrt runtime package: "
        f"pyACL, no ATC (version {FAKE_CANN_VERSION})",
        "# CANN: no toolkit here: the acl target cannot compile on this host (runtime only: "
        "pyACL, no ATC); install the CANN toolkit to compile here",
    ]


@requires_bash
def test_host_env_prefers_a_toolkit_elsewhere_to_a_runtime_package_under_the_root(
    tmp_path: Path,
) -> None:
    make_fake_toolkit(tmp_path / "Ascend", layout="nnrt")
    cann_root = make_fake_user_install(tmp_path / "homes" / "ai", layout="cann")
    lines, _ = _host_env(tmp_path)
    assert lines[-1] == f"ASCEND_TOOLKIT_ROOT={cann_root}"
    assert len(lines) == 3


@requires_bash
def test_host_env_without_cann_keeps_stdout_as_it_was(tmp_path: Path) -> None:
    lines, stderr = _host_env(tmp_path)
    assert lines == []
    assert "ascend-host-env: no CANN found" in stderr


# --- compose ------------------------------------------------------------------------------------


def _worker(env: dict[str, str]) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:

    worker = hub_with_ascend(env=env)["worker"]
    binds = [m for m in mounts(worker) if m["type"] == "bind"]
    targets = [normalise(m["target"]) for m in binds]
    assert len(targets) == len(set(targets)), f"a target is mounted twice: {targets}"
    return environment(worker), {normalise(m["target"]): m for m in binds}


def test_compose_mounts_ascend_toolkit_root_at_the_same_path_when_set() -> None:
    env, binds = _worker({"ASCEND_TOOLKIT_ROOT": "/home/ai/Ascend"})
    assert env["ASCEND_TOOLKIT_ROOT"] == "/home/ai/Ascend"
    cann = binds["/home/ai/Ascend"]
    assert normalise(cann["source"]) == "/home/ai/Ascend" and cann["read_only"]
    driver = binds["/usr/local/Ascend"]  # the driver's root stays mounted
    assert normalise(driver["source"]) == "/usr/local/Ascend" and driver["read_only"]


def test_compose_without_ascend_toolkit_root_mounts_the_ascend_root_once() -> None:
    env, binds = _worker({})
    assert env["ASCEND_TOOLKIT_ROOT"] == ""  # the entrypoint and discovery: ASCEND_ROOT's
    assert normalise(binds["/usr/local/Ascend"]["source"]) == "/usr/local/Ascend"
    # docker-compose 1.x cannot leave the entry out: an inert placeholder, read-only.
    placeholder = binds["/opt/hub/ascend-toolkit-root-unset"]
    assert placeholder["source"] == "/dev/null" and placeholder["read_only"]
