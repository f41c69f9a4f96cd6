"""ATC's Python (ATC_PYTHON, the hub's virtualenv kept off ATC's PATH) and CANN's two layouts.

ATC runs the first ``python3`` on its PATH and needs CANN's packages there; CANN 8.5 installs
into ``<root>/cann``, older releases into ``<root>/ascend-toolkit/latest`` (docs/atc.md,
docs/cann.md). The toolkits here are folders under tmp_path; the interpreter checks run
either a crafted ``run`` or the test's own interpreter.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from model_store.compile.atc.environment import (
    AtcUnavailable,
    CannStatus,
    atc_environment,
    cann_layout,
    cann_status,
    default_toolkit_homes,
    hub_python_dirs,
)
from model_store.compile.atc.python import (
    ATC_PYTHON_PACKAGES,
    PROBE_SCRIPT,
    assess_probe,
    parse_probe,
)
from model_store.diagnostics.cann_checks import check_atc_python, check_cann_env
from model_store.diagnostics.context import DiagnosticsContext, run_bounded
from tests.fakes.cann import make_fake_toolkit

STATUS = CannStatus(True, "/opt/cann/bin/atc", None, None, "")


def _executable(path: Path, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def _cann_85(root: Path, *, ops: str | None = "8.5.0") -> Path:
    """A toolkit in the CANN 8.5 layout: ``<root>/cann`` with set_env.sh and version files."""
    home = root / "cann"
    _executable(home / "bin" / "atc")
    (home / "set_env.sh").write_text("export ASCEND_TOOLKIT_HOME=" + str(home) + "\n")
    arch = home / f"{platform.machine()}-linux"
    arch.mkdir(parents=True)
    (arch / "ascend_toolkit_install.info").write_text("package_name=cann-toolkit\nversion=8.5.0\n")
    if ops is not None:
        (arch / "ascend_ops_install.info").write_text(f"version={ops}\n")
    return home


# --------------------------------------------------------------------------- ATC's PATH


def test_the_hubs_virtualenv_is_kept_off_atcs_path(tmp_path: Path) -> None:
    venv = tmp_path / "hub-venv"
    base = {"PATH": f"{venv}/bin{os.pathsep}/usr/bin", "VIRTUAL_ENV": str(venv)}
    lines: list[str] = []
    env = atc_environment(STATUS, base, log=lines.append)
    assert env["PATH"].split(os.pathsep) == ["/opt/cann/bin", "/usr/bin"]
    assert "VIRTUAL_ENV" not in env
    assert str(venv / "bin") in hub_python_dirs(base)
    (line,) = lines
    assert "ATC_PYTHON is not set" in line and f"{venv}/bin" in line


def test_this_processs_virtualenv_counts_as_the_hubs() -> None:
    if sys.prefix == sys.base_prefix:
        pytest.skip("the tests do not run from a virtualenv here")
    ours = str(Path(sys.prefix) / "bin")
    env = atc_environment(STATUS, {"PATH": f"{ours}{os.pathsep}/bin"})
    assert ours not in env["PATH"].split(os.pathsep)


def test_without_atc_python_the_log_names_the_python3_atc_will_find(tmp_path: Path) -> None:
    python3 = _executable(tmp_path / "sys-bin" / "python3")
    lines: list[str] = []
    atc_environment(STATUS, {"PATH": str(python3.parent)}, log=lines.append)
    assert f"ATC will use {python3}, the first python3 on its PATH" in lines[0]
    lines.clear()
    atc_environment(STATUS, {"PATH": str(tmp_path / "nothing")}, log=lines.append)
    assert "no python3 is on ATC's PATH, so ATC will fail with E40001" in lines[0]


def test_atc_python_comes_first_even_when_it_is_in_a_virtualenv(tmp_path: Path) -> None:
    python3 = _executable(tmp_path / "cann-env" / "bin" / "python3")
    env = atc_environment(STATUS, {"PATH": "/usr/bin", "ATC_PYTHON": str(python3)})
    assert env["PATH"].split(os.pathsep) == [str(python3.parent), "/opt/cann/bin", "/usr/bin"]
    assert env["ATC_PYTHON"] == str(python3)


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda tmp: "bin/python3", "not an absolute path"),
        (lambda tmp: str(tmp / "missing" / "python3"), "not an executable file"),
        (
            lambda tmp: str(_executable(tmp / "only" / "python3.10")),
            "has no python3",
        ),
    ],
)
def test_an_unusable_atc_python_is_refused_with_the_reason(
    tmp_path: Path, make: Any, expected: str
) -> None:
    with pytest.raises(AtcUnavailable, match=expected):
        atc_environment(STATUS, {"PATH": "/usr/bin", "ATC_PYTHON": make(tmp_path)})


# --------------------------------------------------------------------------- CANN layouts


def test_the_85_layout_is_found_by_default_with_its_versions(tmp_path: Path) -> None:
    home = _cann_85(tmp_path / "Ascend")
    status = cann_status({"PATH": ""}, default_homes=default_toolkit_homes(tmp_path / "Ascend"))
    assert status.available and status.atc_path == str(home / "bin" / "atc")
    assert (status.layout, status.version, status.ops_version) == ("cann", "8.5.0", "8.5.0")
    assert status.set_env == str(home / "set_env.sh")
    assert "default install" in status.reason


def test_the_older_layout_is_found_by_default_and_named(tmp_path: Path) -> None:
    make_fake_toolkit(tmp_path / "Ascend")
    status = cann_status({"PATH": ""}, default_homes=default_toolkit_homes(tmp_path / "Ascend"))
    assert status.available and status.layout == "ascend-toolkit"
    assert status.toolkit_home == str(tmp_path / "Ascend" / "ascend-toolkit" / "latest")
    assert status.ops_version is None


def test_the_configured_root_may_be_the_install_root_of_either_layout(tmp_path: Path) -> None:
    home = _cann_85(tmp_path / "new")
    make_fake_toolkit(tmp_path / "old")
    new = cann_status({"ASCEND_TOOLKIT_HOME": str(tmp_path / "new"), "PATH": ""}, [])
    assert new.toolkit_home == str(home) and new.layout == "cann"
    old = cann_status({"ASCEND_HOME_PATH": str(tmp_path / "old"), "PATH": ""}, [])
    assert old.layout == "ascend-toolkit" and old.version is not None


def test_default_homes_cover_both_layouts_and_a_non_root_install() -> None:
    assert default_toolkit_homes("/usr/local/Ascend", "/home/ai") == [
        Path("/usr/local/Ascend/cann"),
        Path("/usr/local/Ascend/ascend-toolkit/latest"),
        Path("/home/ai/Ascend/cann"),
        Path("/home/ai/Ascend/ascend-toolkit/latest"),
    ]
    assert cann_layout("/somewhere/else") == (None, None)


def test_nothing_found_names_both_layouts(tmp_path: Path) -> None:
    status = cann_status({"PATH": str(tmp_path)}, default_homes=[])
    assert "/usr/local/Ascend/cann" in status.reason
    assert "/usr/local/Ascend/ascend-toolkit/latest" in status.reason


# --------------------------------------------------------------------------- the probe


def _report(**changes: Any) -> dict[str, Any]:
    report: dict[str, Any] = {
        "version": [3, 10, 14],
        "executable": "/opt/cann-py/bin/python3",
        "packages": {dist: {"ok": True, "version": "1.0"} for dist, _ in ATC_PYTHON_PACKAGES},
        "libpython": {"name": "libpython3.10.so.1.0", "loaded": "/opt/cann-py/lib/x.so"},
    }
    report["packages"]["numpy"] = {"ok": True, "version": "1.23.5"}
    report["packages"]["protobuf"] = {"ok": True, "version": "3.20.3"}
    report.update(changes)
    return report


def test_a_conformant_interpreter_is_ok() -> None:
    verdict = assess_probe(_report(), "8.0.RC3", "ATC_PYTHON")
    assert verdict.state == "ok", verdict
    assert "/opt/cann-py/bin/python3 (ATC_PYTHON), Python 3.10.14" in verdict.summary
    assert "numpy 1.23.5" in verdict.details


def test_missing_packages_and_old_pythons_fail_with_atcs_codes() -> None:
    report = _report()
    report["packages"]["sympy"] = {"ok": False, "error": "ModuleNotFoundError: sympy"}
    verdict = assess_probe(report, None, "PATH")
    assert verdict.state == "failing" and "sympy" in verdict.summary and "E40020" in verdict.summary
    assert "ATC_PYTHON" in verdict.advice
    old = assess_probe(_report(version=[3, 6, 9]), None, "PATH")
    assert old.state == "failing" and "E40002" in old.summary
    static = assess_probe(_report(libpython={"name": "libpython3.10.so.1.0"}), None, "PATH")
    assert static.state == "failing" and "E40001" in static.summary


def test_versions_outside_the_documented_pins_are_warnings() -> None:
    report = _report()
    report["packages"]["protobuf"] = {"ok": True, "version": "6.33.6"}
    verdict = assess_probe(report, "8.5.0", "PATH")
    assert verdict.state == "warning" and "protobuf 6.33.6" in verdict.summary
    report = _report()
    report["packages"]["numpy"] = {"ok": True, "version": "1.26.4"}
    assert "CANN 8.0 documents numpy" in assess_probe(report, "8.0.0", "PATH").summary
    assert assess_probe(report, "9.0.0", "PATH").state == "ok"
    newer = assess_probe(_report(version=[3, 12, 1]), "8.0.0", "PATH")
    assert newer.state == "warning" and "3.7 to 3.11" in newer.summary


def test_the_probe_runs_in_a_real_interpreter_and_is_read_back() -> None:
    done = run_bounded([sys.executable, "-c", PROBE_SCRIPT], timeout=120)
    report = parse_probe(done.stdout)
    assert report is not None
    assert report["version"][:2] == list(sys.version_info[:2])
    assert set(report["packages"]) == {dist for dist, _ in ATC_PYTHON_PACKAGES}
    assert report["packages"]["numpy"]["ok"] is True
    assert parse_probe("noise\nATC-PYTHON-PROBE {not json") is None


# --------------------------------------------------------------------------- diagnostics


def _context(tmp_path: Path, env: dict[str, str], **overrides: Any) -> DiagnosticsContext:
    values: dict[str, Any] = {
        "env": env,
        "which": lambda _: None,
        "dev_dir": tmp_path / "dev",
        "ascend_root": tmp_path / "no-ascend",
        "devices": {"available": False, "reason": "none", "npus": []},
    }
    values.update(overrides)
    return DiagnosticsContext(**values)


def _answering(report: dict[str, Any], seen: list[Any]) -> Any:
    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        seen.append((argv, kwargs))
        out = "ATC-PYTHON-PROBE " + json.dumps(report) + "\n"
        return subprocess.CompletedProcess(argv, 0, stdout=out, stderr="")

    return run


def test_no_cann_and_no_atc_python_is_not_applicable(tmp_path: Path) -> None:
    check = check_atc_python(_context(tmp_path, {"PATH": str(tmp_path)}))
    assert check.state == "not_applicable"


def test_the_check_runs_atc_python_with_atcs_environment(tmp_path: Path) -> None:
    python3 = _executable(tmp_path / "cann-py" / "bin" / "python3")
    env = {**make_fake_toolkit(tmp_path / "Ascend"), "PATH": "/usr/bin", "ATC_PYTHON": str(python3)}
    seen: list[Any] = []
    check = check_atc_python(_context(tmp_path, env, run=_answering(_report(), seen)))
    assert check.state == "ok", check
    ((argv, kwargs),) = seen
    assert argv[:2] == [str(python3), "-c"]
    assert kwargs["env"]["PATH"].split(os.pathsep)[0] == str(python3.parent)
    assert kwargs["timeout"] > 5
    assert "(ATC_PYTHON)" in check.found


def test_without_atc_python_the_check_runs_the_python3_atc_would_find(tmp_path: Path) -> None:
    python3 = _executable(tmp_path / "sys-bin" / "python3")
    env = {**make_fake_toolkit(tmp_path / "Ascend"), "PATH": str(python3.parent)}
    seen: list[Any] = []
    report = _report()
    report["packages"]["scipy"] = {"ok": False, "error": "ModuleNotFoundError: scipy"}
    check = check_atc_python(_context(tmp_path, env, run=_answering(report, seen)))
    assert seen[0][0][0] == str(python3)
    assert check.state == "failing" and "scipy" in check.found
    assert "ATC_PYTHON is not set" in check.found and "ATC_PYTHON" in check.advice


def test_no_python_for_atc_and_a_broken_setting_are_failing(tmp_path: Path) -> None:
    toolkit = make_fake_toolkit(tmp_path / "Ascend")
    check = check_atc_python(_context(tmp_path, {**toolkit, "PATH": str(tmp_path / "none")}))
    assert check.state == "failing" and "E40001" in check.found
    broken = {**toolkit, "PATH": "/usr/bin", "ATC_PYTHON": str(tmp_path / "nope" / "python3")}
    check = check_atc_python(_context(tmp_path, broken))
    assert check.state == "failing" and "not an executable file" in check.found


def test_an_interpreter_that_hangs_is_reported_not_waited_for(tmp_path: Path) -> None:
    python3 = _executable(tmp_path / "cann-py" / "bin" / "python3", "#!/bin/sh\nexec sleep 30\n")
    env = {
        **make_fake_toolkit(tmp_path / "Ascend"),
        "PATH": f"/usr/bin{os.pathsep}/bin",
        "ATC_PYTHON": str(python3),
    }
    check = check_atc_python(_context(tmp_path, env, run=run_bounded, timeout=0.1))
    assert check.state == "failing" and "did not answer" in check.found


def test_the_real_interpreter_is_judged_end_to_end(tmp_path: Path) -> None:
    python3 = Path(sys.executable).parent / "python3"
    if not python3.exists():
        pytest.skip("no python3 beside the test interpreter")
    env = {**make_fake_toolkit(tmp_path / "Ascend"), "PATH": "/usr/bin", "ATC_PYTHON": str(python3)}
    check = check_atc_python(_context(tmp_path, env, run=run_bounded))
    assert check.state in ("ok", "warning", "failing")
    assert any(line.startswith("numpy ") for line in check.details), check.details


def test_cann_env_names_the_layout_and_warns_about_a_missing_ops_package(tmp_path: Path) -> None:
    home = _cann_85(tmp_path / "Ascend", ops=None)
    env = {
        "ASCEND_TOOLKIT_HOME": str(home),
        "ASCEND_HOME_PATH": str(home),
        "ASCEND_OPP_PATH": str(home),
        "LD_LIBRARY_PATH": str(home / "lib64"),
        "PATH": "",
    }
    check = check_cann_env(_context(tmp_path, env, ascend_root=tmp_path / "Ascend"))
    assert check.state == "warning" and "no ops package" in check.found
    assert any("CANN 8.5+ layout" in line for line in check.details)
    (home / f"{platform.machine()}-linux" / "ascend_ops_install.info").write_text("version=8.5.0\n")
    check = check_cann_env(_context(tmp_path, env, ascend_root=tmp_path / "Ascend"))
    assert check.state == "ok" and "CANN 8.5.0" in check.found and "8.5+ layout" in check.found


def test_a_release_before_8_0_is_not_judged_by_the_newer_releases_range() -> None:
    """Ascend 310 hosts run CANN releases before 8.0, whose Python range the hub does not read:
    it says so rather than passing Python 3.11 as documented (review B5)."""
    verdict = assess_probe(_report(), "6.3.RC2", "PATH")
    assert verdict.state == "warning"
    assert any("older than the releases whose Python range" in w for w in verdict.problems)


def test_libpython_is_found_the_way_atc_finds_it() -> None:
    """ATC asks the python3-config first on its PATH for the prefix (hicann/ge py_decouple.cc);
    the probe does the same and says which it found."""
    report = _report()
    report["libpython"] |= {"python3_config": "/usr/bin/python3-config", "prefix": "/usr"}
    assert any("python3-config on ATC's PATH: /usr/bin/python3-config (prefix /usr)" in line
               for line in assess_probe(report, "8.0.RC3", "PATH").details)  # fmt: skip
    report["libpython"] |= {"python3_config": None, "prefix": None}
    assert any("loads libpython by its soname" in line
               for line in assess_probe(report, "8.0.RC3", "PATH").details)  # fmt: skip
