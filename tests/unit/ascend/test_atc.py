"""The ATC runner: finding CANN, options, the command line, log reading, running the fake atc.

The fake atc (tests/fakes/atc) stands in for the real compiler; it follows the
flags, phrases and codes written up in docs/atc.md.
"""

from __future__ import annotations

import os
import shlex
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from model_store.compile.atc.environment import (
    AtcUnavailable,
    CannStatus,
    atc_environment,
    cann_status,
    require_atc,
)
from model_store.compile.atc.messages import EXPLANATIONS, explain, parse_atc_line
from model_store.compile.atc.options import (
    AtcOptions,
    InvalidAtcOptions,
    build_atc_command,
    format_command,
    gear_problems,
    parse_gears,
)
from model_store.compile.atc.running import AtcFailed, AtcResult, run_atc
from model_store.text import from_json
from tests.fakes.cann import FAKE_CANN_VERSION, fake_cann, make_fake_toolkit
from tests.fixtures.triton import mlp_onnx_bytes

__all__ = ["fake_cann"]  # the fixture is used by name below

ATC = "/opt/cann/bin/atc"


def _options(**kwargs: Any) -> AtcOptions:
    kwargs.setdefault("soc_version", "Ascend310P3")
    return AtcOptions(**kwargs)


# --------------------------------------------------------------------------- command line


def test_it_builds_the_documented_command() -> None:
    argv = build_atc_command(ATC, Path("/m/model.onnx"), Path("/out/model"), _options())
    assert argv == [
        ATC,
        "--model=/m/model.onnx",
        "--framework=5",
        "--output=/out/model",
        "--soc_version=Ascend310P3",
        "--log=error",
    ]


def test_it_passes_every_option_with_atc_spellings_in_a_fixed_order() -> None:
    options = _options(
        input_shape="x:-1,3,224,224",
        input_format="NCHW",
        precision_mode_v2="origin",
        dynamic_batch_size=[1, 2, 4, 8],
        out_nodes="logits",
        op_select_implmode="high_precision",
        log="info",
        extra={"output_type": "FP32", "input_fp16_nodes": "x"},
    )
    argv = build_atc_command(ATC, Path("m.onnx"), Path("out/m"), options)
    assert argv[5:] == [
        "--input_format=NCHW",
        "--input_shape=x:-1,3,224,224",
        "--dynamic_batch_size=1,2,4,8",
        "--precision_mode_v2=origin",
        "--out_nodes=logits",
        "--op_select_implmode=high_precision",
        "--log=info",
        "--input_fp16_nodes=x",
        "--output_type=FP32",
    ]


def test_it_refuses_an_output_stem_ending_in_om() -> None:
    with pytest.raises(InvalidAtcOptions, match=r"ATC appends \.om"):
        build_atc_command(ATC, Path("m.onnx"), Path("out/m.om"), _options())


def test_it_refuses_to_build_a_command_from_invalid_options() -> None:
    with pytest.raises(InvalidAtcOptions, match="not an Ascend chip name") as info:
        build_atc_command(ATC, Path("m.onnx"), Path("out/m"), AtcOptions(soc_version="GTX1080"))
    assert info.value.code == "invalid_atc_options"


def test_format_command_quotes_what_the_shell_would_split() -> None:
    argv = build_atc_command(
        "/opt/my cann/atc", Path("/data/my model.onnx"), Path("/out/m"), _options()
    )
    line = format_command(argv)
    assert "'/opt/my cann/atc'" in line
    assert "'--model=/data/my model.onnx'" in line
    assert shlex.split(line) == argv


def test_input_shape_with_semicolons_survives_the_copyable_line() -> None:
    argv = build_atc_command(ATC, Path("m.onnx"), Path("o/m"), _options(input_shape="a:1,3;b:1,5"))
    assert shlex.split(format_command(argv)) == argv
    assert "'--input_shape=a:1,3;b:1,5'" in format_command(argv)


# --------------------------------------------------------------------------- validation


def test_sane_options_have_no_problems() -> None:
    assert _options().validate() == []
    assert (
        _options(
            input_shape="input:0:-1,3,224,224", dynamic_batch_size=[1, 8], input_format="NCHW"
        ).validate()
        == []
    )
    for soc in ("Ascend310", "Ascend910B4", "Ascend910_9391", "Ascend310B1"):
        assert AtcOptions(soc_version=soc).validate() == []


@pytest.mark.parametrize("soc", ["Ascend", "ascend310P3", "Ascend31", "GTX1080", "Ascend310P3_"])
def test_it_refuses_soc_versions_that_are_not_chip_names(soc: str) -> None:
    assert any("not an Ascend chip name" in p for p in AtcOptions(soc_version=soc).validate())


def test_precision_mode_and_v2_are_exclusive() -> None:
    problems = _options(precision_mode="force_fp32", precision_mode_v2="origin").validate()
    assert any("both set" in p for p in problems)


