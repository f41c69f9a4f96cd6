"""What the code in front of Django and the Django side must agree on, in a module of neither.

The ``/v2`` fast path and the Django path count the same limits in the same Redis keys and
pass the same headers to and from Triton; defining them once here lets the fast path import
them without importing Django (an import-linter contract in pyproject.toml keeps it so).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

# -- ASGI, as both sides of the edge speak it ---------------------------------------------------
Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# -- Triton's protocol on the hub ------------------------------------------------------------
PREFIX = "/v2"
#: The headers of Triton's answer a client needs (the binary extension's among them).
PASSED_BACK = ("Content-Type", "Inference-Header-Content-Length", "Content-Encoding")
#: The request headers passed to Triton.
PASSED_ON = ("Content-Type", "Inference-Header-Content-Length", "Accept", "Content-Encoding")

# -- Redis keys both paths count in ------------------------------------------------------------
#: Moves whenever who may infer, or where a model is served, changes (webapp/access_epoch.py).
EPOCH_KEY = "hub:access-epoch"
#: The infer rate limit's window; a user's count is ``rate_key(user, window)``.
WINDOW_SECONDS = 60


def rate_key(who: str, window: int) -> str:
    """The counter of ``who``'s calls in one window (``who``: ``infer:<user pk>``)."""
    return f"hub:rate:{who}:{window}"


def slow_key(user: str) -> str:
    """The set of ``user``'s requests that may hold a thread for seconds (slow_requests.py)."""
    return f"hub:slow:{user}"
