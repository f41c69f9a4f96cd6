"""Run an OM file once, outside Triton: the worker's way to verify what ATC built.

Built on :class:`~model_store.backends.acl.model.OmSession`, the same pyACL code
our ``acl`` Triton backend serves with, so verification exercises exactly the
path that will serve the model. pyACL is imported lazily: this module imports
fine on machines without CANN, and :func:`acl_available` says whether it can run.

NOT RUN ON ASCEND HARDWARE: tested with the fake ``acl`` module in tests/fakes.
pyACL allows one ``acl.init`` per process; the first run initialises it and it is
finalised when the process exits. Call these functions in the worker process
itself (not before a fork: a forked child inherits a runtime it cannot use).

Example:
    >>> ok, why = acl_available()
    >>> outputs = run_om(Path("model.om"), {"x": np.zeros((1, 4), np.float32)})
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from model_store.backends.acl.model import (
    AclError,
    AclUnavailable,
    OmSession,
    RequestError,
    import_acl,
)
from model_store.errors import ModelStoreError


class PyAclUnavailable(ModelStoreError):
    """pyACL (``import acl``, from the CANN toolkit) is not importable here."""

    code = "acl_missing"


class OmInputMismatch(ModelStoreError):
    """The inputs do not fit the OM (names, data types or compiled shapes)."""

    code = "om_input_mismatch"


class OmRunFailed(ModelStoreError):
    """pyACL could not load or run the OM (device, chip or runtime problem)."""

    code = "om_run_failed"


def acl_available() -> tuple[bool, str]:
    """Whether pyACL can be imported here, and a plain-words reason.

    This only checks the import: a machine can have pyACL but no NPU, which
    :func:`run_om` then reports (``acl.rt.set_device`` fails).
    """
    try:
        acl = import_acl()
    except AclUnavailable as exc:
        return False, str(exc)
    missing = [name for name in ("init", "rt", "mdl", "util") if not hasattr(acl, name)]
    if missing:
        return False, (
            f"the acl module at {getattr(acl, '__file__', '?')} lacks {', '.join(missing)}; "
            "it is not CANN's pyACL"
        )
    return True, f"pyACL found at {getattr(acl, '__file__', '?')}"


def run_om(
    path: Path | str, inputs: dict[str, np.ndarray], device_id: int = 0
) -> dict[str, np.ndarray]:
    """Loads ``path`` on NPU ``device_id``, runs it once on ``inputs``, unloads it.

    Args:
        path: The ``.om`` file.
        inputs: Arrays by input name, with the OM's data types and compiled
            shapes (a dynamic-batch OM takes any batch up to its largest gear).
        device_id: The NPU to use.

    Returns:
        Every output of the OM by name.

    Raises:
        PyAclUnavailable: pyACL is not importable.
        OmInputMismatch: The inputs do not fit the OM.
        OmRunFailed: pyACL failed to set the device, load or run the OM.
    """
    try:
        with OmSession(path, device_id) as session:
            return session.run(inputs)
    except AclUnavailable as exc:
        raise PyAclUnavailable(str(exc)) from exc
    except RequestError as exc:
        raise OmInputMismatch(f"The inputs do not fit {Path(path).name}: {exc}.") from exc
    except AclError as exc:
        raise OmRunFailed(f"Running {Path(path).name} on NPU {device_id} failed: {exc}.") from exc