def test_it_refuses_unknown_choices() -> None:
    problems = _options(
        precision_mode_v2="fp8", input_format="CHWN", log="verbose", op_select_implmode="fast"
    ).validate()
    text = " ".join(problems)
    for name in ("precision_mode_v2", "input_format", "log", "op_select_implmode"):
        assert name in text


def test_framework_other_than_onnx_is_refused() -> None:
    assert any("framework must be 5" in p for p in _options(framework=3).validate())


def test_dynamic_batch_needs_minus_one_in_the_batch_axis() -> None:
    assert any("needs input_shape" in p for p in _options(dynamic_batch_size=[1, 2]).validate())
    problems = _options(input_shape="x:1,3", dynamic_batch_size=[1, 2]).validate()
    assert any("-1 as the batch (first) dimension" in p for p in problems)
    problems = _options(input_shape="x:3,-1", dynamic_batch_size=[1, 2]).validate()
    assert any("has none" in p for p in problems)


@pytest.mark.parametrize(
    ("gears", "expected"),
    [
        ([4], "1 gear(s)"),
        ([0, 2], "positive"),
        ([-1, 2], "positive"),
        ([1, 1, 2], "twice"),
        ([1, 100_000], "at most"),
        (list(range(1, 102)), "101 gear(s)"),
    ],
)
def test_batch_gears_must_be_positive_unique_and_bounded(gears: list[int], expected: str) -> None:
    problems = _options(input_shape="x:-1,4", dynamic_batch_size=gears).validate()
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("input_shape", "x:1,3 --model=/etc/passwd", "whitespace"),
        ("input_shape", "x:1,3\n--log=debug", "control character"),
        ("soc_version", "Ascend310P3\n", "control character"),
        ("out_nodes", "y';rm -rf /;'", "whitespace"),
        ("out_nodes", "y'", "'"),
        ("out_nodes", 'y"', '"'),
        ("out_nodes", "$(reboot)", "$"),
        ("out_nodes", "`id`", "`"),
        ("input_shape", "x:1=--model=/etc/passwd", "="),
        ("out_nodes", "--model=/tmp/evil.onnx", "="),
        ("out_nodes", "--model", "starts with '-'"),
        ("soc_version", "", "empty"),
        ("input_shape", "x:1,2\x00", "control character"),
    ],
)
def test_it_refuses_values_that_try_to_smuggle_flags_or_shell(
    field: str, value: str, reason: str
) -> None:
    problems = _options(**{field: value}).validate()
    assert any(field in p and reason in p for p in problems), problems
    with pytest.raises(InvalidAtcOptions):
        build_atc_command(ATC, Path("m.onnx"), Path("o/m"), _options(**{field: value}))


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"model": "/etc/passwd"}, "its own field"),
        ({"output": "/tmp/x"}, "its own field"),
        ({"--mode": "1"}, "not a flag name"),
        ({"Mode": "1"}, "not a flag name"),
        ({"insert_op_conf": "a.cfg --model=x"}, "whitespace"),
        ({"insert_op_conf": "a=b"}, "="),
    ],
)
def test_extra_options_cannot_override_managed_flags_or_inject(
    extra: dict[str, str], reason: str
) -> None:
    problems = _options(extra=extra).validate()
    assert any(reason in p for p in problems), problems


def test_malformed_input_shapes_are_explained() -> None:
    for shape in ("x", ":1,2", "x:1,a", "x:1,,2", "x:1.5"):
        problems = _options(input_shape=shape).validate()
        assert any("malformed" in p for p in problems), (shape, problems)
    assert _options(input_shape="x:1~8,3").validate() == []


# --------------------------------------------------------------------------- log lines


@pytest.mark.parametrize(
    "code", ["E10001", "E10054", "E10007", "E19999", "E19010", "EZ3003", "E40000"]
)
def test_it_reads_error_codes_with_and_without_pid_and_timestamp(code: str) -> None:
    plain = parse_atc_line(f"{code}: Something went wrong.")
    assert plain is not None
    assert (plain.kind, plain.code, plain.text, plain.pid) == (
        "error",
        code,
        "Something went wrong.",
        None,
    )
    stamped = parse_atc_line(f"{code}: [PID: 4242] 2024-05-06-07:08:09.123.456 Value [x] invalid.")
    assert stamped is not None
    assert stamped.code == code
    assert stamped.pid == 4242
    assert stamped.timestamp == "2024-05-06-07:08:09.123.456"
    assert stamped.text == "Value [x] invalid."


def test_it_reads_warnings_and_unknown_codes_of_the_same_shape() -> None:
    warning = parse_atc_line("W11001: [PID: 1] Op [Cast] does not hit the high-priority library.")
    assert warning is not None
    assert (warning.kind, warning.code) == ("warning", "W11001")
    other = parse_atc_line("  EE1001: the argument is invalid")
    assert other is not None
    assert (other.kind, other.code) == ("error", "EE1001")


