"""What the sign-in page offers besides the local form (a template context processor)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from webapp.sso.settings import ldap_enabled, oidc_provider


def sign_in_options(request: HttpRequest) -> dict[str, Any]:
    provider = oidc_provider()
    return {
        "oidc_provider_name": provider.name if provider is not None else "",
        "ldap_sign_in": ldap_enabled(),
    }
