"""The toolkit-shaped folder of CANN stand-ins (tests/fakes/toolkit.py), and the fake machine
the fake pyACL sees: found the way real CANN is, consistent with the fake npu-smi."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from model_store import spawn
from model_store.backends.acl.model import _pyacl_search_path
from model_store.compile.atc.environment import cann_status
from tests.fakes.toolkit import FAKE_ACL, FAKE_CANN_VERSION, main, make_fake_toolkit

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("layout", "home", "set_env"),
    [
        ("ascend-toolkit", "ascend-toolkit/latest", "ascend-toolkit/set_env.sh"),
        ("cann", "cann", "cann/set_env.sh"),
    ],
)
def test_each_layout_is_found_like_a_real_install(
    tmp_path: Path, layout: str, home: str, set_env: str
) -> None:
    env = make_fake_toolkit(tmp_path, layout=layout, path="/usr/bin")  # type: ignore[arg-type]
    assert env == {
        "ASCEND_TOOLKIT_HOME": str(tmp_path / home),
        "PATH": f"{tmp_path / 'driver' / 'tools'}:/usr/bin",
    }
    status = cann_status({"ASCEND_TOOLKIT_HOME": env["ASCEND_TOOLKIT_HOME"], "PATH": ""})
    assert status.available and status.layout == layout
    assert status.atc_path == str(tmp_path / home / "bin" / "atc")
    assert status.set_env == str(tmp_path / set_env)
    assert status.version == FAKE_CANN_VERSION
    assert status.ops_version == (FAKE_CANN_VERSION if layout == "cann" else None)
    assert (tmp_path / home / "python" / "site-packages" / "acl").resolve() == FAKE_ACL
    # The install root works as well, as it does for real CANN.
    assert cann_status({"ASCEND_TOOLKIT_HOME": str(tmp_path), "PATH": ""}).layout == layout


def test_set_env_exports_what_the_hub_reads(tmp_path: Path) -> None:
    make_fake_toolkit(tmp_path, layout="cann")
    shown = spawn.run(
        ["sh", "-c", f'. "{tmp_path}/cann/set_env.sh" && env'],
        env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=True, timeout=30,
    ).stdout  # fmt: skip
    exported = dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)
    home = str(tmp_path / "cann")
    assert exported["ASCEND_TOOLKIT_HOME"] == exported["ASCEND_HOME_PATH"] == home
    assert exported["ASCEND_OPP_PATH"] == f"{home}/opp"
    assert exported["PATH"].startswith(f"{home}/bin:")
    assert exported["PATH"].endswith(":/usr/bin:/bin")
    assert exported["PYTHONPATH"].startswith(f"{home}/python/site-packages:")
    assert exported["LD_LIBRARY_PATH"].startswith(f"{home}/lib64:")


def test_the_command_prints_exports_for_a_shell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(tmp_path / "Ascend"), "--layout", "cann"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"export ASCEND_TOOLKIT_HOME={tmp_path / 'Ascend' / 'cann'}"
    assert lines[1] == f'export PATH={tmp_path / "Ascend" / "driver" / "tools"}:"$PATH"'


@pytest.mark.parametrize("var", ["ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH"])
@pytest.mark.parametrize("layout", ["ascend-toolkit", "cann"])
def test_the_backend_looks_for_pyacl_in_both_layouts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, var: str, layout: str
) -> None:
    home = make_fake_toolkit(tmp_path, layout=layout)["ASCEND_TOOLKIT_HOME"]  # type: ignore[arg-type]
    site = str(Path(home) / "python" / "site-packages")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "nobody"))
    for name in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(var, home)
    assert site in _pyacl_search_path()
    monkeypatch.setenv(var, str(tmp_path))  # the install root
    assert site in _pyacl_search_path()


def test_a_non_root_install_under_home_is_a_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = make_fake_toolkit(tmp_path / "Ascend", layout="cann")["ASCEND_TOOLKIT_HOME"]
    for name in ("PYTHONPATH", "ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert str(Path(home) / "python" / "site-packages") in _pyacl_search_path()


def _in_a_fresh_process(env: dict[str, str], code: str) -> str:
    """``code``'s output in a new interpreter with only ``env`` (no PYTHONPATH to the fakes)."""
    result = spawn.run(
        [sys.executable, "-c", code], env=env, cwd="/", capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_import_acl_finds_the_fake_through_the_toolkit_alone(tmp_path: Path) -> None:
    env = make_fake_toolkit(tmp_path, layout="cann")
    backend = ROOT / "model_store" / "backends" / "acl" / "model.py"
    code = (
        "import importlib.util as u\n"
        f"spec = u.spec_from_file_location('acl_backend', {str(backend)!r})\n"
        "m = u.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "acl = m.import_acl()\n"
        "print(acl.get_soc_name(), acl.rt.get_device_count())"
    )
    out = _in_a_fresh_process({**env, "HOME": str(tmp_path)}, code)
    assert out == "Ascend310P3 (2, 0)"


# --------------------------------------------------------------------------- the fake machine


@pytest.fixture
def fake_host(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    from tests.fakes.acl import _host

    for name in (
        "FAKE_NPU_SMI_SAMPLE",
        "FAKE_ACL_DEVICE_COUNT",
        "FAKE_ACL_SOC",
        "ASCEND_RT_VISIBLE_DEVICES",
    ):
        monkeypatch.delenv(name, raising=False)
    return _host


@pytest.mark.parametrize(
    ("sample", "soc", "ids"),
    [
        (None, "Ascend310P3", [0, 1]),  # the fake npu-smi's default: NPU 4 and 5
        ("310p3_duo_npu-smi-25.2.0.txt", "Ascend310P3", [0, 1]),
        ("910b4_npu-smi-24.1.rc1.txt", "Ascend910B4", [0]),
        ("310_atlas300i_npu-smi-21.0.4.txt", "Ascend310", [3, 4, 5, 6]),
    ],
)
def test_the_fake_machine_is_the_one_npu_smi_shows(
    fake_host, monkeypatch: pytest.MonkeyPatch, sample: str | None, soc: str, ids: list[int]
) -> None:  # type: ignore[no-untyped-def]
    if sample:
        monkeypatch.setenv("FAKE_NPU_SMI_SAMPLE", sample)
    assert fake_host.soc_name() == soc
    assert fake_host.device_ids() == ids
    mapping = spawn.run(
        [str(ROOT / "tests" / "fakes" / "npu-smi"), "info", "-m"],
        capture_output=True, text=True, check=True, env=dict(os.environ), timeout=30,
    ).stdout.splitlines()[1:]  # fmt: skip
    assert [int(line.split()[2]) for line in mapping] == ids


def test_visible_devices_renumber_and_overrides_win(
    fake_host, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "1")
    assert fake_host.device_ids() == [0]
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "1,0,7")
    assert fake_host.device_ids() == [0, 1]
    monkeypatch.setenv("FAKE_ACL_DEVICE_COUNT", "4")
    monkeypatch.setenv("FAKE_ACL_SOC", "Ascend910B1")
    assert fake_host.device_ids() == [0, 1, 2, 3]
    assert fake_host.soc_name() == "Ascend910B1"


def test_acl_answers_from_the_fake_machine(fake_host, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    import tests.fakes.acl as acl

    acl._fake.reset()
    assert acl.get_soc_name() == "Ascend310P3"
    assert acl.rt.get_device_count() == (2, 0)
    assert acl.init() == 0
    assert acl.rt.set_device(1) == 0
    assert acl.rt.set_device(2) == acl._fake.ACL_ERROR_RT_INVALID_DEVICEID
    assert acl.rt.reset_device(1) == 0
    assert acl.finalize() == 0
    acl._fake.reset()


def test_the_pre_8_0_pyacl_folder_is_searched_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CANN before 8.0, which Atlas 300I (Ascend 310) hosts run, put pyACL in
    <home>/pyACL/python/site-packages (public set_env scripts; docs/cann.md#install-layouts)."""
    home = tmp_path / "ascend-toolkit" / "latest"
    old = home / "pyACL" / "python" / "site-packages"
    old.mkdir(parents=True)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", str(home))
    assert str(old) in _pyacl_search_path()
