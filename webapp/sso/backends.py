"""The authentication backend of people who signed in through a directory.

It never checks a password: :mod:`webapp.sso.views` calls ``authenticate(request,
identity=...)`` once the provider's answer checked out, so Django's sign-in machinery (the
session, ``user_logged_in``, django-axes' reset) runs as for a local account.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.backends import BaseBackend
from django.contrib.auth.models import User


class DirectoryBackend(BaseBackend):
    def authenticate(self, request: Any, identity: Any = None, **kwargs: Any) -> User | None:
        user = getattr(identity, "user", None)
        return user if isinstance(user, User) and user.is_active else None

    def get_user(self, user_id: int) -> User | None:
        user = User.objects.filter(pk=user_id).first()
        return user if user is not None and user.is_active else None
