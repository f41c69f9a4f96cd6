"""OpenID Connect sign-in: the authorization code flow with PKCE, as the provider's discovery
document describes it (docs/sso.md#openid-connect).

What is checked, and where:

* the discovery document's ``issuer`` is exactly ``OIDC_ISSUER`` (OpenID Connect Discovery
  1.0, section 4.3), and every endpoint it names is ``https://`` (``http://`` only on a
  loopback address, for tests);
* ``state`` is one we made for this browser's session, used once, at most 10 minutes old;
* the ID token is signed with one of the provider's keys (its ``jwks_uri``) by an allowed
  algorithm (never ``none``; joserfc refuses any algorithm not listed), and its ``iss``,
  ``aud`` (our client id), ``exp``, ``iat`` and ``nonce`` are what they must be (OpenID Connect
  Core 1.0, section 3.1.3.7);
* the code is exchanged with the PKCE verifier (RFC 7636, S256), so a stolen code is useless.

Every refusal is a :class:`SignInRefused` with a sentence for the page and the detail for the
log. HTTP calls are bounded in time and size. No Django models here; sessions and users are
the views' and :mod:`~webapp.sso.accounts`'.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import secrets
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from authlib.common.security import generate_token
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from model_store.text import Message, say

#: Signing algorithms accepted for ID tokens (the provider's discovery may list fewer).
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
#: A sign-in must come back within this long after it started.
PENDING_MAX_AGE_S = 600
#: Clock skew allowed on ``exp`` and ``iat``.
LEEWAY_S = 60
#: The discovery document and keys are read again after this long (keys rotate).
METADATA_MAX_AGE_S = 300
_MAX_BODY = 1 << 20


class SignInRefused(Exception):
    """A sign-in that must not go on: ``message`` for the page, ``detail`` for the log."""

    def __init__(self, message: Message, detail: str, code: str = "oidc_refused") -> None:
        super().__init__(detail)
        self.message, self.detail, self.code = message, detail, code


@dataclass(frozen=True)
class Provider:
    issuer: str
    client_id: str
    client_secret: str
    scopes: str = "openid profile email"
    groups_claim: str = "groups"
    name: str = "OpenID Connect"
    timeout_s: float = 10.0


@dataclass
class Pending:
    """What a started sign-in keeps in the browser's session until the provider sends it back."""

    state: str
    nonce: str
    verifier: str
    started: float
    next: str = "/"

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "nonce": self.nonce, "verifier": self.verifier,
                "started": self.started, "next": self.next}  # fmt: skip

    @classmethod
    def from_dict(cls, raw: object) -> Pending | None:
        if not isinstance(raw, dict):
            return None
        try:
            return cls(str(raw["state"]), str(raw["nonce"]), str(raw["verifier"]),
                       float(raw["started"]), str(raw.get("next") or "/"))  # fmt: skip
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class SignedIn:
    """Who the provider says signed in."""

    subject: str
    username: str
    email: str
    name: str
    groups: tuple[str, ...]
    claims: dict[str, Any] = field(repr=False)


