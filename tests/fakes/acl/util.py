"""Fake ``acl.util``: pointers to and from Python buffers (tests only; not pyACL).

The real functions hand out the address of the Python object's own buffer;
the fake registers that buffer as a host region under a fake pointer. Only the
most recent regions are kept (the real pointer is valid only while the object
lives, so callers must use it right away anyway).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _fake
from ._fake import record

_MAX_VIEWS = 256
# numpy type numbers (NPY_TYPES) accepted by the older ptr_to_numpy.
_NPY_TYPES: dict[int, Any] = {
    0: np.bool_,
    1: np.int8,
    2: np.uint8,
    3: np.int16,
    4: np.uint16,
    5: np.int32,
    6: np.uint32,
    7: np.int64,
    8: np.uint64,
    9: np.int64,
    10: np.uint64,
    11: np.float32,
    12: np.float64,
    23: np.float16,
}


def _register(view: memoryview) -> int:
    s = _fake.state()
    ptr = s.new_pointer(view.nbytes)
    s.views[ptr] = view
    while len(s.views) > _MAX_VIEWS:
        del s.views[next(iter(s.views))]
    return ptr


def bytes_to_ptr(data: bytes) -> int:
    """Like pyACL's: a ``bytes`` object only (PyBytes_Check), else ValueError."""
    record("util.bytes_to_ptr")
    if not isinstance(data, bytes):
        raise ValueError("needs an byte as argument")
    return _register(memoryview(data).cast("B"))


def ptr_to_bytes(ptr: int, size: int) -> bytes:
    record("util.ptr_to_bytes")
    found = _fake.state().locate(ptr)
    if found is None:
        raise ValueError(f"fake acl: pointer {ptr:#x} is not a known host buffer")
    _, view, offset = found
    if offset + size > view.nbytes:
        raise ValueError(f"fake acl: {size} bytes at {ptr:#x} run past the buffer")
    return bytes(view[offset : offset + size])


def numpy_to_ptr(array: np.ndarray) -> int:
    record("util.numpy_to_ptr")
    if not array.flags["C_CONTIGUOUS"]:
        raise ValueError("fake acl: numpy_to_ptr needs a C-contiguous array")
    return _register(memoryview(array).cast("B"))


def ptr_to_numpy(ptr: int, shape: tuple[int, ...], npy_type: int) -> np.ndarray:
    record("util.ptr_to_numpy")
    dtype = np.dtype(_NPY_TYPES[npy_type])
    size = int(np.prod(shape)) * dtype.itemsize
    return np.frombuffer(ptr_to_bytes(ptr, size), dtype=dtype).reshape(shape).copy()
