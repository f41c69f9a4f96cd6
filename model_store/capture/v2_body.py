"""The tensors of a KServe v2 inference request or answer, as Triton's HTTP endpoint takes them.

A body is a JSON header, followed, with the binary tensor extension, by each binary tensor's
bytes in the order the header lists them; ``Inference-Header-Content-Length`` says where the
header ends (absent: the whole body is JSON). A tensor in the JSON carries its elements in
``data`` (flat or nested, row-major); a binary one says its size in
``parameters.binary_data_size``. ``BYTES`` elements are each a 4-byte little-endian length and
that many bytes.

Read off the request's path, in the capture writer: anything that does not parse raises
:class:`BodyError`, and that item is counted as not captured, never a failed request.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import numpy as np

#: KServe v2 datatypes numpy holds as they are (BF16 has no numpy type: not captured).
DTYPES: dict[str, np.dtype[Any]] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype("<u1"),
    "UINT16": np.dtype("<u2"),
    "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"),
    "INT8": np.dtype("<i1"),
    "INT16": np.dtype("<i2"),
    "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"),
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
}
#: No tensor with more elements is read (a header could claim any shape).
MAX_ELEMENTS = 1 << 28


class BodyError(ValueError):
    """The body is not a v2 inference body this reader can take apart."""


def tensors(body: bytes, header_length: int | None, key: str) -> dict[str, np.ndarray]:
    """The tensors listed under ``key`` (``"inputs"`` or ``"outputs"``), by name.

    Raises:
        BodyError: Not JSON, sizes that do not add up, an unknown datatype, a shape that does
            not hold the data.
    """
    size = len(body) if header_length is None else header_length
    if not 0 < size <= len(body):
        raise BodyError(f"header length {header_length} for a body of {len(body)} bytes")
    try:
        header = json.loads(body[:size])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BodyError(f"the header is not JSON: {exc}") from None
    listed = header.get(key) if isinstance(header, dict) else None
    if not isinstance(listed, list):
        raise BodyError(f"no {key!r} list")
    found: dict[str, np.ndarray] = {}
    offset = size
    for entry in listed:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise BodyError(f"a tensor of {key!r} without a name")
        shape = _shape(entry.get("shape"))
        datatype = entry.get("datatype")
        params = entry.get("parameters") or {}
        binary = params.get("binary_data_size") if isinstance(params, dict) else None
        if binary is not None:
            if not isinstance(binary, int) or binary < 0 or offset + binary > len(body):
                raise BodyError(f"{entry['name']}: binary_data_size {binary!r} past the body")
            raw = body[offset : offset + binary]
            offset += binary
            found[entry["name"]] = _from_bytes(raw, datatype, shape, entry["name"])
        elif "data" in entry:
            found[entry["name"]] = _from_json(entry["data"], datatype, shape, entry["name"])
        # An output named without data (not asked for) is not there to capture.
    return found


def _shape(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value
    ):
        raise BodyError(f"shape {value!r} is not a list of sizes")
    if math.prod(value) > MAX_ELEMENTS:
        raise BodyError(f"shape {value!r} is too large")
    return tuple(value)


def _from_bytes(raw: bytes, datatype: Any, shape: tuple[int, ...], name: str) -> np.ndarray:
    if datatype == "BYTES":
        return _bytes_elements(raw, shape, name)
    dtype = DTYPES.get(datatype) if isinstance(datatype, str) else None
    if dtype is None:
        raise BodyError(f"{name}: datatype {datatype!r} is not captured")
    count = math.prod(shape)
    if len(raw) != count * dtype.itemsize:
        raise BodyError(f"{name}: {len(raw)} bytes for {count} {datatype} elements")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def _bytes_elements(raw: bytes, shape: tuple[int, ...], name: str) -> np.ndarray:
    items: list[bytes] = []
    at = 0
    while at < len(raw):
        if at + 4 > len(raw):
            raise BodyError(f"{name}: a BYTES element's length is cut off")
        (length,) = struct.unpack_from("<I", raw, at)
        at += 4
        if at + length > len(raw):
            raise BodyError(f"{name}: a BYTES element runs past its tensor")
        items.append(raw[at : at + length])
        at += length
    if len(items) != math.prod(shape):
        raise BodyError(f"{name}: {len(items)} BYTES elements for shape {list(shape)}")
    return np.array(items, dtype=np.bytes_).reshape(shape)


def _from_json(data: Any, datatype: Any, shape: tuple[int, ...], name: str) -> np.ndarray:
    if datatype == "BYTES":
        flat = np.array(
            [s.encode() if isinstance(s, str) else bytes(s) for s in _flat(data)], dtype=np.bytes_
        )
    else:
        dtype = DTYPES.get(datatype) if isinstance(datatype, str) else None
        if dtype is None:
            raise BodyError(f"{name}: datatype {datatype!r} is not captured")
        try:
            flat = np.asarray(_flat(data), dtype=dtype)
        except (TypeError, ValueError, OverflowError) as exc:
            raise BodyError(f"{name}: data is not {datatype}: {exc}") from None
    if flat.size != math.prod(shape):
        raise BodyError(f"{name}: {flat.size} elements for shape {list(shape)}")
    return flat.reshape(shape)


def _flat(data: Any) -> list[Any]:
    if not isinstance(data, list):
        raise BodyError("data is not a list")
    out: list[Any] = []
    stack = [iter(data)]
    while stack:
        for item in stack[-1]:
            if isinstance(item, list):
                stack.append(iter(item))
                break
            out.append(item)
            if len(out) > MAX_ELEMENTS:
                raise BodyError("data has too many elements")
        else:
            stack.pop()
    return out
