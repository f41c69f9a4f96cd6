"""Errors raised while starting or talking to a Triton Inference Server.

Three situations matter to callers, and they want different reactions:

* ``TritonUnavailable``: nothing answered (not started, crashed, wrong address,
  timed out). The dashboard shows "Triton is down" and may retry later.
* ``TritonRequestError``: Triton answered and refused (bad input, unknown model,
  failed load). Triton's own message is kept verbatim because it is usually the
  most precise explanation the operator will get. ``TritonAccessDenied`` is the
  refusal of a restricted call made without the hub's key.
* ``TritonStartError``: our embedded launcher could not bring a server up; the
  message carries the tail of the server log.
"""

from __future__ import annotations


class TritonRuntimeError(Exception):
    """Base class for everything in ``model_store.runtime``."""

    code = "triton_error"


class TritonUnavailable(TritonRuntimeError):
    """Triton could not be reached (not started, connection refused, timeout)."""

    code = "triton_unavailable"


class TritonRequestError(TritonRuntimeError):
    """Triton answered a request with an error.

    ``status`` is what the transport reported (an HTTP status such as ``"400"``
    or a gRPC code such as ``"StatusCode.INVALID_ARGUMENT"``), ``triton_message``
    is Triton's own error text, unchanged.
    """

    code = "triton_request_failed"

    def __init__(self, message: str, *, status: str | None = None, triton_message: str = ""):
        super().__init__(message)
        self.status = status
        self.triton_message = triton_message or message


class TritonAccessDenied(TritonRequestError):
    """Triton refused a restricted call (repository index, load, unload) for want of the key.

    Triton answered, so it is a ``TritonRequestError``; its own type because the remedy is
    configuration, not the request: the hub's ``TRITON_API_KEY`` is missing or is not the
    key Triton was started with (``model_store.runtime.access``).
    """

    code = "triton_access_denied"


class TritonStartError(TritonRuntimeError):
    """The embedded ``tritonserver`` did not start or did not become ready.

    ``headline`` is the cause in one line a user understands (the first line of the
    message); the rest of the message is the evidence (the server log).
    """

    code = "triton_start_failed"

    def __init__(self, message: str, *, headline: str | None = None):
        super().__init__(message)
        first_line = message.splitlines()[0] if message else "Triton did not start"
        self.headline = headline or first_line