def check_issuer_url(url: str, what: str = "OIDC_ISSUER") -> str:
    """``url`` if it may be trusted as an OpenID Connect address: ``https://``, or ``http://``
    on a loopback address. Raises ValueError naming ``what`` otherwise."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return url
    if parts.scheme == "http" and parts.hostname and _is_loopback(parts.hostname):
        return url
    raise ValueError(
        f"{what}={url!r} must be an https:// address (http:// only on a loopback address)."
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# -- the provider's documents --------------------------------------------------------------------
_cache: dict[str, tuple[float, Any]] = {}
_cache_lock = threading.Lock()


def metadata(provider: Provider, *, fresh: bool = False) -> dict[str, Any]:
    """The provider's discovery document, checked (cached for a few minutes).

    Raises:
        SignInRefused: The provider does not answer, or its document is not one we may trust.
    """
    url = provider.issuer.rstrip("/") + "/.well-known/openid-configuration"
    document = _cached(url, fresh, lambda: _get_json(url, provider.timeout_s, "discovery"))
    if not isinstance(document, dict) or document.get("issuer") != provider.issuer:
        raise SignInRefused(
            say("The sign-in provider's discovery document names another issuer."),
            f"discovery at {url} names issuer {document.get('issuer') if isinstance(document, dict) else None!r}, "  # noqa: E501
            f"not {provider.issuer!r}",
            "oidc_issuer_mismatch",
        )
    for key in ("authorization_endpoint", "token_endpoint", "jwks_uri", "userinfo_endpoint"):
        if key == "userinfo_endpoint" and not document.get(key):
            continue  # optional
        try:
            check_issuer_url(str(document.get(key) or ""), key)
        except ValueError as exc:
            raise SignInRefused(
                say("The sign-in provider's discovery document is not usable."), str(exc),
                "oidc_bad_discovery",
            ) from None  # fmt: skip
    return document


def keys(provider: Provider, document: dict[str, Any], *, fresh: bool = False) -> KeySet:
    url = str(document["jwks_uri"])
    raw = _cached(url, fresh, lambda: _get_json(url, provider.timeout_s, "keys"))
    try:
        return KeySet.import_key_set(raw)
    except (JoseError, ValueError, TypeError, KeyError) as exc:
        raise SignInRefused(
            say("The sign-in provider's keys cannot be read."), f"jwks at {url}: {exc}",
            "oidc_bad_keys",
        ) from None  # fmt: skip


def _cached(url: str, fresh: bool, load: Any) -> Any:
    now = time.monotonic()
    with _cache_lock:
        kept = _cache.get(url)
    if kept is not None and not fresh and now - kept[0] < METADATA_MAX_AGE_S:
        return kept[1]
    value = load()
    with _cache_lock:
        _cache[url] = (now, value)
    return value


def forget_documents() -> None:
    with _cache_lock:
        _cache.clear()


# -- the flow ------------------------------------------------------------------------------------
def start(provider: Provider, redirect_uri: str, next_url: str = "/") -> tuple[str, Pending]:
    """The provider's authorization URL to send the browser to, and what to keep meanwhile."""
    document = metadata(provider)
    pending = Pending(
        state=generate_token(43), nonce=generate_token(43), verifier=generate_token(64),
        started=time.time(), next=next_url,
    )  # fmt: skip
    query = urllib.parse.urlencode(
        {
            "response_type": "code",
            "client_id": provider.client_id,
            "redirect_uri": redirect_uri,
            "scope": provider.scopes,
            "state": pending.state,
            "nonce": pending.nonce,
            "code_challenge": create_s256_code_challenge(pending.verifier),
            "code_challenge_method": "S256",
        }
    )
    endpoint = str(document["authorization_endpoint"])
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}", pending


def finish(
    provider: Provider, pending: Pending | None, params: dict[str, str], redirect_uri: str
) -> SignedIn:
    """Checks what the provider sent back, exchanges the code, checks the ID token.

    Raises:
        SignInRefused: Anything amiss; nothing was created.
    """
    state = params.get("state", "")
    if pending is None or not secrets.compare_digest(state.encode(), pending.state.encode()):
        raise SignInRefused(
            say("This sign-in link was already used or is not from this browser. Start again."),
            f"state {state[:12]!r}... unknown, used or from another session", "oidc_bad_state",
        )  # fmt: skip
    if time.time() - pending.started > PENDING_MAX_AGE_S:
        raise SignInRefused(say("This sign-in took too long. Start again."),
                            "sign-in older than 10 minutes", "oidc_expired")  # fmt: skip
    if params.get("error"):
        raise SignInRefused(
            say("The sign-in provider refused: %(error)s", error=params["error"][:100]),
            f"provider error {params['error'][:100]!r}: "
            f"{params.get('error_description', '')[:300]!r}",
            "oidc_provider_error",
        )  # fmt: skip
    code = params.get("code", "")
    if not code:
        raise SignInRefused(say("The sign-in provider sent no code."), "no code", "oidc_no_code")
    document = metadata(provider)
    tokens = _post_form(
        str(document["token_endpoint"]),
        {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
         "code_verifier": pending.verifier},
        provider,
    )  # fmt: skip
    id_token = tokens.get("id_token")
    if not isinstance(id_token, str):
        raise SignInRefused(say("The sign-in provider sent no ID token."), "no id_token",
                            "oidc_no_id_token")  # fmt: skip
    claims = validate_id_token(
        id_token, _keys_for(provider, document, id_token), issuer=provider.issuer,
        client_id=provider.client_id, nonce=pending.nonce,
    )  # fmt: skip
    groups = claims.get(provider.groups_claim)
    if groups is None and document.get("userinfo_endpoint") and tokens.get("access_token"):
        info = _get_json(
            str(document["userinfo_endpoint"]), provider.timeout_s, "userinfo",
            bearer=str(tokens["access_token"]),
        )  # fmt: skip
        if isinstance(info, dict) and info.get("sub") == claims["sub"]:
            claims = {**info, **claims}
            groups = info.get(provider.groups_claim)
    return SignedIn(
        subject=str(claims["sub"]),
        username=str(claims.get("preferred_username") or claims.get("email") or claims["sub"]),
        email=str(claims.get("email") or ""),
        name=str(claims.get("name") or ""),
        groups=_as_groups(groups),
        claims=claims,
    )


