"""The sign-in settings, checked once at start-up, and read from here by the rest of sso."""

from __future__ import annotations

import functools

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from webapp.sso.oidc import Provider, check_issuer_url
from webapp.sso.role_map import RoleMap, RoleMapError, parse


def checked_settings() -> None:
    """Raises ImproperlyConfigured for a sign-in setting that cannot be used."""
    role_map()
    oidc_provider()


def role_map() -> RoleMap:
    return _role_map(settings.SSO_ROLE_MAP)


@functools.lru_cache(maxsize=8)
def _role_map(text: str) -> RoleMap:
    try:
        return parse(text)
    except RoleMapError as exc:
        raise ImproperlyConfigured(str(exc)) from None


def oidc_provider() -> Provider | None:
    """The OpenID Connect provider, or None when OIDC_ISSUER is not set (read each time, so
    a changed setting, as tests make, is never hidden by a cache)."""
    issuer = settings.OIDC_ISSUER
    if not issuer:
        return None
    try:
        check_issuer_url(issuer)
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from None
    if not settings.OIDC_CLIENT_ID:
        raise ImproperlyConfigured("OIDC_ISSUER is set: OIDC_CLIENT_ID must be set too.")
    if "openid" not in settings.OIDC_SCOPES.split():
        raise ImproperlyConfigured("OIDC_SCOPES must include openid.")
    return Provider(
        issuer=issuer,
        client_id=settings.OIDC_CLIENT_ID,
        client_secret=settings.OIDC_CLIENT_SECRET,
        scopes=settings.OIDC_SCOPES,
        groups_claim=settings.OIDC_GROUPS_CLAIM,
        name=settings.OIDC_PROVIDER_NAME,
        timeout_s=float(settings.OIDC_TIMEOUT_SECONDS),
    )
