"""Reading the tensors out of v2 bodies as tritonclient writes them (binary and JSON), and
refusing bodies that lie about their sizes."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tritonclient.http as httpclient

from model_store.capture.files import CaptureFiles, DiskFull, decode, encode
from model_store.capture.v2_body import BodyError, tensors


def _request(binary: bool) -> tuple[bytes, int | None, dict[str, np.ndarray]]:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    ids = np.array([[7, -1]], dtype=np.int64)
    words = np.array([b"a", b"bcd"], dtype=np.object_)
    given = []
    for name, array, kind in (("x", x, "FP32"), ("ids", ids, "INT64"), ("w", words, "BYTES")):
        tensor = httpclient.InferInput(name, list(array.shape), kind)
        tensor.set_data_from_numpy(array, binary_data=binary)
        given.append(tensor)
    body, json_size = httpclient.InferenceServerClient.generate_request_body(given)
    return body, json_size, {"x": x, "ids": ids, "w": np.array([b"a", b"bcd"])}


@pytest.mark.parametrize("binary", [True, False])
def test_tritonclients_requests_are_read_back(binary: bool) -> None:
    body, json_size, sent = _request(binary)
    found = tensors(body, json_size, "inputs")
    assert set(found) == {"x", "ids", "w"}
    np.testing.assert_array_equal(found["x"], sent["x"])
    assert found["x"].dtype == np.float32
    np.testing.assert_array_equal(found["ids"], sent["ids"])
    assert list(found["w"]) == [b"a", b"bcd"]


def test_an_answer_with_a_binary_output() -> None:
    y = np.linspace(0, 1, 10, dtype=np.float32).reshape(2, 5)
    header = json.dumps({"model_name": "m", "outputs": [
        {"name": "y", "datatype": "FP32", "shape": [2, 5],
         "parameters": {"binary_data_size": y.nbytes}},
        {"name": "label", "datatype": "INT32", "shape": [2], "data": [3, 4]},
    ]}).encode()  # fmt: skip
    found = tensors(header + y.tobytes(), len(header), "outputs")
    np.testing.assert_array_equal(found["y"], y)
    np.testing.assert_array_equal(found["label"], [3, 4])


@pytest.mark.parametrize(
    ("body", "header_length", "says"),
    [
        (b"not json", None, "not JSON"),
        (b'{"inputs": 3}', None, "no 'inputs' list"),
        (b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [2], "data": [1]}]}', None,
         "1 elements"),
        (b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [4],'
         b' "parameters": {"binary_data_size": 16}}]}', None, "past the body"),
        (b'{"inputs": [{"name": "x", "datatype": "BF16", "shape": [1], "data": [1]}]}', None,
         "not captured"),
        (b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1], "data": []}]}', None,
         "not a list of sizes"),
        (b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [65536, 65536, 64],'
         b' "data": []}]}', None, "too large"),
        (b'{"inputs": []}', 99, "header length"),
    ],
)  # fmt: skip
def test_bodies_that_lie_are_refused(body: bytes, header_length: int | None, says: str) -> None:
    with pytest.raises(BodyError, match=says):
        tensors(body, header_length, "inputs")


def test_files_round_trip_and_refuse_paths_and_a_full_disk(tmp_path) -> None:  # type: ignore[no-untyped-def]
    files = CaptureFiles(tmp_path, min_free=0)
    x = np.ones((1, 3), dtype=np.float16)
    name = files.write("demo", encode({"x": x}, {"y": x * 2}))
    inputs, outputs = files.read("demo", name)
    np.testing.assert_array_equal(inputs["x"], x)
    np.testing.assert_array_equal(outputs["y"], x * 2)
    assert oct((tmp_path / "demo" / name).stat().st_mode & 0o777) == "0o600"
    for model, item in (("../etc", name), ("demo", "../../x.npz"), ("demo", "a.py")):
        with pytest.raises(ValueError):
            files.read(model, item)
    with pytest.raises(ValueError, match="not a capture file"):
        decode(b"PK not really")
    full = CaptureFiles(tmp_path, min_free=1 << 62)
    with pytest.raises(DiskFull):
        full.write("demo", b"x")
    assert sorted(p.name for p in (tmp_path / "demo").iterdir()) == [name]  # nothing half-written
    files.purge("demo")
    assert not (tmp_path / "demo").exists()