def test_it_reads_the_summary_phrases() -> None:
    success = parse_atc_line("ATC run success, welcome to the next use.")
    failure = parse_atc_line(
        "ATC run failed, Please check the detail log, Try 'atc --help' for more information"
    )
    start = parse_atc_line("ATC start working now, please wait for a moment.")
    assert success is not None and success.kind == "success"
    assert failure is not None and failure.kind == "failure"
    assert start is not None and start.kind == "start"
    assert success.code is None and success.explanation is None


@pytest.mark.parametrize(
    "line",
    [
        "",
        "   ",
        "[fake atc] step 1/4",
        "ERRORS: none",
        "ERROR: something",
        "E1000: short",
        "x E10001: y",
    ],
)
def test_other_lines_are_not_messages(line: str) -> None:
    assert parse_atc_line(line) is None


def test_every_known_code_has_an_explanation_with_advice() -> None:
    for code in ("E10001", "E10054", "E10007", "E19999", "E19010", "EZ3003", "E40000", "W11001"):
        assert code in EXPLANATIONS
        assert explain(code) == EXPLANATIONS[code]
    for code in ("E19010", "EZ3003"):
        assert "npu_ge" in EXPLANATIONS[code]
        assert "opset" in EXPLANATIONS[code]
    assert "set_env.sh" in EXPLANATIONS["E40000"]


def test_unknown_codes_get_a_generic_explanation() -> None:
    assert "E12345" in explain("E12345")
    assert "error code reference" in explain("E12345")
    assert "warning" in str(explain("W99999")).lower()
    message = parse_atc_line("E12345: new thing")
    assert message is not None and message.explanation == explain("E12345")
    assert from_json(message.as_dict()["explanation"]) == explain("E12345")


# --------------------------------------------------------------------------- finding CANN


def test_without_cann_the_reason_says_what_to_set(tmp_path: Path) -> None:
    status = cann_status({"PATH": str(tmp_path)})
    assert status == CannStatus(False, None, None, None, status.reason)
    assert "set ATC_PATH to the atc binary or ASCEND_TOOLKIT_HOME" in status.reason
    assert "/usr/local/Ascend/ascend-toolkit/latest" in status.reason
    with pytest.raises(AtcUnavailable, match="ATC_PATH") as info:
        require_atc({"PATH": str(tmp_path)})
    assert info.value.code == "cann_missing"


def test_atc_path_finds_the_fake_toolkit(fake_cann: dict[str, str]) -> None:
    status = cann_status({"ATC_PATH": fake_cann["ATC_PATH"], "PATH": ""})
    assert status.available
    assert status.atc_path == fake_cann["ATC_PATH"]
    assert status.toolkit_home == fake_cann["ASCEND_TOOLKIT_HOME"]
    assert status.version == FAKE_CANN_VERSION
    assert FAKE_CANN_VERSION in status.reason


def test_toolkit_home_and_its_parent_find_atc(fake_cann: dict[str, str]) -> None:
    home = fake_cann["ASCEND_TOOLKIT_HOME"]
    for value in (home, str(Path(home).parent)):  # .../latest or .../ascend-toolkit
        status = cann_status({"ASCEND_TOOLKIT_HOME": value, "PATH": ""})
        assert status.available, status.reason
        assert status.atc_path == fake_cann["ATC_PATH"]
        assert status.toolkit_home == home
        assert status.version == FAKE_CANN_VERSION


def test_atc_on_path_is_found_last(fake_cann: dict[str, str]) -> None:
    status = cann_status({"PATH": str(Path(fake_cann["ATC_PATH"]).parent)})
    assert status.available
    assert status.toolkit_home == fake_cann["ASCEND_TOOLKIT_HOME"]


def test_explicit_settings_that_point_at_nothing_are_reported(tmp_path: Path) -> None:
    status = cann_status({"ATC_PATH": str(tmp_path / "nope"), "PATH": ""})
    assert not status.available
    assert "ATC_PATH=" in status.reason and "does not exist" in status.reason
    status = cann_status({"ASCEND_TOOLKIT_HOME": str(tmp_path), "PATH": ""})
    assert not status.available
    assert f"ASCEND_TOOLKIT_HOME={tmp_path} holds no executable atc" in status.reason
    plain = tmp_path / "atc"
    plain.write_text("#!/bin/sh\n")
    status = cann_status({"ATC_PATH": str(plain), "PATH": ""})
    assert not status.available and "not executable" in status.reason


def test_a_toolkit_without_version_file_has_no_version(tmp_path: Path) -> None:
    env = make_fake_toolkit(tmp_path)
    for info in Path(env["ASCEND_TOOLKIT_HOME"]).glob("*-linux/*.info"):
        info.unlink()
    status = cann_status({"ATC_PATH": env["ATC_PATH"], "PATH": ""})
    assert status.available and status.version is None


