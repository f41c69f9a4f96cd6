"""model_store.runtime.access: the flags that restrict Triton's repository API, and the key.

The behaviour against a real Triton is in tests/integration/test_triton_api_key.py; here the
pieces that must never leak the key or produce an option Triton 2.51 rejects.
"""

from __future__ import annotations

import pytest

from model_store.runtime.access import (
    API_KEY_HEADER,
    GRPC_API_KEY_HEADER,
    is_refusal,
    new_api_key,
    redact_args,
    restricted_api_args,
    validate_api_key,
)

KEY = "0123456789abcdef0123456789abcdef"


def test_the_flags_use_the_colon_form_triton_2_51_accepts() -> None:
    # `--http-restricted-api=<apis>,<key>=<value>` (the help text's comma) is a bad option there.
    assert restricted_api_args(KEY) == [
        f"--http-restricted-api=model-repository,trace,logging:triton-hub-key={KEY}",
        f"--grpc-restricted-protocol=model-repository,trace,logging:triton-hub-key={KEY}",
    ]
    assert API_KEY_HEADER == "triton-hub-key"
    assert GRPC_API_KEY_HEADER == "triton-grpc-protocol-triton-hub-key"


def test_redaction_keeps_the_options_readable_and_drops_the_key() -> None:
    argv = ["tritonserver", "--model-repository=/m", *restricted_api_args(KEY)]
    shown = redact_args(argv)
    assert KEY not in " ".join(shown)
    assert shown[:2] == argv[:2]
    assert shown[2] == "--http-restricted-api=model-repository,trace,logging:triton-hub-key=***"
    # A malformed option (no header name) is hidden whole rather than guessed at.
    assert redact_args([f"--grpc-restricted-protocol={KEY}"]) == ["--grpc-restricted-protocol=***"]


def test_generated_keys_are_long_random_and_valid() -> None:
    keys = {new_api_key() for _ in range(5)}
    assert len(keys) == 5
    assert all(len(k) >= 40 and validate_api_key(k) == k for k in keys)


@pytest.mark.parametrize(
    ("key", "why"),
    [("x7Q2", "too short"), ("has a space in it 0123", "only letters"), ("k" * 20 + ":,", "only")],
)
def test_unusable_keys_are_refused_without_repeating_them(key: str, why: str) -> None:
    with pytest.raises(ValueError, match=why) as refused:
        validate_api_key(key)
    assert key not in str(refused.value)


def test_hex_and_base64_keys_are_accepted() -> None:
    for key in ("ab" * 32, "q1Zx+/w9Ab3dEfGh7Jk=", "a.b~c_d-e" * 2):
        assert validate_api_key(key) == key


def test_triton_refusals_are_recognised_over_both_protocols() -> None:
    assert is_refusal("This API is restricted, expecting header 'triton-hub-key'")
    assert is_refusal(
        "This protocol is restricted, expecting header 'triton-grpc-protocol-triton-hub-key'"
    )
    assert not is_refusal("Request for unknown model: 'x' is not found")
