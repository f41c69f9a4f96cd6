"""Diagnostics checks of single sign-on: the OpenID Connect provider's discovery document and
keys, and the LDAP service account's bind.

Each is a probe the web layer hands in through the context (``oidc_probe``, ``ldap_probe``):
it returns what it found in a line, or raises saying what failed. ``None`` means that sign-in
is not set up, which is not a fault: most hubs sign people in with local accounts only.
"""

from __future__ import annotations

from collections.abc import Callable

from model_store.diagnostics.context import Check, DiagnosticsContext, make_check
from model_store.text import Said, say


def _probed(
    cid: str,
    probe: Callable[[], str] | None,
    not_set: Said,
    failed: Callable[[str], Said],
    advice: Said,
    answered: Callable[[str], Said],
) -> Check:
    """A sign-in check from its probe: not applicable without one, failing with the probe's
    own words when it raises, ok with what it found."""
    if probe is None:
        return make_check(cid, "not_applicable", not_set)
    try:
        found = probe()
    except Exception as exc:
        return make_check(cid, "failing", failed(str(exc)[:300]), advice)
    return make_check(cid, "ok", answered(found))


def check_oidc_discovery(ctx: DiagnosticsContext) -> Check:
    return _probed(
        "oidc_discovery",
        ctx.oidc_probe,
        say("OpenID Connect sign-in is not set up (OIDC_ISSUER is empty)."),
        lambda error: say("The provider at %(issuer)s did not give a usable discovery document "
                          "or keys: %(error)s", issuer=ctx.oidc_issuer, error=error),
        say("Check OIDC_ISSUER (its /.well-known/openid-configuration must name exactly "
            "this issuer, with https endpoints) and that this host reaches the provider. "
            "Until then the sign-in page says the provider is unavailable; local accounts "
            "still work."),
        lambda found: say("The provider at %(issuer)s answers: %(found)s.",
                          issuer=ctx.oidc_issuer, found=found),
    )  # fmt: skip


def check_ldap_bind(ctx: DiagnosticsContext) -> Check:
    return _probed(
        "ldap_bind",
        ctx.ldap_probe,
        say("LDAP sign-in is not set up (LDAP_SERVER_URI is empty)."),
        lambda error: say("The directory at %(uri)s refused or did not answer the service "
                          "account's bind and search: %(error)s", uri=ctx.ldap_uri, error=error),
        say("Check LDAP_SERVER_URI, LDAP_BIND_DN and LDAP_BIND_PASSWORD, "
            "LDAP_USER_SEARCH_BASE, and for TLS LDAP_CA_FILE. Until then LDAP users cannot "
            "sign in, and their API tokens stop 15 minutes after the last re-check; local "
            "accounts still work."),
        lambda dn: say("The directory at %(uri)s accepted the bind as %(dn)s and the user "
                       "search base exists.", uri=ctx.ldap_uri, dn=dn),
    )  # fmt: skip
