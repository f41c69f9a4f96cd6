"""The sign-in settings, checked once at start-up, and read from here by the rest of sso."""

from __future__ import annotations

import functools

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from webapp.sso.oidc import Provider, check_issuer_url
from webapp.sso.role_map import RoleMap, RoleMapError, parse

#: LDAP_GROUP_TYPE's values (webapp/sso/directory.py says what each means).
LDAP_GROUP_TYPES = ("groupOfNames", "groupOfUniqueNames", "posixGroup", "activeDirectory")
LOCAL_SIGN_IN_VALUES = ("everyone", "admins")


def checked_settings() -> None:
    """Raises ImproperlyConfigured for a sign-in setting that cannot be used."""
    role_map()
    oidc_provider()
    check_ldap_settings()
    if settings.LOCAL_SIGN_IN not in LOCAL_SIGN_IN_VALUES:
        raise ImproperlyConfigured(
            f"LOCAL_SIGN_IN is {settings.LOCAL_SIGN_IN!r}: use everyone or admins."
        )


def ldap_enabled() -> bool:
    return bool(settings.LDAP_SERVER_URI)


def check_ldap_settings() -> None:
    """With LDAP_SERVER_URI set: the settings a sign-in needs, and python-ldap installed."""
    uri = settings.LDAP_SERVER_URI
    if not uri:
        return
    if not uri.startswith(("ldap://", "ldaps://")):
        raise ImproperlyConfigured(f"LDAP_SERVER_URI {uri!r} must start with ldap:// or ldaps://.")
    if uri.startswith("ldaps://") and settings.LDAP_START_TLS:
        raise ImproperlyConfigured("LDAP_START_TLS is for ldap://; ldaps:// is TLS already.")
    if not settings.LDAP_USER_SEARCH_BASE:
        raise ImproperlyConfigured("LDAP_SERVER_URI is set: LDAP_USER_SEARCH_BASE must be too.")
    user_filter = settings.LDAP_USER_FILTER
    if "%(user)s" not in user_filter or not (
        user_filter.startswith("(") and user_filter.endswith(")")
    ):
        raise ImproperlyConfigured(
            f"LDAP_USER_FILTER {user_filter!r} must be a filter in parentheses holding "
            "%(user)s, e.g. (uid=%(user)s)."
        )
    try:
        user_filter % {"user": "x"}
    except (KeyError, ValueError, TypeError):
        raise ImproperlyConfigured(
            f"LDAP_USER_FILTER {user_filter!r}: %(user)s is the only placeholder it may hold "
            "(write a literal % as %%)."
        ) from None
    if settings.LDAP_GROUP_TYPE not in LDAP_GROUP_TYPES:
        raise ImproperlyConfigured(
            f"LDAP_GROUP_TYPE is {settings.LDAP_GROUP_TYPE!r}: use one of "
            + ", ".join(LDAP_GROUP_TYPES)
            + "."
        )
    try:
        import django_auth_ldap  # noqa: F401
        import ldap  # noqa: F401
    except ImportError:
        raise ImproperlyConfigured(
            "LDAP_SERVER_URI is set, but python-ldap and django-auth-ldap are not installed: "
            "install OpenLDAP's headers (Debian: apt install libldap2-dev libsasl2-dev), then "
            "pip install -r requirements-ldap.txt (docs/sso.md#ldap)."
        ) from None


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
