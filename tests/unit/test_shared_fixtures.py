"""The shared test helpers in tests/fixtures do what the suite relies on."""

from __future__ import annotations

import pytest

from model_store.runtime.errors import TritonStartError
from tests.fixtures import triton
from tests.fixtures.multipart import multipart_file
from tests.fixtures.waiting import wait_until


def test_a_missing_tritonserver_skips_here_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> None:
        raise TritonStartError("tritonserver binary not found at /nowhere")

    monkeypatch.setattr(triton, "find_tritonserver", missing)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no embedded tritonserver"):
        triton.require_tritonserver()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no tritonserver in CI"):
        triton.require_tritonserver()


def test_wait_until_returns_the_first_truthy_value_or_fails_naming_what_it_awaited() -> None:
    values = iter([0, None, "ready"])
    assert wait_until(lambda: next(values), 5, interval=0) == "ready"
    with pytest.raises(AssertionError, match=r"the answer: not within 0.01 s \(last value: 0\)"):
        wait_until(lambda: 0, 0.01, interval=0.001, message="the answer")
    with pytest.raises(AssertionError, match="built late"):
        wait_until(lambda: False, 0, message=lambda: "built late")


def test_a_multipart_body_is_one_django_reads_back(rf) -> None:  # type: ignore[no-untyped-def]
    body, content_type = multipart_file(b"\x00model\r\n--bytes", "m.onnx")
    request = rf.post("/", data=body, content_type=content_type)
    upload = request.FILES["file"]
    assert upload.name == "m.onnx" and upload.read() == b"\x00model\r\n--bytes"
