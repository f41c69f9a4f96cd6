"""model_store.diagnostics: each check against crafted contexts (no Ascend host, no Django).

CANN, ldd, npu-smi and /dev are faked at the context's seams: a fake toolkit tree under
tmp_path (tests/fakes/cann.py), a ``run`` function that plays ldd, npu-smi tables from the
documented layouts (tests/unit/npu_smi) and a temporary ``dev_dir``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from model_store.devices import read_devices
from model_store.diagnostics.cann_checks import check_atc, check_cann_env
from model_store.diagnostics.checklist import CHECKS, run_checks, summarize, summary_line
from model_store.diagnostics.context import STATES, Check, DiagnosticsContext, run_bounded
from model_store.diagnostics.device_checks import check_davinci_devices, check_npu_smi
from model_store.diagnostics.ge_backend_checks import check_npu_ge_backend
from model_store.diagnostics.triton_checks import (
    check_load_failures,
    check_stuck_loading,
    check_triton_access,
    check_triton_reachable,
)
from model_store.diagnostics.triton_log import GE_LOG_PHRASES, classify_ge_message, read_log_tail
from model_store.runtime.errors import TritonAccessDenied, TritonUnavailable
from tests.fakes.cann import FAKE_CANN_VERSION, make_fake_toolkit

SAMPLES = Path(__file__).parent / "npu_smi"
NO_NPU: dict[str, Any] = {
    "available": False,
    "reason": "no Ascend NPU on this host (npu-smi not found)",
    "npus": [],
}


def _nothing(_: str) -> str | None:
    return None


def _no_run(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError(f"nothing should be run here: {args}")


def bare_context(tmp_path: Path, **overrides: Any) -> DiagnosticsContext:
    """A host with nothing Ascend on it and no Triton configured."""
    dev = tmp_path / "dev"
    dev.mkdir(exist_ok=True)
    values: dict[str, Any] = {
        "env": {"PATH": str(tmp_path / "empty-bin")},
        "which": _nothing,
        "run": _no_run,
        "dev_dir": dev,
        "ascend_root": tmp_path / "no-ascend",
        "devices": NO_NPU,
    }
    values.update(overrides)
    return DiagnosticsContext(**values)


def npu_report(text: str) -> dict[str, Any]:
    """What read_devices reports when npu-smi prints ``text``."""

    def runner(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 0, stdout=text, stderr="")

    return read_devices(runner=runner, which=lambda _: "/usr/local/bin/npu-smi")


def completed(stdout: str = "", code: int = 0, stderr: str = "") -> Callable[..., Any]:
    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, code, stdout=stdout, stderr=stderr)

    return run


def by_id(checks: list[Check]) -> dict[str, Check]:
    return {c.id: c for c in checks}


# --------------------------------------------------------------------------- no CANN at all


def test_a_host_without_cann_or_npus_gets_not_applicable_for_every_ascend_check(
    tmp_path: Path,
) -> None:
    checks = by_id(run_checks(bare_context(tmp_path)))
    for cid in ("cann_env", "atc", "npu_ge_backend", "davinci_devices", "npu_smi"):
        assert checks[cid].state == "not_applicable", checks[cid]
    assert checks["cann_env"].found == (
        "No CANN toolkit on this host; Ascend targets cannot compile or serve here. "
        "CPU (onnxruntime) models are unaffected."
    )
    assert str(checks["npu_smi"].found).startswith("No Ascend NPU on this host")
    assert checks["triton_reachable"].state == "not_applicable"


def test_every_check_runs_and_returns_a_known_state(tmp_path: Path) -> None:
    checks = run_checks(bare_context(tmp_path))
    assert [c.id for c in checks] == [cid for cid, _ in CHECKS]
    assert all(c.state in STATES and c.title and c.found for c in checks)
    assert all(c.advice == "" for c in checks if c.state == "ok")


# --------------------------------------------------------------------------- cann_env


@pytest.fixture
def toolkit(tmp_path: Path) -> Path:
    """A fake CANN install under tmp_path/Ascend; returns the toolkit home (…/latest)."""
    home = Path(make_fake_toolkit(tmp_path / "Ascend")["ASCEND_TOOLKIT_HOME"])
    (home.parent / "set_env.sh").write_text("# fake set_env.sh\n")
    return home


def test_cann_env_is_ok_when_set_as_set_env_sh_would(tmp_path: Path, toolkit: Path) -> None:
    env = {
        "ASCEND_TOOLKIT_HOME": str(toolkit),
        "ASCEND_HOME_PATH": str(toolkit),
        "ASCEND_OPP_PATH": str(toolkit / "opp"),
        "LD_LIBRARY_PATH": f"/opt/other:{toolkit}/lib64/",
    }
    check = check_cann_env(bare_context(tmp_path, env=env, ascend_root=tmp_path / "Ascend"))
    assert check.state == "ok", check
    assert str(toolkit) in check.found
    assert check.advice == ""


def test_cann_env_partly_set_warns_with_the_set_env_sh_to_source(
    tmp_path: Path, toolkit: Path
) -> None:
    env = {"ASCEND_TOOLKIT_HOME": str(toolkit)}
    check = check_cann_env(bare_context(tmp_path, env=env, ascend_root=tmp_path / "Ascend"))
    assert check.state == "warning"
    assert "ASCEND_HOME_PATH, ASCEND_OPP_PATH not set" in check.found
    assert f"LD_LIBRARY_PATH lacks {toolkit / 'lib64'}" in check.found
    assert f"`source {toolkit.parent / 'set_env.sh'}`" in check.advice


def test_cann_env_pointing_at_missing_paths_is_failing(tmp_path: Path) -> None:
    env = {
        "ASCEND_TOOLKIT_HOME": "/nowhere/latest",
        "ASCEND_HOME_PATH": "/nowhere/latest",
        "ASCEND_OPP_PATH": "/nowhere/latest/opp",
    }
    check = check_cann_env(bare_context(tmp_path, env=env))
    assert check.state == "failing"
    assert "ASCEND_OPP_PATH=/nowhere/latest/opp does not exist" in check.found
    assert "source " in check.advice


def test_cann_installed_but_not_sourced_is_failing(tmp_path: Path, toolkit: Path) -> None:
    check = check_cann_env(bare_context(tmp_path, ascend_root=tmp_path / "Ascend"))
    assert check.state == "failing"
    assert "environment is not set" in check.found
    assert f"`source {tmp_path / 'Ascend' / 'ascend-toolkit' / 'set_env.sh'}`" in check.advice


# --------------------------------------------------------------------------- atc


def test_atc_found_runs_and_reports_the_cann_version(tmp_path: Path) -> None:
    env = make_fake_toolkit(tmp_path / "Ascend")
    check = check_atc(bare_context(tmp_path, env=env, run=run_bounded))
    assert check.state == "ok", check
    assert env["ATC_PATH"] in check.found and FAKE_CANN_VERSION in check.found


def test_atc_missing_where_cann_is_present_is_failing(tmp_path: Path) -> None:
    empty_home = tmp_path / "toolkit"
    empty_home.mkdir()
    check = check_atc(bare_context(tmp_path, env={"ASCEND_TOOLKIT_HOME": str(empty_home)}))
    assert check.state == "failing"
    assert "holds no executable atc" in check.found
    assert "ATC_PATH" in check.advice


def test_atc_that_cannot_load_its_libraries_is_failing(tmp_path: Path) -> None:
    env = make_fake_toolkit(tmp_path / "Ascend")
    run = completed(
        stderr="atc.bin: error while loading shared libraries: libge_common.so: cannot open "
        "shared object file: No such file or directory",
        code=127,
    )
    check = check_atc(bare_context(tmp_path, env=env, run=run))
    assert check.state == "failing"
    assert "exit code 127" in check.found
    assert any("libge_common.so" in line for line in check.details)


def test_atc_that_hangs_is_a_warning_not_a_wait(tmp_path: Path) -> None:
    env = make_fake_toolkit(tmp_path / "Ascend")

    def hang(argv: list[str], **kwargs: Any) -> Any:
        raise subprocess.TimeoutExpired(argv, kwargs["timeout"])

    check = check_atc(bare_context(tmp_path, env=env, run=hang, timeout=0.5))
    assert check.state == "warning"
    assert "did not answer within 0.5 s" in check.found


# --------------------------------------------------------------------------- npu_ge_backend


def backend_dir(tmp_path: Path, name: str = "libtriton_npu_ge.so") -> Path:
    backends = tmp_path / "backends"
    (backends / "npu_ge").mkdir(parents=True)
    (backends / "npu_ge" / name).write_bytes(b"\x7fELF fake backend, not a real library")
    return backends


LDD_MISSING = """\
\tlinux-vdso.so.1 (0x00007ffd5a1f2000)
\tlibascendcl.so => not found
\tlibonnxruntime.so.1 => not found
\tlibtritonserver.so => /opt/tritonserver/lib/libtritonserver.so (0x00007f3a1c000000)
\tlibstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6 (0x00007f3a1bc00000)
"""


def test_backend_with_unresolved_libraries_is_failing_and_names_who_supplies_them(
    tmp_path: Path,
) -> None:
    calls: list[list[str]] = []

    def ldd(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, stdout=LDD_MISSING, stderr="")

    backends = backend_dir(tmp_path)
    ctx = bare_context(
        tmp_path,
        backends_dir=backends,
        which=lambda name: "/usr/bin/ldd" if name == "ldd" else None,
        run=ldd,
        devices=npu_report((SAMPLES / "910b.txt").read_text()),
    )
    check = check_npu_ge_backend(ctx)
    assert calls == [["/usr/bin/ldd", str(backends / "npu_ge" / "libtriton_npu_ge.so")]]
    assert check.state == "failing"
    assert "libascendcl.so, libonnxruntime.so.1" in check.found
    assert "set_env.sh" in check.advice and "/opt/onnxruntime/lib" in check.advice
    assert "\tlibascendcl.so => not found".strip() in check.details


def test_backend_whose_libraries_all_resolve_is_ok(tmp_path: Path) -> None:
    ok = LDD_MISSING.replace("=> not found", "=> /usr/local/lib/x.so (0x1)")
    ctx = bare_context(
        tmp_path,
        backends_dir=backend_dir(tmp_path),
        which=lambda name: "/usr/bin/ldd",
        run=completed(ok),
    )
    check = check_npu_ge_backend(ctx)
    assert check.state == "ok", check
    assert "all 4 libraries" in check.found


def test_missing_backend_is_not_applicable_without_npus_and_a_warning_with_them(
    tmp_path: Path,
) -> None:
    backends = tmp_path / "backends"
    backends.mkdir()
    without = check_npu_ge_backend(bare_context(tmp_path, backends_dir=backends))
    assert without.state == "not_applicable"
    assert "libtriton_npu_ge.so" in without.found
    with_npus = check_npu_ge_backend(
        bare_context(
            tmp_path,
            backends_dir=backends,
            devices=npu_report((SAMPLES / "310p3.txt").read_text()),
        )
    )
    assert with_npus.state == "warning"
    assert "TRITON_HOME_PATH" in with_npus.advice


def test_backend_under_the_readme_name_only_is_flagged(tmp_path: Path) -> None:
    check = check_npu_ge_backend(
        bare_context(tmp_path, backends_dir=backend_dir(tmp_path, "libnpu_ge.so"))
    )
    assert check.state == "warning"
    assert "libtriton_npu_ge.so" in check.found and "ln -s" in check.advice


# --------------------------------------------------------------------------- davinci_devices


def make_dev(tmp_path: Path, *names: str) -> Path:
    dev = tmp_path / "fake-dev"
    dev.mkdir()
    for name in names:
        (dev / name).touch()
    return dev


def test_all_device_nodes_present_is_ok(tmp_path: Path) -> None:
    dev = make_dev(
        tmp_path, "davinci0", "davinci1", "davinci_manager", "devmm_svm", "hisi_hdc", "tty0"
    )
    check = check_davinci_devices(bare_context(tmp_path, dev_dir=dev))
    assert check.state == "ok", check
    assert "2 NPU node(s) (davinci0, davinci1)" in check.found


def test_a_missing_control_node_is_failing_with_the_device_flag(tmp_path: Path) -> None:
    dev = make_dev(tmp_path, "davinci0", "davinci_manager", "devmm_svm")
    check = check_davinci_devices(bare_context(tmp_path, dev_dir=dev))
    assert check.state == "failing"
    assert "hisi_hdc missing" in check.found
    assert f"`--device {dev / 'hisi_hdc'}`" in check.advice


def test_npus_seen_by_npu_smi_but_no_device_nodes_is_failing(tmp_path: Path) -> None:
    ctx = bare_context(tmp_path, devices=npu_report((SAMPLES / "310p3.txt").read_text()))
    check = check_davinci_devices(ctx)
    assert check.state == "failing"
    assert "npu-smi lists 1 chip(s)" in check.found
    assert "--device" in check.advice


# --------------------------------------------------------------------------- npu_smi


def test_healthy_310p_is_ok(tmp_path: Path) -> None:
    ctx = bare_context(tmp_path, devices=npu_report((SAMPLES / "310p3.txt").read_text()))
    check = check_npu_smi(ctx)
    assert check.state == "ok", check
    assert "memory 4066 / 21534 MB (19 %)" in check.details[0]


def test_unhealthy_chip_and_hbm_at_95_percent(tmp_path: Path) -> None:
    text = (
        (SAMPLES / "910b.txt")
        .read_text()
        .replace("| OK            |", "| Critical      |")
        .replace("3318 / 65536", "62259 / 65536")
    )
    check = check_npu_smi(bare_context(tmp_path, devices=npu_report(text)))
    assert check.state == "failing"
    assert "NPU 0 chip 0 (910B3) reports Critical" in check.found
    assert "HBM near exhaustion" in check.found and "95 %" in check.found
    assert "restart Triton" in check.advice
    assert "HBM 62259 / 65536 MB (95 %)" in check.details[0]


def test_warning_health_and_full_hbm_on_two_chips_is_a_warning(tmp_path: Path) -> None:
    report = npu_report((SAMPLES / "910b_two_chips.txt").read_text())
    check = check_npu_smi(bare_context(tmp_path, devices=report))
    assert check.state == "warning"
    assert "NPU 7 chip 1 (910B1) reports Warning" in check.found
    assert "NPU 6 chip 0 (910B1) HBM 91 % used" in check.found


def test_npu_smi_that_fails_is_failing_with_its_reason(tmp_path: Path) -> None:
    report = read_devices(
        runner=completed(stderr="dcmi module initialize failed. ret is -8005", code=255),
        which=lambda _: "/usr/local/bin/npu-smi",
    )
    check = check_npu_smi(bare_context(tmp_path, devices=report))
    assert check.state == "failing"
    assert "exit code 255" in check.found and "-8005" in check.found
    assert "/usr/local/dcmi" in check.advice


def test_devices_default_to_running_npu_smi_through_the_context(tmp_path: Path) -> None:
    text = (SAMPLES / "310p3.txt").read_text()
    ctx = bare_context(
        tmp_path,
        devices=None,
        which=lambda name: "/usr/local/bin/npu-smi" if name == "npu-smi" else None,
        run=completed(text),
    )
    assert check_npu_smi(ctx).state == "ok"


# --------------------------------------------------------------------------- Triton


def triton_context(
    tmp_path: Path,
    *,
    live: bool = True,
    ready: bool = True,
    index: list[dict[str, str]] | Callable[[], list[dict[str, str]]] | None = None,
    log: str | None = None,
) -> DiagnosticsContext:
    log_path = None
    if log is not None:
        log_path = tmp_path / "triton.log"
        log_path.write_text(log)
    return bare_context(
        tmp_path,
        triton_url="triton.example:8000",
        is_live=lambda: live,
        is_ready=lambda: ready,
        repository_index=index if callable(index) else lambda: list(index or []),
        triton_log_path=log_path,
    )


def test_unreachable_triton_is_failing_with_its_url_and_what_to_do(tmp_path: Path) -> None:
    check = check_triton_reachable(triton_context(tmp_path, live=False))
    assert check.state == "failing"
    assert "http://triton.example:8000" in check.found
    assert "TRITON_URL" in check.advice and "make run" in check.advice


def test_live_but_not_ready_is_a_warning(tmp_path: Path) -> None:
    assert check_triton_reachable(triton_context(tmp_path, ready=False)).state == "warning"


def test_live_and_ready_is_ok(tmp_path: Path) -> None:
    check = check_triton_reachable(triton_context(tmp_path))
    assert check.state == "ok" and check.advice == ""


# --------------------------------------------------------------------------- triton_access

REFUSED = TritonAccessDenied("refused", triton_message="This API is restricted")


def access_context(
    tmp_path: Path,
    *,
    hub: Exception | None = None,
    http: Exception | None = REFUSED,
    grpc: Exception | None = REFUSED,
    key_set: bool = True,
    grpc_url: str = "triton.example:8001",
) -> DiagnosticsContext:
    """Triton live; the hub's keyed index raises ``hub`` (or answers); each keyless probe
    raises its exception (or answers, i.e. the port is open)."""

    def keyed() -> list[dict[str, str]]:
        if hub is not None:
            raise hub
        return []

    def keyless(protocol: str) -> list[dict[str, str]]:
        outcome = {"http": http, "grpc": grpc}[protocol]
        if outcome is not None:
            raise outcome
        return []

    ctx = triton_context(tmp_path, index=keyed)
    ctx.repository_index_without_key = keyless
    ctx.api_key_set = key_set
    ctx.grpc_url = grpc_url
    return ctx


def test_access_is_ok_when_both_ports_refuse_strangers_and_accept_the_hub(
    tmp_path: Path,
) -> None:
    check = check_triton_access(access_context(tmp_path))
    assert check.state == "ok" and check.advice == ""
    assert "HTTP (triton.example:8000) and gRPC (triton.example:8001)" in check.found


def test_an_open_repository_api_is_a_warning_naming_the_options(tmp_path: Path) -> None:
    check = check_triton_access(access_context(tmp_path, http=None, grpc=None, key_set=False))
    assert check.state == "warning"
    assert str(check.found).startswith(
        "Triton's repository API is open to anyone who can reach it: without any key, "
        "HTTP (triton.example:8000) and gRPC (triton.example:8001) answered"
    )
    setting = "model-repository,trace,logging:triton-hub-key=<key>"
    assert f"`--http-restricted-api={setting}`" in check.advice
    assert f"`--grpc-restricted-protocol={setting}`" in check.advice
    assert "TRITON_API_KEY" in check.advice and "too old" in check.advice


def test_one_open_port_is_named_alone(tmp_path: Path) -> None:
    check = check_triton_access(access_context(tmp_path, grpc=None))
    assert check.state == "warning"
    assert "gRPC (triton.example:8001) answered" in check.found and "HTTP" not in check.found
    assert "does not check the hub's TRITON_API_KEY" in check.found


def test_a_refused_hub_key_is_failing_and_says_it_does_not_match(tmp_path: Path) -> None:
    check = check_triton_access(access_context(tmp_path, hub=REFUSED))
    assert check.state == "failing"
    assert "the hub's TRITON_API_KEY does not match" in check.found
    assert "TRITON_API_KEY_FILE" in check.advice and "restart" in check.advice


def test_a_restricted_triton_and_no_hub_key_is_failing(tmp_path: Path) -> None:
    check = check_triton_access(access_context(tmp_path, hub=REFUSED, key_set=False))
    assert check.state == "failing"
    assert "the hub has no TRITON_API_KEY" in check.found


def test_a_port_that_cannot_be_asked_is_a_warning(tmp_path: Path) -> None:
    down = TritonUnavailable("cannot reach Triton at triton.example:8001")
    check = check_triton_access(access_context(tmp_path, grpc=down))
    assert check.state == "warning"
    assert check.details == [
        "gRPC (triton.example:8001) could not be asked: cannot reach Triton at triton.example:8001"
    ]


def test_without_a_grpc_address_only_http_is_asked(tmp_path: Path) -> None:
    check = check_triton_access(access_context(tmp_path, grpc=None, grpc_url=""))
    assert check.state == "ok" and "gRPC" not in check.found


def test_access_is_not_applicable_without_a_reachable_triton(tmp_path: Path) -> None:
    assert check_triton_access(bare_context(tmp_path)).state == "not_applicable"
    down = access_context(tmp_path)
    down.is_live = lambda: False
    assert check_triton_access(down).state == "not_applicable"
    broken = access_context(tmp_path, hub=ConnectionError("reset"))
    assert check_triton_access(broken).state == "not_applicable"


def row(name: str, state: str, reason: str = "", version: str = "1") -> dict[str, str]:
    return {"name": name, "version": version, "state": state, "reason": reason}


START = "# 2026-03-04 05:06:07 $ /opt/tritonserver/bin/tritonserver --model-repository=/m\n"


def test_loading_models_are_a_warning(tmp_path: Path) -> None:
    ctx = triton_context(tmp_path, index=[row("resnet", "LOADING"), row("bert", "READY")])
    check = check_stuck_loading(ctx)
    assert check.state == "warning"
    assert "resnet v1" in check.found and "bert" not in check.found


def test_loading_after_a_ge_init_failure_is_failing_restart_triton(tmp_path: Path) -> None:
    log = START + "E0304 model_state.cc:88] session_->CompileGraph failed, ret is: 1343225857\n"
    ctx = triton_context(tmp_path, index=[row("clip", "LOADING")], log=log)
    check = check_stuck_loading(ctx)
    assert check.state == "failing"
    assert "can hang later loads" in check.found
    assert "Restart Triton" in check.advice
    assert any("CompileGraph failed" in line for line in check.details)


def test_no_loading_model_is_ok(tmp_path: Path) -> None:
    assert check_stuck_loading(triton_context(tmp_path, index=[row("a", "READY")])).state == "ok"


def test_failed_loads_are_classified_with_advice_per_kind(tmp_path: Path) -> None:
    index = [
        row(
            "parsey",
            "UNAVAILABLE",
            "Failed to create model state: Model file not found: dir path /models/parsey",
        ),
        row("compiley", "UNAVAILABLE", "init instance error, please check log for more info."),
        row("ort", "UNAVAILABLE", "failed to load 'ort': onnxruntime error"),
        row("gone", "UNAVAILABLE", "unloaded"),
        row("fine", "READY"),
    ]
    check = check_load_failures(triton_context(tmp_path, index=index))
    assert check.state == "failing"
    assert "3 model(s) failed to load: parsey (parse), compiley (compile), ort (other)" in (
        check.found
    )
    assert "input/output names" in check.advice
    assert "ASCEND_SLOG_PRINT_TO_STDOUT=1 ASCEND_GLOBAL_LOG_LEVEL=1" in check.advice
    assert not any("gone" in line for line in check.details)


def test_ge_errors_in_the_log_alone_are_a_warning(tmp_path: Path) -> None:
    log = (
        "E0101 old run: session_->LoadGraph failed, ret is: 1\n"
        + START
        + "I0304 model_state.cc:10] find onnx path: /m/a/1/model.onnx\n"
        + "E0304 inference.cc:200] execute model failed, ret is: 507011\n"
    )
    check = check_load_failures(triton_context(tmp_path, index=[row("a", "READY")], log=log))
    assert check.state == "warning"
    assert "1 GE error line(s) since it started (execute)" in check.found
    assert check.details == [
        "log [execute]: E0304 inference.cc:200] execute model failed, ret is: 507011"
    ]
    assert "request shapes" in check.advice


def test_load_failures_are_ok_when_nothing_failed(tmp_path: Path) -> None:
    check = check_load_failures(triton_context(tmp_path, index=[row("a", "READY")], log=START))
    assert check.state == "ok"


def test_unreadable_index_makes_the_model_checks_not_applicable(tmp_path: Path) -> None:
    def broken() -> list[dict[str, str]]:
        raise ConnectionError("connection reset")

    checks = by_id(run_checks(triton_context(tmp_path, index=broken)))
    assert checks["stuck_loading"].state == "not_applicable"
    assert "connection reset" in checks["load_failures"].found


def test_triton_is_asked_once_per_run(tmp_path: Path) -> None:
    calls = {"live": 0, "index": 0}

    def live() -> bool:
        calls["live"] += 1
        return True

    def index() -> list[dict[str, str]]:
        calls["index"] += 1
        return [row("a", "READY")]

    ctx = bare_context(tmp_path, is_live=live, is_ready=lambda: True, repository_index=index)
    run_checks(ctx)
    assert calls == {"live": 1, "index": 1}


# --------------------------------------------------------------------------- GE phrases, log


@pytest.mark.parametrize(("phrase", "kind"), GE_LOG_PHRASES)
def test_every_documented_phrase_classifies_to_its_kind(phrase: str, kind: str) -> None:
    assert classify_ge_message(f"E0101 12:00:00 src.cc:1] {phrase}42") == kind


def test_specific_phrases_win_over_the_generic_wrappers() -> None:
    text = "Failed to create model state: aclInit failed, ret is: 507033"
    assert classify_ge_message(text) == "device"
    assert classify_ge_message("model 'x' is not found") is None


def test_log_tail_reads_only_the_end_and_only_the_current_run(tmp_path: Path) -> None:
    log = tmp_path / "t.log"
    log.write_text("x" * 5000 + "\n" + START + "line one\nline two\n")
    assert read_log_tail(log) == ["line one", "line two"]
    assert read_log_tail(log, max_bytes=12) == ["line two"]  # first partial line dropped
    assert read_log_tail(tmp_path / "missing.log") == []


# --------------------------------------------------------------------------- run_checks


def test_a_check_that_raises_becomes_failing_and_the_others_still_run(tmp_path: Path) -> None:
    def boom(ctx: DiagnosticsContext) -> Check:
        raise RuntimeError("kaboom")

    checks = run_checks(bare_context(tmp_path), [("atc", boom), *CHECKS[:1]])
    assert checks[0].id == "atc" and checks[0].state == "failing"
    assert checks[0].found == "the check itself failed: RuntimeError: kaboom"
    assert checks[1].id == "cann_env" and checks[1].state == "not_applicable"


def test_a_devices_callable_that_raises_does_not_crash_the_run(tmp_path: Path) -> None:
    def broken() -> Mapping[str, Any]:
        raise OSError("npu-smi vanished")

    checks = by_id(run_checks(bare_context(tmp_path, devices=broken)))
    assert checks["npu_smi"].state == "failing"
    assert "npu-smi vanished" in checks["npu_smi"].found
    assert checks["davinci_devices"].state == "not_applicable"


def test_summary_counts_every_state_and_reads_as_a_sentence() -> None:
    checks = [
        Check("a", "A", "ok", "fine"),
        Check("b", "B", "ok", "fine"),
        Check("c", "C", "not_applicable", "n/a"),
        Check("d", "D", "failing", "bad", "fix it"),
    ]
    assert summarize(checks) == {"ok": 2, "warning": 0, "failing": 1, "not_applicable": 1}
    assert summary_line(checks) == "4 checks: 2 ok, 1 failing, 1 not applicable"
    assert checks[3].to_dict() == {
        "id": "d",
        "title": "D",
        "state": "failing",
        "found": "bad",
        "advice": "fix it",
        "details": [],
    }