def test_environment_follows_set_env_and_keeps_the_base(fake_cann: dict[str, str]) -> None:
    status = cann_status(fake_cann)
    home = fake_cann["ASCEND_TOOLKIT_HOME"]
    base = {
        "PATH": "/usr/bin:/bin",
        "LD_LIBRARY_PATH": "/opt/lib",
        "ASCEND_OPP_PATH": "/custom/opp",
    }
    env = atc_environment(status, base)
    assert env["ASCEND_TOOLKIT_HOME"] == home
    assert env["ASCEND_AICPU_PATH"] == home
    assert env["TOOLCHAIN_HOME"] == f"{home}/toolkit"
    assert env["ASCEND_OPP_PATH"] == "/custom/opp"  # the base wins for single values
    path = env["PATH"].split(os.pathsep)
    assert path[0] == str(Path(fake_cann["ATC_PATH"]).parent)
    assert path[-2:] == ["/usr/bin", "/bin"]
    assert len(path) == len(set(path))
    ld = env["LD_LIBRARY_PATH"].split(os.pathsep)
    assert f"{home}/lib64" in ld and ld[-1] == "/opt/lib"
    assert f"{home}/python/site-packages" in env["PYTHONPATH"].split(os.pathsep)
    assert base == {
        "PATH": "/usr/bin:/bin",
        "LD_LIBRARY_PATH": "/opt/lib",
        "ASCEND_OPP_PATH": "/custom/opp",
    }
    assert atc_environment(status, env) == env  # applying it twice changes nothing


def test_environment_without_a_toolkit_home_only_adds_the_atc_directory() -> None:
    status = CannStatus(True, "/opt/x/atc", None, None, "")
    env = atc_environment(status, {"PATH": "/bin", "TE_PARALLEL_COMPILER": "4"})
    assert env == {"PATH": f"/opt/x{os.pathsep}/bin", "TE_PARALLEL_COMPILER": "4"}


def test_parallel_compilers_follow_upstreams_advice_and_the_builds_at_once() -> None:
    """CPU cores x 80 % / NPUs (hicann/ge environment_setup.md), divided by the builds one host
    runs at once, within 1..32; an explicit TE_PARALLEL_COMPILER wins."""
    from model_store.compile.atc.environment import parallel_compilers

    assert parallel_compilers({}, cores=16) == 12
    assert parallel_compilers({"ASCEND_NPU_COUNT": "8"}, cores=16) == 1
    assert parallel_compilers({"ATC_MAX_PARALLEL_BUILDS": "2"}, cores=16) == 6
    assert parallel_compilers({}, cores=1) == 1
    assert parallel_compilers({}, cores=192) == 32
    status = CannStatus(True, "/opt/x/atc", None, None, "")
    assert atc_environment(status, {"PATH": "/bin"})["TE_PARALLEL_COMPILER"].isdigit()


def test_a_host_without_the_driver_gets_the_toolkits_stub_libraries_last(tmp_path: Path) -> None:
    """hicann/ge environment_setup.md: on a machine without the NPU driver ATC needs
    <toolkit>/<arch>-linux/devlib; with the driver it must stay off (its stub libascend_hal
    would shadow the real one). Appended, as set_env.sh does."""
    import platform

    from model_store.compile.atc.environment import stub_driver_dir

    home = tmp_path / "cann"
    devlib = home / f"{platform.machine()}-linux" / "devlib"
    devlib.mkdir(parents=True)
    status = CannStatus(True, str(home / "bin" / "atc"), str(home), None, "")
    no_driver = {"PATH": "/bin", "ASCEND_ROOT": str(tmp_path / "none")}
    assert stub_driver_dir(status, no_driver) == devlib
    env = atc_environment(status, no_driver)
    assert env["LD_LIBRARY_PATH"].split(os.pathsep)[-1] == str(devlib)
    driver = tmp_path / "Ascend" / "driver" / "lib64" / "driver"
    driver.mkdir(parents=True)
    (driver / "libascend_hal.so").write_bytes(b"")
    with_driver = {"PATH": "/bin", "ASCEND_ROOT": str(tmp_path / "Ascend")}
    assert stub_driver_dir(status, with_driver) is None
    assert str(devlib) not in atc_environment(status, with_driver)["LD_LIBRARY_PATH"]


def test_builds_take_one_of_the_hosts_slots_and_wait_for_a_free_one(tmp_path: Path) -> None:
    from model_store.compile.atc.slots import build_slot

    env = {"ATC_SLOTS_DIR": str(tmp_path), "ATC_MAX_PARALLEL_BUILDS": "1"}
    said: list[str] = []
    entered = threading.Event()
    with build_slot(env) as first:
        assert first == 0

        def second() -> None:
            with build_slot(env, log=said.append):
                entered.set()

        thread = threading.Thread(target=second)
        thread.start()
        assert not entered.wait(1.0)  # the one slot is held
        assert said == ["Waiting for a free ATC slot (1 build(s) at once on this host)."]
    assert entered.wait(5.0)  # freed: the waiting build goes on
    thread.join(5)
    with pytest.raises(InterruptedError), build_slot(env), build_slot(env, cancelled=lambda: True):
        pass


# --------------------------------------------------------------------------- running the fake atc


