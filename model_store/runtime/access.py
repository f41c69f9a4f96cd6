"""Who may change what Triton serves: its restricted APIs and the hub's key (security finding 14).

Anyone who reaches Triton's HTTP or gRPC port could otherwise list the repository and load or
unload models. Triton can refuse such calls itself: started with

    --http-restricted-api=model-repository,trace,logging:triton-hub-key=<key>
    --grpc-restricted-protocol=model-repository,trace,logging:triton-hub-key=<key>

it answers those groups only to requests carrying the header ``triton-hub-key: <key>`` (HTTP
403 otherwise; over gRPC the metadata key is ``triton-grpc-protocol-triton-hub-key`` and a
refusal comes back as UNAVAILABLE). Triton 2.51 wants ``<apis>:<key>=<value>``, with a colon,
although its ``--help`` text shows a comma; it rejects the comma form as a bad option.

What is restricted, and why:

* ``model-repository`` (index, load, unload): only the hub decides what is served;
* ``trace`` and ``logging``: server-wide settings any client could change (log verbosity,
  tracing), which the hub never uses; operators can still call them with the key.

What stays open, because clients need it and it changes nothing: ``inference``, ``health``,
``metadata``, ``model-config`` (perf_analyzer and client libraries read the config to build
requests), ``statistics`` and ``shared-memory`` (zero-copy inference for clients on Triton's
own host).

The header name is fixed; the value is the secret. Nothing here logs it.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence

#: The header that carries the hub's key on restricted calls (HTTP header names are
#: case-insensitive; gRPC metadata keys must be lower case).
API_KEY_HEADER = "triton-hub-key"
#: Triton looks for the gRPC key under this metadata key: it prefixes the configured name.
GRPC_API_KEY_HEADER = f"triton-grpc-protocol-{API_KEY_HEADER}"
#: The API groups only the hub may call.
RESTRICTED_APIS = ("model-repository", "trace", "logging")
#: The command-line options that carry the key.
RESTRICTED_OPTIONS = ("--http-restricted-api", "--grpc-restricted-protocol")

#: What Triton answers when a restricted call lacks the key (HTTP, then gRPC).
_REFUSALS = ("This API is restricted", "This protocol is restricted")

#: Hex, base64 and URL-safe base64 all fit; nothing a header or Triton's parser could mangle.
_KEY_PATTERN = re.compile(r"[A-Za-z0-9._~+/=-]+")
MIN_KEY_LENGTH = 16


def new_api_key() -> str:
    """A fresh random key (256 bits, URL-safe characters)."""
    return secrets.token_urlsafe(32)


def validate_api_key(key: str) -> str:
    """``key`` itself if it can be used as the hub's key; ``ValueError`` saying why not.

    The message never repeats the key.
    """
    if len(key) < MIN_KEY_LENGTH:
        raise ValueError(
            f"the Triton API key is too short ({len(key)} characters; at least "
            f"{MIN_KEY_LENGTH}, e.g. `openssl rand -hex 32`)"
        )
    if not _KEY_PATTERN.fullmatch(key):
        raise ValueError(
            "the Triton API key may hold only letters, digits and . _ ~ + / = - "
            "(e.g. `openssl rand -hex 32`)"
        )
    return key


def restricted_api_args(key: str) -> list[str]:
    """The ``tritonserver`` options that restrict :data:`RESTRICTED_APIS` to ``key``."""
    setting = f"{','.join(RESTRICTED_APIS)}:{API_KEY_HEADER}={validate_api_key(key)}"
    return [f"{option}={setting}" for option in RESTRICTED_OPTIONS]


def redact_args(argv: Sequence[str]) -> list[str]:
    """``argv`` with the key in the restricted-API options replaced by ``***``, for logs."""
    return [_redact(str(arg)) for arg in argv]


def _redact(arg: str) -> str:
    option, sep, setting = arg.partition("=")
    if not sep or option not in RESTRICTED_OPTIONS:
        return arg
    apis, colon, header_and_key = setting.partition(":")
    header = header_and_key.partition("=")[0] if colon else ""
    return f"{option}={apis}:{header}=***" if header else f"{option}=***"


def is_refusal(message: str) -> bool:
    """True when Triton's error ``message`` says a restricted API was called without the key."""
    return any(phrase in message for phrase in _REFUSALS)
