"""pyACL as the self-test asks it: the module, the SoC it reports, how many NPUs it sees.

Through the ``acl`` backend's own import and process-wide initialisation
(:mod:`model_store.backends.acl.model`: ``import_acl`` also looks in the toolkit's
``python/site-packages``; one ``acl.init`` per process, finalised at exit; docs/pyacl.md#lifecycle).
``acl.get_soc_name()`` (``aclrtGetSocName``, a plain string) and ``acl.rt.get_device_count()``
(``(count, ret)``; docs/pyacl.md#device-and-chip) are optional here: a pyACL without them
leaves the answer to npu-smi.
"""

from __future__ import annotations

from typing import Any

from model_store.backends.acl.model import ACL_SUCCESS, _init_acl, import_acl


def initialised_acl() -> Any:
    """The ``acl`` module, initialised once for this process.

    Raises:
        AclUnavailable: pyACL cannot be imported (the message says where it looked).
        AclError: ``acl.init`` failed.
    """
    acl = import_acl()
    _init_acl(acl)
    return acl


def _value(answer: Any) -> Any:
    """pyACL answers ``(value, ret)`` for most getters; ``None`` when ``ret`` is an error."""
    if isinstance(answer, tuple) and len(answer) == 2:
        value, ret = answer
        return value if ret == ACL_SUCCESS else None
    return answer


def soc_name(acl: Any) -> str | None:
    """``acl.get_soc_name()``, e.g. ``"Ascend310P3"``; None when absent or empty."""
    getter = getattr(acl, "get_soc_name", None)
    if getter is None:
        return None
    value = _value(getter())
    return str(value) if value else None


def device_count(acl: Any) -> int | None:
    """``acl.rt.get_device_count()``; None when this pyACL has no such call or it failed."""
    getter = getattr(getattr(acl, "rt", None), "get_device_count", None)
    if getter is None:
        return None
    value = _value(getter())
    return int(value) if isinstance(value, int) else None
