"""The ID token's checks (OpenID Connect Core 1.0, 3.1.3.7), each hostile case refused.

Tokens are made here with a key of the "provider" and with one of an attacker; the checks are
``webapp.sso.oidc.validate_id_token``, as the callback runs them.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from webapp.sso.oidc import SignInRefused, check_issuer_url, validate_id_token

ISSUER = "https://id.example.org/realms/hub"
CLIENT = "triton-hub"
NONCE = "n-0S6_WzA2Mj"
PROVIDER_KEY = RSAKey.generate_key(2048, parameters={"kid": "provider"})
ATTACKER_KEY = RSAKey.generate_key(2048, parameters={"kid": "provider"})
PUBLISHED = KeySet.import_key_set(KeySet([PROVIDER_KEY]).as_dict(private=False))


def _claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    claims = {"iss": ISSUER, "sub": "248289761001", "aud": CLIENT, "exp": now + 300,
              "iat": now, "nonce": NONCE, "groups": ["ml-ops"]}  # fmt: skip
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not None}


def _signed(key: RSAKey = PROVIDER_KEY, alg: str = "RS256", **changes: Any) -> str:
    return jwt.encode({"alg": alg, "kid": "provider"}, _claims(**changes), key)


def _check(token: str) -> dict[str, Any]:
    return validate_id_token(token, PUBLISHED, issuer=ISSUER, client_id=CLIENT, nonce=NONCE)


def test_a_good_token_gives_its_claims() -> None:
    claims = _check(_signed())
    assert claims["sub"] == "248289761001" and claims["groups"] == ["ml-ops"]


def _b64(part: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=").decode()


@pytest.mark.parametrize(
    ("token", "code"),
    [
        pytest.param(lambda: _signed(ATTACKER_KEY), "oidc_bad_signature", id="forged"),
        pytest.param(lambda: f"{_b64({'alg': 'none'})}.{_b64(_claims())}.", "oidc_bad_signature",
                     id="alg-none"),
        pytest.param(lambda: _signed()[:-8] + "AAAAAAAA", "oidc_bad_signature", id="tampered"),
        pytest.param(lambda: "not.a.token", "oidc_bad_signature", id="garbage"),
        pytest.param(lambda: _signed(exp=int(time.time()) - 120), "oidc_bad_claims",
                     id="expired"),
        pytest.param(lambda: _signed(iss="https://evil.example.org"), "oidc_bad_claims",
                     id="other-issuer"),
        pytest.param(lambda: _signed(nonce="replayed"), "oidc_bad_claims", id="nonce-mismatch"),
        pytest.param(lambda: _signed(nonce=None), "oidc_bad_claims", id="no-nonce"),
        pytest.param(lambda: _signed(aud="another-app"), "oidc_bad_audience", id="audience"),
        pytest.param(lambda: _signed(aud=[CLIENT, "another-app"]), "oidc_bad_audience",
                     id="shared-audience-without-azp"),
    ],
)  # fmt: skip
def test_a_hostile_token_is_refused(token: Any, code: str) -> None:
    with pytest.raises(SignInRefused) as refused:
        _check(token())
    assert refused.value.code == code, refused.value.detail


def test_an_hmac_token_signed_with_the_public_key_is_refused() -> None:
    """Algorithm confusion: HS256 keyed with the provider's public key (made by hand: joserfc
    itself refuses to make such a key)."""
    import hashlib
    import hmac

    public_pem = PROVIDER_KEY.as_pem(private=False)
    signing_input = f"{_b64({'alg': 'HS256', 'kid': 'provider'})}.{_b64(_claims())}"
    mac = hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()
    forged = f"{signing_input}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"
    with pytest.raises(SignInRefused) as refused:
        _check(forged)
    assert refused.value.code == "oidc_bad_signature"


@pytest.mark.parametrize(
    ("url", "ok"),
    [("https://id.example.org", True), ("http://127.0.0.1:9400", True),
     ("http://localhost:9400", True), ("http://[::1]:9400", True),
     ("http://id.example.org", False), ("ftp://id.example.org", False),
     ("file:///etc/passwd", False), ("https://", False)],
)  # fmt: skip
def test_only_https_or_loopback_http_issuers_are_accepted(url: str, ok: bool) -> None:
    if ok:
        assert check_issuer_url(url) == url
    else:
        with pytest.raises(ValueError, match="OIDC_ISSUER"):
            check_issuer_url(url)
