"""A FAKE ``acl`` (pyACL) module for tests. It is not pyACL and drives no NPU.

It implements the subset of pyACL that docs/pyacl.md describes, with the
same signatures and the same conventions: functions that return data return
``(value, ret)``, pure actions return ``ret``, and ``ret == 0`` is success;
wrong ids, sizes or memory kinds give non-zero codes from CANN's acl_base.h.
"Device memory" is a dict of bytearrays keyed by fake pointers, and
``acl.mdl.execute`` runs the ONNX model stored in the fake OM written by
tests/fakes/atc with onnxruntime.

Import it as ``acl`` by putting tests/fakes on ``sys.path`` (or PYTHONPATH),
or as ``tests.fakes.acl`` and place it in ``sys.modules["acl"]``. Test helpers
live in ``acl._fake``: ``reset()``, ``CALLS`` (every call, in order) and
``leaks()``.

The fake machine's NPUs and SoC are the ones the fake ``npu-smi`` shows
(``FAKE_NPU_SMI_SAMPLE``; see ``acl._host``), narrowed by ``ASCEND_RT_VISIBLE_DEVICES``.
Environment knobs: ``FAKE_ACL_DEVICE_COUNT`` (devices 0..N-1 instead), ``FAKE_ACL_NOISE``
(standard deviation of noise added to float outputs), ``FAKE_ACL_SOC`` (the chip instead;
OMs built for another one fail to load), ``FAKE_NPU_OWNERS_DIR`` (a directory shared by
the "containers": a chip another PID namespace holds fails with 507008; see
tests/fakes/npu_owners.py).
"""

from __future__ import annotations

from . import _fake, _host, mdl, rt, util
from ._fake import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_REPEAT_INITIALIZE,
    ACL_ERROR_UNINITIALIZE,
    ACL_SUCCESS,
    record,
)

__all__ = [
    "create_data_buffer",
    "destroy_data_buffer",
    "finalize",
    "get_data_buffer_addr",
    "get_data_buffer_size",
    "get_data_buffer_size_v2",
    "get_soc_name",
    "init",
    "mdl",
    "rt",
    "util",
]


def init(config_path: str | None = None) -> int:
    record("init")
    s = _fake.state()
    if s.initialized:
        return ACL_ERROR_REPEAT_INITIALIZE
    s.initialized = True
    s.init_count += 1
    return ACL_SUCCESS


def finalize() -> int:
    record("finalize")
    s = _fake.state()
    if not s.initialized:
        return ACL_ERROR_UNINITIALIZE
    s.initialized = False
    return ACL_SUCCESS


def get_soc_name() -> str | None:
    """The SoC name, e.g. ``"Ascend310P3"``: a plain string, no return code
    (runtime ``python/pyACL/py_init_acl.cpp``, ``WrapAclRtGetSocName``). None when the SoC
    cannot be read because another container holds a visible chip (``FAKE_NPU_OWNERS_DIR``;
    that pyACL then answers None is the fake's assumption)."""
    record("get_soc_name")
    if _fake.query_devices() != ACL_SUCCESS:
        return None
    return _host.soc_name()


def create_data_buffer(data: int, size: int) -> int:
    record("create_data_buffer")
    s = _fake.state()
    if size < 0:
        return 0
    handle = next(s.handles)
    s.data_buffers[handle] = (data, size)
    return handle


def destroy_data_buffer(data_buffer: int) -> int:
    record("destroy_data_buffer")
    s = _fake.state()
    if data_buffer not in s.data_buffers:
        return ACL_ERROR_INVALID_PARAM
    del s.data_buffers[data_buffer]
    return ACL_SUCCESS


def get_data_buffer_addr(data_buffer: int) -> int:
    record("get_data_buffer_addr")
    return _fake.state().data_buffers.get(data_buffer, (0, 0))[0]


def get_data_buffer_size(data_buffer: int) -> int:
    record("get_data_buffer_size")
    return _fake.state().data_buffers.get(data_buffer, (0, 0))[1]


def get_data_buffer_size_v2(data_buffer: int) -> int:
    record("get_data_buffer_size_v2")
    return _fake.state().data_buffers.get(data_buffer, (0, 0))[1]