def validate_id_token(
    id_token: str,
    key_set: KeySet,
    *,
    issuer: str,
    client_id: str,
    nonce: str,
    now: float | None = None,
    algorithms: tuple[str, ...] = ALGORITHMS,
) -> dict[str, Any]:
    """The ID token's claims once its signature and claims check out.

    Raises:
        SignInRefused: Unsigned, badly signed, expired, for another client or issuer, or a
            nonce that is not this sign-in's.
    """
    try:
        token = jwt.decode(id_token, key_set, algorithms=list(algorithms))
    except (JoseError, ValueError, TypeError) as exc:
        raise SignInRefused(
            say("The sign-in provider's answer is not signed as it must be."),
            f"id_token signature: {type(exc).__name__}: {exc}", "oidc_bad_signature",
        ) from None  # fmt: skip
    claims = dict(token.claims)
    registry = jwt.JWTClaimsRegistry(
        now=int(now) if now is not None else None,
        leeway=LEEWAY_S,
        iss={"essential": True, "value": issuer},
        sub={"essential": True},
        exp={"essential": True},
        iat={"essential": True},
        nonce={"essential": True, "value": nonce},
    )
    try:
        registry.validate(claims)
    except JoseError as exc:
        raise SignInRefused(
            say("The sign-in provider's answer does not check out (%(why)s).",
                why=getattr(exc, "description", "") or exc.error),
            f"id_token claims: {type(exc).__name__}: {exc}", "oidc_bad_claims",
        ) from None  # fmt: skip
    audience = claims.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    if client_id not in audiences or (len(audiences) > 1 and claims.get("azp") != client_id):
        raise SignInRefused(
            say("The sign-in provider's answer is for another application."),
            f"id_token aud {audience!r}, azp {claims.get('azp')!r}, expected {client_id!r}",
            "oidc_bad_audience",
        )  # fmt: skip
    return claims


def _keys_for(provider: Provider, document: dict[str, Any], id_token: str) -> KeySet:
    """The provider's keys; read again once when the token names a key id we do not have
    (the provider rotated its keys)."""
    key_set = keys(provider, document)
    kid = _header(id_token).get("kid")
    if kid and all(k.kid != kid for k in key_set.keys):
        key_set = keys(provider, document, fresh=True)
    return key_set


def _header(id_token: str) -> dict[str, Any]:
    try:
        head = id_token.split(".", 1)[0]
        decoded = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, UnicodeDecodeError):
        return {}
    return decoded if isinstance(decoded, dict) else {}


def _as_groups(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(str(v) for v in value if isinstance(v, (str, int)))[:1000]
    return ()


# -- HTTP ----------------------------------------------------------------------------------------
def _get_json(url: str, timeout_s: float, what: str, bearer: str | None = None) -> Any:
    headers = {"Accept": "application/json"}
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    # Only addresses check_issuer_url passed reach here (https, or http on loopback).
    return _call(urllib.request.Request(url, headers=headers), timeout_s, what)  # noqa: S310


def _post_form(url: str, form: dict[str, str], provider: Provider) -> dict[str, Any]:
    basic = base64.b64encode(
        f"{urllib.parse.quote(provider.client_id, safe='')}:"
        f"{urllib.parse.quote(provider.client_secret, safe='')}".encode()
    ).decode()
    request = urllib.request.Request(  # noqa: S310 (a checked token_endpoint)
        url, data=urllib.parse.urlencode(form).encode(), method="POST",
        headers={"Content-Type": "application/x-www-form-urlencoded",
                 "Accept": "application/json", "Authorization": f"Basic {basic}"},
    )  # fmt: skip
    answer = _call(request, provider.timeout_s, "token")
    if not isinstance(answer, dict):
        raise SignInRefused(say("The sign-in provider's answer is not usable."),
                            "token answer is not an object", "oidc_bad_answer")  # fmt: skip
    return answer


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a provider's API answers; it does not send us elsewhere


_opener = urllib.request.build_opener(_NoRedirects)


def _call(request: urllib.request.Request, timeout_s: float, what: str) -> Any:
    try:
        with _opener.open(request, timeout=timeout_s) as answer:
            body = answer.read(_MAX_BODY + 1)
    except urllib.error.HTTPError as exc:
        detail = exc.read(2000).decode("utf-8", "replace")
        raise SignInRefused(
            say("The sign-in provider refused the request (HTTP %(status)s).", status=exc.code),
            f"{what} {request.full_url}: HTTP {exc.code} {detail[:500]!r}", "oidc_http_error",
        ) from None  # fmt: skip
    except (OSError, TimeoutError) as exc:
        raise SignInRefused(
            say("The sign-in provider does not answer. Try again later, or sign in with a "
                "local account."),
            f"{what} {request.full_url}: {exc}", "oidc_unreachable",
        ) from None  # fmt: skip
    if len(body) > _MAX_BODY:
        raise SignInRefused(say("The sign-in provider's answer is not usable."),
                            f"{what}: answer over 1 MiB", "oidc_bad_answer")  # fmt: skip
    try:
        return json.loads(body)
    except ValueError:
        raise SignInRefused(say("The sign-in provider's answer is not usable."),
                            f"{what}: not JSON", "oidc_bad_answer") from None  # fmt: skip
