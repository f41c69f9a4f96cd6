"""model_store.inference.snippets: generated code runs and user names cannot inject into it.

The curl command is run by a POSIX shell with ``curl`` replaced by a function that prints
its arguments; the Python script is executed against a fake ``tritonclient.http``. Both
prove the names arrive as plain data, whatever they contain.
"""

from __future__ import annotations

import ast
import json
import shutil
import sys
import types
from typing import Any

import numpy as np
import pytest

from model_store import spawn
from model_store.inference import (
    TensorSpec,
    curl_snippet,
    specs_from_signature,
    tritonclient_snippet,
)

HOSTILE = "x'; rm -rf / #\"$(touch /tmp/pwned)`id`\n\\"
SH = shutil.which("sh")


def specs(*entries: tuple[str, str, list[Any]]) -> list[TensorSpec]:
    sig = {"inputs": [{"name": n, "dtype": t, "dims": d} for n, t, d in entries]}
    return specs_from_signature(sig)


def curl_args(snippet: str) -> list[str]:
    """The arguments the snippet passes to curl, as a real shell parses them."""
    assert SH is not None
    script = 'curl() { for a in "$@"; do printf "%s\\0" "$a"; done; }\n' + snippet
    result = spawn.run(
        [SH, "-c", script],
        capture_output=True,
        timeout=30,
        check=True,
        env={"HUB_TOKEN": "t0ken", "PATH": "/usr/bin:/bin"},
    )
    return result.stdout.decode().split("\0")[:-1]


# curl ------------------------------------------------------------------------------------

needs_sh = pytest.mark.skipif(SH is None, reason="needs a POSIX shell")


@needs_sh
def test_curl_posts_the_body_with_the_token_from_the_environment() -> None:
    body = {"inputs": [{"name": "input", "shape": [1, 2], "datatype": "FP32", "data": [1, 2]}]}
    snippet = curl_snippet("https://hub.example/", "resnet", body, version=2)
    assert "$HUB_TOKEN" in snippet and "t0ken" not in snippet
    args = curl_args(snippet)
    assert args[:4] == [
        "-sS", "-X", "POST", "https://hub.example/v2/models/resnet/versions/2/infer",
    ]  # fmt: skip
    assert args[4:8] == [
        "-H",
        "Authorization: Bearer t0ken",
        "-H",
        "Content-Type: application/json",
    ]
    assert args[8] == "--data" and json.loads(args[9]) == body
    assert len(args) == 10


@needs_sh
def test_curl_keeps_hostile_names_as_data() -> None:
    body = {"inputs": {HOSTILE: ['it\'s "quoted" $(id)']}}
    args = curl_args(curl_snippet("http://hub", HOSTILE, body, version=None))
    assert args[3].startswith("http://hub/v2/models/x%27%3B%20rm%20-rf%20%2F%20%23")
    assert args[3].endswith("/infer") and args[3].count("/") == 6
    assert json.loads(args[9]) == body


def test_a_big_body_is_read_from_a_file() -> None:
    body = {"inputs": {"input": np.zeros((1, 3, 64, 64)).tolist()}}
    snippet = curl_snippet("http://hub", "m", body, version=1)
    first, *rest = snippet.splitlines()
    assert first.startswith("#") and "request.json" in first
    assert rest[-1].strip() == "--data @request.json"
    assert len(snippet) < 1000


# tritonclient ----------------------------------------------------------------------------


class FakeClient:
    """Stands in for tritonclient.http: records what the script asks for."""

    calls: list[dict[str, Any]] = []

    def __init__(self, url: str, ssl: bool = False) -> None:
        self.url, self.ssl = url, ssl

    def infer(
        self, model: str, inputs: list[Any], model_version: str, outputs: list[Any],
        headers: dict[str, str] | None = None,
    ) -> Any:  # fmt: skip
        FakeClient.calls.append(
            {
                "url": self.url,
                "ssl": self.ssl,
                "model": model,
                "version": model_version,
                "inputs": inputs,
                "outputs": [o.name for o in outputs],
                "headers": headers,
            }
        )
        result = types.SimpleNamespace()
        result.as_numpy = lambda name: np.array([[0.1, 0.7, 0.2]], dtype=np.float32)
        return result