@pytest.fixture
def onnx_model(tmp_path: Path) -> Path:
    path = tmp_path / "model.onnx"
    path.write_bytes(mlp_onnx_bytes())
    return path


def _compile(
    fake_cann: dict[str, str],
    model: Path,
    out: Path,
    options: AtcOptions | None = None,
    extra_env: dict[str, str] | None = None,
    **kwargs: Any,
) -> tuple[AtcResult, list[str]]:
    status = require_atc(fake_cann)
    argv = build_atc_command(
        status.atc_path or "", model, out / "model", options or _options(input_shape="x:2,4")
    )
    env = atc_environment(status, {**os.environ, **(extra_env or {})})
    lines: list[str] = []
    result = run_atc(argv, env=env, cwd=out, on_line=lines.append, **kwargs)
    return result, lines


def test_a_successful_run_streams_lines_and_writes_the_om(
    fake_cann: dict[str, str], onnx_model: Path, tmp_path: Path
) -> None:
    result, lines = _compile(fake_cann, onnx_model, tmp_path)
    assert result.success, lines
    assert result.returncode == 0
    assert result.om_path == tmp_path / "model.om"
    assert result.om_path.read_bytes().startswith(b"FAKEOM")
    assert lines[0] == "ATC start working now, please wait for a moment."
    assert lines[-1] == "ATC run success, welcome to the next use."
    assert [m.kind for m in result.messages] == ["start", "success"]
    assert "compiled the model" in result.summary()
    result.raise_for_failure()


def test_lines_arrive_while_atc_still_runs(
    fake_cann: dict[str, str], onnx_model: Path, tmp_path: Path
) -> None:
    seen: list[float] = []
    status = require_atc(fake_cann)
    argv = build_atc_command(
        status.atc_path or "", onnx_model, tmp_path / "model", _options(input_shape="x:2,4")
    )
    env = atc_environment(status, {**os.environ, "FAKE_ATC_SLEEP": "2"})
    started = time.monotonic()
    result = run_atc(argv, env=env, cwd=tmp_path, on_line=lambda _: seen.append(time.monotonic()))
    assert result.success
    assert seen[0] - started < result.duration_s - 1.0  # the first line came well before the end


def test_on_line_is_called_in_the_callers_thread(
    fake_cann: dict[str, str], onnx_model: Path, tmp_path: Path
) -> None:
    threads: set[int] = set()
    status = require_atc(fake_cann)
    argv = build_atc_command(
        status.atc_path or "", onnx_model, tmp_path / "m", _options(input_shape="x:2,4")
    )
    run_atc(
        argv,
        env=atc_environment(status, os.environ),
        cwd=tmp_path,
        on_line=lambda _: threads.add(threading.get_ident()),
    )
    assert threads == {threading.get_ident()}


def test_missing_framework_fails_with_e10007(
    fake_cann: dict[str, str], onnx_model: Path, tmp_path: Path
) -> None:
    argv = [
        a
        for a in build_atc_command(
            fake_cann["ATC_PATH"], onnx_model, tmp_path / "m", _options(input_shape="x:2,4")
        )
        if not a.startswith("--framework")
    ]
    lines: list[str] = []
    status = require_atc(fake_cann)
    result = run_atc(
        argv, env=atc_environment(status, os.environ), cwd=tmp_path, on_line=lines.append
    )
    assert not result.success and result.returncode != 0 and result.om_path is None
    assert [m.code for m in result.errors] == ["E10007"]
    assert any(m.kind == "failure" for m in result.messages)
    assert result.errors[0].pid is not None
    with pytest.raises(AtcFailed, match="E10007") as info:
        result.raise_for_failure()
    assert info.value.code == "atc_failed"
    assert info.value.result is result


@pytest.mark.parametrize(
    ("options", "code", "text"),
    [
        (AtcOptions(soc_version="Ascend999Z1", input_shape="x:2,4"), "E10001", "--soc_version"),
        (AtcOptions(soc_version="Ascend310P3"), "E10001", "unknown"),
        (AtcOptions(soc_version="Ascend310P3", input_shape="nope:2,4"), "E10001", "no input nope"),
    ],
)
def test_invalid_values_fail_with_e10001(
    fake_cann: dict[str, str],
    onnx_model: Path,
    tmp_path: Path,
    options: AtcOptions,
    code: str,
    text: str,
) -> None:
    result, _ = _compile(fake_cann, onnx_model, tmp_path, options)
    assert not result.success
    assert result.errors[0].code == code
    assert text in result.errors[0].text


def test_a_missing_model_fails_with_e10001(fake_cann: dict[str, str], tmp_path: Path) -> None:
    result, _ = _compile(fake_cann, tmp_path / "absent.onnx", tmp_path)
    assert result.errors[0].code == "E10001"
    assert "--model" in result.errors[0].text


