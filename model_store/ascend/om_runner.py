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

import logging
from pathlib import Path

import numpy as np

from model_store.backends.acl.model import (
    AclError,
    AclUnavailable,
    OmSession,
    OutputNameError,
    RequestError,
    import_acl,
    map_om_outputs,
)
from model_store.errors import ModelStoreError

log = logging.getLogger(__name__)


class PyAclUnavailable(ModelStoreError):
    """pyACL (``import acl``, from the CANN toolkit) is not importable here."""

    code = "acl_missing"


class OmInputMismatch(ModelStoreError):
    """The inputs do not fit the OM (names, data types or compiled shapes)."""

    code = "om_input_mismatch"


class OmOutputMismatch(ModelStoreError):
    """The OM's output names cannot be matched to the source model's outputs."""

    code = "om_output_mismatch"


class OmRunFailed(ModelStoreError):
    """pyACL could not load or run the OM (device, chip or runtime problem)."""

    code = "om_run_failed"


class NpuUnavailable(OmRunFailed):
    """pyACL is here but cannot use an NPU (no device, or the runtime does not start).

    Not a fault of the OM: verification reports "not run" for it, never "failed".
    """

    code = "npu_unavailable"


#: pyACL calls whose failure means "no usable NPU runtime in this process", not "bad OM".
_ENVIRONMENT_CALLS = ("acl.init", "acl.rt.set_device", "acl.rt.create_context")


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
        Every output of the OM by the OM's name for it (``<op>:<index>:<ONNX name>``
        for an OM built from ONNX); :func:`match_outputs` keys them by ONNX name.

    Raises:
        PyAclUnavailable: pyACL is not importable.
        NpuUnavailable: pyACL could not start or set NPU ``device_id`` (no NPU here).
        OmInputMismatch: The inputs do not fit the OM.
        OmRunFailed: pyACL failed to load or run the OM.
    """
    try:
        with OmSession(path, device_id) as session:
            return session.run(inputs)
    except AclUnavailable as exc:
        raise PyAclUnavailable(str(exc)) from exc
    except RequestError as exc:
        raise OmInputMismatch(f"The inputs do not fit {Path(path).name}: {exc}.") from exc
    except AclError as exc:
        if str(getattr(exc, "call", "")).startswith(_ENVIRONMENT_CALLS):
            raise NpuUnavailable(f"NPU {device_id} cannot be used here: {exc}.") from exc
        raise OmRunFailed(f"Running {Path(path).name} on NPU {device_id} failed: {exc}.") from exc


def match_outputs(
    wanted: list[str], outputs: dict[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], str]:
    """``outputs`` of an OM (in the OM's order) keyed by the ``wanted`` ONNX output names.

    Uses :func:`~model_store.backends.acl.model.map_om_outputs`, the rule the ``acl``
    Triton backend applies at load, so verification passes only what will serve.

    Returns:
        The arrays by wanted name, and a note ("" unless matched by position).

    Raises:
        OmOutputMismatch: The OM's outputs cannot be matched to ``wanted``.
    """
    names = list(outputs)
    try:
        indices, note = map_om_outputs(names, wanted, side="source model")
    except OutputNameError as exc:
        raise OmOutputMismatch(f"{exc}.") from exc
    if note:
        log.warning("OM outputs: %s", note)
    return {
        name: np.asarray(outputs[names[i]]) for name, i in zip(wanted, indices, strict=True)
    }, note
