"""Diagnostics checks of single sign-on: the OpenID Connect provider's discovery document and
keys, and the LDAP service account's bind.

Each is a probe the web layer hands in through the context (``oidc_probe``, ``ldap_probe``):
it returns what it found in a line, or raises saying what failed. ``None`` means that sign-in
is not set up, which is not a fault: most hubs sign people in with local accounts only.
"""

from __future__ import annotations

from model_store.diagnostics.context import Check, DiagnosticsContext, make_check
from model_store.text import say


def check_oidc_discovery(ctx: DiagnosticsContext) -> Check:
    if ctx.oidc_probe is None:
        return make_check(
            "oidc_discovery",
            "not_applicable",
            say("OpenID Connect sign-in is not set up (OIDC_ISSUER is empty)."),
        )
    try:
        found = ctx.oidc_probe()
    except Exception as exc:
        return make_check(
            "oidc_discovery",
            "failing",
            say("The provider at %(issuer)s did not give a usable discovery document or keys: "
                "%(error)s", issuer=ctx.oidc_issuer, error=str(exc)[:300]),
            say("Check OIDC_ISSUER (its /.well-known/openid-configuration must name exactly "
                "this issuer, with https endpoints) and that this host reaches the provider. "
                "Until then the sign-in page says the provider is unavailable; local accounts "
                "still work."),
        )  # fmt: skip
    return make_check(
        "oidc_discovery",
        "ok",
        say("The provider at %(issuer)s answers: %(found)s.", issuer=ctx.oidc_issuer, found=found),
    )


def check_ldap_bind(ctx: DiagnosticsContext) -> Check:
    if ctx.ldap_probe is None:
        return make_check(
            "ldap_bind",
            "not_applicable",
            say("LDAP sign-in is not set up (LDAP_SERVER_URI is empty)."),
        )
    try:
        bound_as = ctx.ldap_probe()
    except Exception as exc:
        return make_check(
            "ldap_bind",
            "failing",
            say("The directory at %(uri)s refused or did not answer the service account's bind "
                "and search: %(error)s", uri=ctx.ldap_uri, error=str(exc)[:300]),
            say("Check LDAP_SERVER_URI, LDAP_BIND_DN and LDAP_BIND_PASSWORD, "
                "LDAP_USER_SEARCH_BASE, and for TLS LDAP_CA_FILE. Until then LDAP users cannot "
                "sign in, and their API tokens stop 15 minutes after the last re-check; local "
                "accounts still work."),
        )  # fmt: skip
    return make_check(
        "ldap_bind",
        "ok",
        say("The directory at %(uri)s accepted the bind as %(dn)s and the user search base "
            "exists.", uri=ctx.ldap_uri, dn=bound_as),
    )  # fmt: skip