def _model_with(op_type: str, domain: str = "") -> bytes:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node(op_type, ["x"], ["y"], name="the_node", domain=domain)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
    )
    opsets = [helper.make_opsetid("", 13)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    return bytes(helper.make_model(graph, opset_imports=opsets, ir_version=8).SerializeToString())


def test_an_operator_without_kernel_fails_with_ez3003_and_advice(
    fake_cann: dict[str, str], tmp_path: Path
) -> None:
    model = tmp_path / "odd.onnx"
    model.write_bytes(_model_with("NotOnAscend"))
    result, _ = _compile(fake_cann, model, tmp_path, _options())
    error = result.errors[0]
    assert error.code == "EZ3003"
    assert "NotOnAscend" in error.text
    assert error.details == ["Solution: check the operator list of this CANN version."]
    assert "npu_ge" in result.summary()


def test_an_operator_of_a_custom_domain_fails_with_e19010(
    fake_cann: dict[str, str], tmp_path: Path
) -> None:
    model = tmp_path / "custom.onnx"
    model.write_bytes(_model_with("MyOp", domain="com.example"))
    result, _ = _compile(fake_cann, model, tmp_path, _options())
    assert result.errors[0].code == "E19010"
    assert "com.example" in result.errors[0].text


def test_warnings_are_collected_after_success(
    fake_cann: dict[str, str], onnx_model: Path, tmp_path: Path
) -> None:
    result, _ = _compile(fake_cann, onnx_model, tmp_path, extra_env={"FAKE_ATC_WARN": "1"})
    assert result.success
    assert [m.code for m in result.warnings] == ["W11001"]
    assert "1 warning(s)" in result.summary()


def test_cancelling_stops_atc_and_its_process_group(
    fake_cann: dict[str, str], onnx_model: Path, tmp_path: Path
) -> None:
    deadline = time.monotonic() + 1.0
    result, lines = _compile(
        fake_cann,
        onnx_model,
        tmp_path,
        extra_env={"FAKE_ATC_SLEEP": "60"},
        cancelled=lambda: time.monotonic() > deadline,
    )
    assert result.cancelled and not result.success and not result.timed_out
    assert result.duration_s < 10
    assert result.returncode < 0  # ended by a signal
    assert "cancelled" in result.summary()
    assert lines[0].startswith("ATC start working now")
    assert not (tmp_path / "model.om").exists()
    assert _processes_mentioning(str(tmp_path)) == []


def test_a_run_past_its_timeout_is_stopped(
    fake_cann: dict[str, str], onnx_model: Path, tmp_path: Path
) -> None:
    result, _ = _compile(
        fake_cann, onnx_model, tmp_path, extra_env={"FAKE_ATC_SLEEP": "60"}, timeout=1.0
    )
    assert result.timed_out and not result.success
    assert result.duration_s < 10
    assert "did not finish" in result.summary()


def test_exit_zero_without_a_new_om_is_not_success(tmp_path: Path) -> None:
    liar = tmp_path / "atc"
    liar.write_text("#!/bin/sh\necho 'ATC run success, welcome to the next use.'\nexit 0\n")
    liar.chmod(0o755)
    (tmp_path / "model.om").write_bytes(b"stale from an earlier run")
    result = run_atc(
        [str(liar), f"--output={tmp_path / 'model'}"], env=os.environ, cwd=tmp_path, on_line=print
    )
    assert result.returncode == 0
    assert not result.success and result.om_path is None
    assert "no new .om file" in result.messages[-1].text
    assert "wrote no .om" in result.summary()


def test_a_missing_binary_raises_atc_unavailable(tmp_path: Path) -> None:
    with pytest.raises(AtcUnavailable, match="could not be started"):
        run_atc([str(tmp_path / "atc")], env=os.environ, cwd=tmp_path, on_line=print)


def test_a_failing_on_line_callback_still_stops_atc(
    fake_cann: dict[str, str], onnx_model: Path, tmp_path: Path
) -> None:
    status = require_atc(fake_cann)
    argv = build_atc_command(
        status.atc_path or "", onnx_model, tmp_path / "m", _options(input_shape="x:2,4")
    )
    env = atc_environment(status, {**os.environ, "FAKE_ATC_SLEEP": "60"})

    def explode(_: str) -> None:
        raise RuntimeError("consumer broke")

    with pytest.raises(RuntimeError, match="consumer broke"):
        run_atc(argv, env=env, cwd=tmp_path, on_line=explode)
    assert _processes_mentioning(str(tmp_path)) == []


def _processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that mention ``text`` (e.g. the test's tmp dir)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(cmdline)
    return found


# --------------------------------------------------------------------------- ONNX formats, gears


def test_nhwc_is_refused_for_onnx_with_atcs_reason() -> None:
    problems = _options(input_format="NHWC").validate()
    assert any("E10001" in p and "NCHW, ND, NCDHW" in p and "Use ND" in p for p in problems)
    for fmt in ("NCHW", "ND", "NCDHW"):
        assert _options(input_format=fmt).validate() == []


@pytest.mark.parametrize(("gears", "code"), [([4], "E10035"), ([1, 2, 2], "E10039")])
def test_batch_gear_problems_name_ges_codes(gears: list[int], code: str) -> None:
    problems = _options(input_shape="x:-1,4", dynamic_batch_size=gears).validate()
    assert any(code in p for p in problems), problems


@pytest.mark.parametrize(
    ("input_shape", "dims", "expected"),
    [
        ("x:-1,4", "4", "E10035"),
        ("x:-1,4", "1;4;4", "E10039"),
        ("x:-1,-1", "1,2;3", "E10037"),
        ("x:-1,-1", "1;3", "E10003"),
        ("x:2,4", "1;2", "needs input_shape with -1"),
        ("x:-1,4", "1;a", "malformed"),
        ("x:-1,4", "0;2", "positive"),
        ("x:1~4,-1", "1;2", "shape ranges"),
    ],
)
def test_dynamic_dims_are_checked_like_atc(input_shape: str, dims: str, expected: str) -> None:
    problems = _options(input_shape=input_shape, extra={"dynamic_dims": dims}).validate()
    assert any(expected in p for p in problems), problems


def test_dynamic_dims_and_batch_gears_exclude_each_other() -> None:
    options = _options(
        input_shape="x:-1,4", dynamic_batch_size=[1, 2], extra={"dynamic_dims": "1;2"}
    )
    assert any("E10009" in p for p in options.validate())
    good = _options(input_shape="x:-1,4", input_format="ND", extra={"dynamic_dims": "1;2;4"})
    assert good.validate() == []


def test_gear_problems_is_one_rule_for_every_gear_option() -> None:
    assert gear_problems([[1], [2]], "g") == []
    assert any("E10035" in p for p in gear_problems([[1]], "g"))
    assert any("at most 100" in p for p in gear_problems([[i] for i in range(101)], "g"))
    assert any("E10039" in p and "1,2" in p for p in gear_problems([[1, 2], [1, 2]], "g"))
    assert parse_gears("1,224;2,448;") == [[1, 224], [2, 448]]
    with pytest.raises(ValueError, match="whole numbers"):
        parse_gears("1;-2")


@pytest.mark.parametrize(
    "code", ["E10003", "E10035", "E10039", "E40001", "E40002", "E40020", "EC0010"]
)
def test_new_codes_are_explained_with_a_next_step(code: str) -> None:
    text = explain(code)
    assert text == EXPLANATIONS[code]
    assert "error code reference" not in text  # not the generic answer
    if code.startswith(("E400", "EC")):
        assert "ATC_PYTHON" in text and "restart the worker" in text


def test_ec0010_lines_are_read_as_errors() -> None:
    message = parse_atc_line("EC0010: [PID: 7] Failed to import Python module [sympy].")
    assert message is not None and message.kind == "error" and message.code == "EC0010"
    assert "ATC_PYTHON" in (message.explanation or "")


# --------------------------------------------------------------------- the fake atc: gears, formats


def _run_fake(
    fake_cann: dict[str, str], model: Path, out: Path, *flags: str, path: str | None = None
) -> AtcResult:
    """Runs the fake atc with hand-written flags (bypassing our own option checks)."""
    status = require_atc(fake_cann)
    argv = [
        status.atc_path or "",
        f"--model={model}",
        "--framework=5",
        f"--output={out / 'model'}",
        "--soc_version=Ascend310P3",
        *flags,
    ]
    base = {**os.environ, "PATH": path} if path is not None else dict(os.environ)
    base.pop("ATC_PYTHON", None)
    return run_atc(argv, env=atc_environment(status, base), cwd=out, on_line=lambda _: None)


@pytest.mark.parametrize(
    ("flags", "code", "text"),
    [
        (["--input_format=NHWC", "--input_shape=x:2,4"], "E10001", "NCHW, ND or NCDHW in ONNX"),
        (["--input_shape=x:-1,4", "--dynamic_batch_size=4"], "E10035", "1 profiles"),
        (["--input_shape=x:-1,4", "--dynamic_batch_size=1,4,4"], "E10039", "duplicate profiles"),
        (["--input_shape=x:2,4", "--dynamic_batch_size=1,4"], "E10031", "equaling -1"),
        (["--input_shape=x:-1,4", "--dynamic_dims=4"], "E10035", "1 profiles"),
        (["--input_shape=x:-1,4", "--dynamic_dims=2;4;2"], "E10039", "duplicate profiles"),
        (["--input_shape=x:-1,4", "--dynamic_dims=1,2;3,4"], "E10003", "number of -1"),
        (["--input_shape=x:2,4", "--dynamic_dims=1;2"], "E10001", "At least one dim"),
        (["--dynamic_dims=1;2"], "E10004", "--input_shape is empty"),
        (
            ["--input_shape=x:-1,4", "--dynamic_dims=1;2", "--dynamic_batch_size=1,2"],
            "E10009",
            "mutually exclusive",
        ),
    ],
)
def test_the_fake_refuses_formats_and_gears_as_upstream_does(
    fake_cann: dict[str, str],
    onnx_model: Path,
    tmp_path: Path,
    flags: list[str],
    code: str,
    text: str,
) -> None:
    result = _run_fake(fake_cann, onnx_model, tmp_path, *flags)
    assert not result.success
    assert [m.code for m in result.errors] == [code]
    assert text in result.errors[0].text


def test_the_fake_compiles_dynamic_dims(
    fake_cann: dict[str, str], onnx_model: Path, tmp_path: Path
) -> None:
    result = _run_fake(
        fake_cann,
        onnx_model,
        tmp_path,
        "--input_shape=x:-1,4",
        "--input_format=ND",
        "--dynamic_dims=1;2;4",
    )
    assert result.success, result.summary()


def _python3_printing(folder: Path, version_line: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "python3"
    script.write_text(f"#!/bin/sh\necho '{version_line}'\n")
    script.chmod(0o755)
    return script


def test_the_fake_needs_python_37_or_later_on_its_path(
    fake_cann: dict[str, str], onnx_model: Path, tmp_path: Path
) -> None:
    old = _python3_printing(tmp_path / "old-bin", "Python 3.6.9")
    result = _run_fake(fake_cann, onnx_model, tmp_path, "--input_shape=x:2,4", path=str(old.parent))
    assert [m.code for m in result.errors] == ["E40002"]
    assert "Python 3.6.9" in result.errors[0].text
    assert "ATC_PYTHON" in (result.errors[0].explanation or "")
    empty = tmp_path / "no-python"
    empty.mkdir()
    result = _run_fake(fake_cann, onnx_model, tmp_path, "--input_shape=x:2,4", path=str(empty))
    assert [m.code for m in result.errors] == ["E40001"]
    assert "python3 -V and python -V" in result.errors[0].text


def test_atc_python_puts_its_interpreter_first_for_atc(
    fake_cann: dict[str, str], onnx_model: Path, tmp_path: Path
) -> None:
    old = _python3_printing(tmp_path / "cann-py" / "bin", "Python 3.6.9")
    status = require_atc(fake_cann)
    argv = build_atc_command(
        status.atc_path or "", onnx_model, tmp_path / "model", _options(input_shape="x:2,4")
    )
    lines: list[str] = []
    env = atc_environment(status, {**os.environ, "ATC_PYTHON": str(old)}, log=lines.append)
    assert env["PATH"].split(os.pathsep)[0] == str(old.parent)
    assert lines == [f"ATC's Python: {old} (ATC_PYTHON), first on ATC's PATH."]
    result = run_atc(argv, env=env, cwd=tmp_path, on_line=lambda _: None)
    assert [m.code for m in result.errors] == ["E40002"]


def test_the_toolkit_release_comes_from_version_cfg_never_from_an_inner_version(
    tmp_path: Path,
) -> None:
    """No install-info file: the release after the colon of version.cfg, else version_dir=,
    never a component's inner Version= (docs/cann.md#toolkit-version-files)."""
    from model_store.compile.atc.version_files import _toolkit_version, release_in_version_cfg

    home = tmp_path / "latest"
    (home / "compiler").mkdir(parents=True)
    (home / "compiler" / "version.info").write_text("Version=7.6.0.1.220\nversion_dir=8.0.0\n")
    assert _toolkit_version(home) == "8.0.0"
    (home / "version.cfg").write_text(
        "# version: 1.0\nruntime_running_version=[7.6.0.1.220:8.0.RC9]\n"
        "toolkit_running_version=[7.6.0.1.220:8.0.0]\ntoolkit_upgrade_version=[7.5.0:8.0.RC3]\n"
    )
    assert _toolkit_version(home) == "8.0.0"
    (home / "compiler" / "version.info").write_text("Version=7.6.0.1.220\n")
    (home / "version.cfg").unlink()
    assert _toolkit_version(home) is None
    assert release_in_version_cfg("toolkit_running_version=[8.3.RC2]") == "8.3.RC2"
    assert release_in_version_cfg("no such line") is None


def test_paths_atc_would_refuse_are_found_before_it_runs(tmp_path: Path) -> None:
    """hicann/ge base/common/util.cc: letters, digits, . / _ - (and CJK) only, on --model's real
    path (a symlink's target counts) and on --output as given."""
    from model_store.compile.atc.options import atc_path_problem

    plain = tmp_path / "store" / "model.onnx"
    plain.parent.mkdir()
    plain.write_bytes(b"x")
    assert atc_path_problem(plain, "--model") is None
    spaced = tmp_path / "my store"
    spaced.mkdir()
    link = tmp_path / "store" / "linked.onnx"
    link.symlink_to(spaced / "model.onnx")
    problem = atc_path_problem(link, "--model")
    assert problem is not None and "' '" in problem and "E10001" in problem
    assert atc_path_problem("/data/模型/out", "--output") is None
    assert "'@'" in (atc_path_problem("/data/a@b/out", "--output") or "")
