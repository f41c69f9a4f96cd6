"""Finding AMCT and msModelSlim on a build host, with a stand-in for the process runner: each
outcome an interpreter can give (imports, does not, killed, too new, no command) read right."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from typing import Any

from model_store.ascend.quantise_tools import detect_quantisers
from model_store.host_report import quantisers
from model_store.text import from_json


class Runner:
    """Answers each argv by the first matching rule: ``(needle, returncode, stdout)``."""

    def __init__(self, *rules: tuple[str, int, str]) -> None:
        self.rules, self.calls = rules, []  # type: ignore[var-annotated]

    def __call__(self, argv: Sequence[str], **_: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        text = " ".join(argv)
        for needle, code, out in self.rules:
            if needle in text:
                return subprocess.CompletedProcess(argv, code, out, "ModuleNotFoundError: x\n")
        return subprocess.CompletedProcess(argv, 1, "", "ModuleNotFoundError: No module named x\n")


ENV = {"ATC_PYTHON": "/opt/atc/bin/python3"}


def test_both_present_with_their_versions() -> None:
    run = Runner(("amct_onnx calibration", 0, ""), ("as m, amct_onnx", 0, "8.0.0\n"),
                 ("msmodelslim", 0, "1.2.0\n3.10\n"))  # fmt: skip
    found = detect_quantisers(ENV, run)
    assert found["amct"]["state"] == "present" and found["amct"]["version"] == "8.0.0"
    assert found["msmodelslim"] == {"state": "present", "version": "1.2.0",
                                    "python": "/opt/atc/bin/python3", "reason": ""}  # fmt: skip
    assert ["/opt/atc/bin/amct_onnx", "calibration", "--help"] in run.calls


def test_absent_killed_too_new_and_a_command_that_fails() -> None:
    run = Runner(("as m, amct_onnx", -11, ""), ("msmodelslim", 0, "1.2.0\n3.12\n"))
    found = detect_quantisers(ENV, run)
    assert found["amct"]["state"] == "broken"
    assert "killed by SIGSEGV" in str(from_json(found["amct"]["reason"]))
    assert found["msmodelslim"]["state"] == "broken"
    assert "below 3.12" in str(from_json(found["msmodelslim"]["reason"]))

    run = Runner(("amct_onnx calibration", 2, ""), ("as m, amct_onnx", 0, "8.0.0\n"))
    found = detect_quantisers(ENV, run)
    assert found["amct"]["state"] == "broken" and "--help ended with status 2" in str(
        from_json(found["amct"]["reason"])
    )
    assert found["msmodelslim"]["state"] == "absent"
    assert "not importable" in str(from_json(found["msmodelslim"]["reason"]))


def test_nothing_is_run_on_a_host_without_cann_or_a_named_interpreter() -> None:
    def never(*_: Any, **__: Any) -> Any:
        raise AssertionError("probed a host without CANN")

    found = quantisers({}, cann_available=False)
    assert found["amct"]["state"] == found["msmodelslim"]["state"] == "absent"
    assert detect_quantisers({}, never)["amct"]["state"] == "absent"  # no interpreter named
