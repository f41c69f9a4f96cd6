"""The hub's authentication backends, in the order ``AUTHENTICATION_BACKENDS`` lists them.

- :class:`LocalBackend`: a local account's password, as Django checks it, unless
  ``LOCAL_SIGN_IN`` is ``admins`` and the account is neither an admin nor named in
  ``LOCAL_SIGN_IN_ACCOUNTS`` (the break-glass account). Its sessions end too when that is so.
- :class:`LdapBackend`: the same form through the LDAP directory, when ``LDAP_SERVER_URI`` is
  set (:mod:`webapp.sso.directory`, imported only then: python-ldap needs OpenLDAP's library).
- :class:`DirectoryBackend`: people who signed in through OpenID Connect. It never checks a
  password: :mod:`webapp.sso.views` calls ``authenticate(request, identity=...)`` once the
  provider's answer checked out, so Django's sign-in machinery (the session,
  ``user_logged_in``, django-axes' reset) runs as for a local account.

A backend that refuses for a reason the person should read (local sign-in off, the directory
not answering) leaves it on the request; the sign-in form says it (:mod:`webapp.sso.forms`).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.backends import BaseBackend, ModelBackend
from django.contrib.auth.models import User
from django.utils import timezone

from webapp.accounts.roles import Role, role_of
from webapp.sso.tokens import vouched_until


def local_sign_in_allowed(user: Any) -> bool:
    """May ``user`` sign in with a local password under ``LOCAL_SIGN_IN``?"""
    if settings.LOCAL_SIGN_IN != "admins":
        return True
    if user.get_username() in settings.LOCAL_SIGN_IN_ACCOUNTS:
        return True
    return bool(user.is_superuser) or role_of(user) is Role.ADMIN


class LocalBackend(ModelBackend):
    def authenticate(
        self, request: Any, username: str | None = None, password: str | None = None, **kw: Any
    ) -> User | None:
        user = super().authenticate(request, username=username, password=password, **kw)
        if user is None and request is not None and settings.LOCAL_SIGN_IN == "admins":
            # Refused by the policy with the right password? Then saying why is no leak, and
            # spares a call to the helpdesk (the password is checked once more, only here).
            found = User.objects.filter(username=username).first() if username else None
            if (
                found is not None
                and found.is_active
                and found.check_password(password)
                and not local_sign_in_allowed(found)
            ):
                request.sso_local_refused = True
        return user

    def user_can_authenticate(self, user: Any) -> bool:
        # Also read for each request of a session: turning local sign-in off ends them.
        return super().user_can_authenticate(user) and (
            local_sign_in_allowed(user) or _is_directory_user(user)
        )


def _is_directory_user(user: Any) -> bool:
    return hasattr(user, "sso_identity")


class LdapBackend(BaseBackend):
    def authenticate(
        self, request: Any, username: str | None = None, password: str | None = None, **kw: Any
    ) -> User | None:
        if not settings.LDAP_SERVER_URI or username is None or password is None:
            return None
        from webapp.sso.directory import HubLDAPBackend

        user = HubLDAPBackend().authenticate(request, username=username, password=password)
        if user is not None and request is not None:
            request.sso_source = "ldap"
        return user if isinstance(user, User) else None

    def get_user(self, user_id: int) -> User | None:
        """The session's user while the directory vouches for them: someone the re-check no
        longer finds loses an open session when their API tokens stop (webapp/sso/tokens.py)."""
        user = _active_user(user_id)
        if user is None:
            return None
        until = vouched_until(user)
        return user if until is None or until > timezone.now() else None


class DirectoryBackend(BaseBackend):
    def authenticate(self, request: Any, identity: Any = None, **kwargs: Any) -> User | None:
        user = getattr(identity, "user", None)
        return user if isinstance(user, User) and user.is_active else None

    def get_user(self, user_id: int) -> User | None:
        return _active_user(user_id)


def _active_user(user_id: int) -> User | None:
    user = User.objects.filter(pk=user_id).first()
    return user if user is not None and user.is_active else None
