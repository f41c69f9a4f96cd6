"""Fake ``acl.rt``: devices, contexts, memory and copies (tests only; not pyACL)."""

from __future__ import annotations

from . import _fake
from ._fake import (
    ACL_ERROR_RT_CONTEXT_NULL,
    ACL_ERROR_RT_INVALID_DEVICEID,
    ACL_ERROR_RT_PARAM_INVALID,
    ACL_ERROR_RT_SOC_VERSION,
    ACL_ERROR_UNINITIALIZE,
    ACL_SUCCESS,
    record,
)

ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEM_MALLOC_HUGE_ONLY = 1
ACL_MEM_MALLOC_NORMAL_ONLY = 2
ACL_MEMCPY_HOST_TO_HOST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_MEMCPY_DEVICE_TO_DEVICE = 3

# kind -> (source space, destination space)
_KINDS = {
    ACL_MEMCPY_HOST_TO_HOST: ("host", "host"),
    ACL_MEMCPY_HOST_TO_DEVICE: ("host", "device"),
    ACL_MEMCPY_DEVICE_TO_HOST: ("device", "host"),
    ACL_MEMCPY_DEVICE_TO_DEVICE: ("device", "device"),
}


def get_device_count() -> tuple[int, int]:
    """``(count, ret)`` (runtime ``python/pyACL/rt/rt_device.cpp``, ``WrapAclRtGetDeviceCount``)."""
    record("rt.get_device_count")
    if _fake.query_devices() != ACL_SUCCESS:  # a visible chip is another container's
        return 0, ACL_ERROR_RT_SOC_VERSION
    return _fake.device_count(), ACL_SUCCESS


def set_device(device_id: int) -> int:
    record("rt.set_device")
    s = _fake.state()
    if not s.initialized:
        return ACL_ERROR_UNINITIALIZE
    if not isinstance(device_id, int) or device_id not in _fake.device_ids():
        return ACL_ERROR_RT_INVALID_DEVICEID
    ret = _fake.open_device(device_id)  # held by another container: 507008
    if ret != ACL_SUCCESS:
        return ret
    s.devices[device_id] = s.devices.get(device_id, 0) + 1
    # Like the real runtime: setting a device gives the thread a default context.
    ctx = s.default_contexts.setdefault(device_id, next(s.handles))
    if s.current_context is None:
        s.current_context = ctx
    return ACL_SUCCESS


def reset_device(device_id: int) -> int:
    record("rt.reset_device")
    s = _fake.state()
    if s.devices.get(device_id, 0) <= 0:
        return ACL_ERROR_RT_INVALID_DEVICEID
    s.devices[device_id] -= 1
    if not s.devices[device_id]:
        del s.devices[device_id]
        ctx = s.default_contexts.pop(device_id, None)
        if s.current_context == ctx:
            s.current_context = None
    return ACL_SUCCESS


def create_context(device_id: int) -> tuple[int, int]:
    record("rt.create_context")
    s = _fake.state()
    if device_id not in s.devices:
        return 0, ACL_ERROR_RT_INVALID_DEVICEID
    ctx = next(s.handles)
    s.contexts[ctx] = device_id
    s.current_context = ctx
    return ctx, ACL_SUCCESS


def destroy_context(context: int) -> int:
    record("rt.destroy_context")
    s = _fake.state()
    if context not in s.contexts:
        return ACL_ERROR_RT_PARAM_INVALID
    del s.contexts[context]
    if s.current_context == context:
        s.current_context = None
    return ACL_SUCCESS


def set_context(context: int) -> int:
    record("rt.set_context")
    s = _fake.state()
    if context not in s.contexts and context not in s.default_contexts.values():
        return ACL_ERROR_RT_PARAM_INVALID
    s.current_context = context
    return ACL_SUCCESS


def get_context() -> tuple[int, int]:
    record("rt.get_context")
    ctx = _fake.state().current_context
    return (ctx, ACL_SUCCESS) if ctx is not None else (0, ACL_ERROR_RT_CONTEXT_NULL)


def _alloc(space: str, size: int) -> tuple[int, int]:
    s = _fake.state()
    if not s.initialized:
        return 0, ACL_ERROR_UNINITIALIZE
    if s.current_context is None:
        return 0, ACL_ERROR_RT_CONTEXT_NULL
    if not isinstance(size, int) or size <= 0:
        return 0, ACL_ERROR_RT_PARAM_INVALID
    ptr = s.new_pointer(size)
    s.memory[ptr] = (space, bytearray(size))
    return ptr, ACL_SUCCESS


def _release(space: str, ptr: int) -> int:
    s = _fake.state()
    held = s.memory.get(ptr)
    if held is None or held[0] != space:
        return ACL_ERROR_RT_PARAM_INVALID
    del s.memory[ptr]
    return ACL_SUCCESS


def malloc(size: int, policy: int) -> tuple[int, int]:
    record("rt.malloc")
    if policy not in (0, 1, 2):
        return 0, ACL_ERROR_RT_PARAM_INVALID
    return _alloc("device", size)


def free(ptr: int) -> int:
    record("rt.free")
    return _release("device", ptr)


def malloc_host(size: int) -> tuple[int, int]:
    record("rt.malloc_host")
    return _alloc("host", size)


def free_host(ptr: int) -> int:
    record("rt.free_host")
    return _release("host", ptr)


def memcpy(dst: int, dst_size: int, src: int, count: int, kind: int) -> int:
    record("rt.memcpy")
    s = _fake.state()
    if s.current_context is None:
        return ACL_ERROR_RT_CONTEXT_NULL
    spaces = _KINDS.get(kind)
    if spaces is None or count < 0 or count > dst_size:
        return ACL_ERROR_RT_PARAM_INVALID
    source, target = s.locate(src), s.locate(dst)
    if source is None or target is None:
        return ACL_ERROR_RT_PARAM_INVALID
    (src_space, src_buf, src_off), (dst_space, dst_buf, dst_off) = source, target
    if (src_space, dst_space) != spaces:
        return ACL_ERROR_RT_PARAM_INVALID  # e.g. a host pointer passed as device memory
    if src_off + count > src_buf.nbytes or dst_off + dst_size > dst_buf.nbytes:
        return ACL_ERROR_RT_PARAM_INVALID
    if dst_buf.readonly:
        return ACL_ERROR_RT_PARAM_INVALID
    dst_buf[dst_off : dst_off + count] = src_buf[src_off : src_off + count]
    return ACL_SUCCESS
