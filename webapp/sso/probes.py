"""The sign-in probes the Diagnostics page runs (model_store/diagnostics/sign_in_checks.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypedDict

from django.conf import settings

from webapp.sso.oidc import SignInRefused, keys, metadata
from webapp.sso.settings import ldap_enabled, oidc_provider


def oidc_probe() -> Callable[[], str] | None:
    provider = oidc_provider()
    if provider is None:
        return None

    def probe() -> str:
        try:
            document = metadata(provider, fresh=True)
            key_set = keys(provider, document, fresh=True)
        except SignInRefused as refused:
            raise RuntimeError(refused.detail) from None
        return f"discovery document and {len(key_set.keys)} signing key(s)"

    return probe


def ldap_probe() -> Callable[[], str] | None:
    if not ldap_enabled():
        return None

    def probe() -> str:
        from webapp.sso import directory

        try:
            return directory.probe()
        except Exception as exc:
            raise RuntimeError(directory.describe_error(exc)) from None

    return probe


class SignInContext(TypedDict):
    oidc_issuer: str
    oidc_probe: Callable[[], str] | None
    ldap_uri: str
    ldap_probe: Callable[[], str] | None


def sign_in_context() -> SignInContext:
    """The DiagnosticsContext fields of the sign-in checks."""
    return {
        "oidc_issuer": settings.OIDC_ISSUER,
        "oidc_probe": oidc_probe(),
        "ldap_uri": settings.LDAP_SERVER_URI,
        "ldap_probe": ldap_probe(),
    }