class FakeInput:
    def __init__(self, name: str, shape: list[int], datatype: str) -> None:
        self.name, self.shape, self.datatype = name, shape, datatype
        self.array: np.ndarray | None = None

    def set_data_from_numpy(self, array: np.ndarray) -> None:
        self.array = array


class FakeOutput:
    def __init__(self, name: str) -> None:
        self.name = name


@pytest.fixture
def fake_tritonclient(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    package = types.ModuleType("tritonclient")
    http = types.ModuleType("tritonclient.http")
    http.InferenceServerClient = FakeClient  # type: ignore[attr-defined]
    http.InferInput = FakeInput  # type: ignore[attr-defined]
    http.InferRequestedOutput = FakeOutput  # type: ignore[attr-defined]
    package.http = http  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tritonclient", package)
    monkeypatch.setitem(sys.modules, "tritonclient.http", http)
    FakeClient.calls = []
    return FakeClient.calls


def run(source: str) -> None:
    exec(compile(source, "<snippet>", "exec"), {"__name__": "__main__"})  # noqa: S102


def test_the_script_compiles_and_sends_the_exact_shapes_and_dtypes(
    fake_tritonclient: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = specs(
        ("input", "TYPE_FP32", ["batch", 3, 224, 224]),
        ("ids", "TYPE_INT64", ["batch", "seq"]),
        ("mask", "TYPE_BOOL", [1, 4]),
        ("text", "TYPE_STRING", ["batch"]),
        ("half", "TYPE_FP16", [2]),
    )
    source = tritonclient_snippet(
        "http://triton:8000/",
        "resnet",
        3,
        inputs,
        {"input": [2, 3, 224, 224], "ids": [1, 7]},
        ["logits"],
    )
    ast.parse(source)
    run(source)
    (call,) = fake_tritonclient
    assert call["url"] == "triton:8000" and call["ssl"] is False
    assert call["model"] == "resnet" and call["version"] == "3" and call["outputs"] == ["logits"]
    sent = {i.name: (i.shape, i.datatype, i.array.dtype) for i in call["inputs"]}
    assert sent == {
        "input": ([2, 3, 224, 224], "FP32", np.float32),
        "ids": ([1, 7], "INT64", np.int64),
        "mask": ([1, 4], "BOOL", np.bool_),
        "text": ([1], "BYTES", np.dtype(object)),
        "half": ([2], "FP16", np.float16),
    }
    printed = capsys.readouterr().out
    assert "logits float32 [1, 3]" in printed and "top-5: [(1, 0.7), (2, 0.2), (0, 0.1)]" in printed


def test_hostile_names_stay_string_literals(fake_tritonclient: list[dict[str, Any]]) -> None:
    inputs = specs((HOSTILE, "TYPE_FP32", [1, 2]))
    source = tritonclient_snippet("https://t:8000", HOSTILE, None, inputs, {}, [HOSTILE])
    tree = ast.parse(source)
    called = {ast.unparse(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    assert not any("rm" in name or "system" in name for name in called)
    run(source)
    (call,) = fake_tritonclient
    assert call["model"] == HOSTILE and call["outputs"] == [HOSTILE] and call["version"] == ""
    assert call["ssl"] is True and call["url"] == "t:8000"
    assert [i.name for i in call["inputs"]] == [HOSTILE]


def test_shapes_must_be_numbers() -> None:
    inputs = specs(("x", "TYPE_FP32", [1, 2]))
    code_in_a_shape: Any = {"x": ["1); import os; (1"]}
    with pytest.raises((ValueError, TypeError)):
        tritonclient_snippet("t:8000", "m", 1, inputs, code_in_a_shape, ["y"])
    with pytest.raises(ValueError):
        tritonclient_snippet("t:8000", "m", 1, inputs, {"x": [-1, 2]}, ["y"])


def test_the_gateway_script_sends_the_token_from_the_environment(
    fake_tritonclient: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HUB_TOKEN", "t0ken")
    inputs = specs(("x", "TYPE_FP32", [1, 2]))
    source = tritonclient_snippet(
        "https://hub.example:8443", "m", 1, inputs, {}, ["y"], token_env="HUB_TOKEN"
    )
    assert "t0ken" not in source and "gateway" in source
    run(source)
    (call,) = fake_tritonclient
    assert call["url"] == "hub.example:8443" and call["ssl"] is True
    assert call["headers"] == {"Authorization": "Bearer t0ken"}
