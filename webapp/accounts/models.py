from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.contrib.auth.models import User
from django.db import models

TOKEN_PREFIX = "tmh_"  # noqa: S105 (a recognisable prefix, not a secret)


def hash_token(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def for_key(self, key: str) -> ApiToken | None:
        return (
            self.select_related("user")
            .filter(key_hash=hash_token(key), user__is_active=True)
            .first()
        )


class ApiToken(models.Model):
    """An API token. Only its hash is stored: the key is shown once, when it is created."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tokens"
    )
    name = models.CharField(max_length=100, default="api")
    key_hash = models.CharField(max_length=64, unique=True)
    key_prefix = models.CharField(max_length=12, help_text="The first characters, to recognise it.")
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.key_prefix}… ({self.user})"

    @classmethod
    def issue(cls, user: User, name: str = "api") -> tuple[ApiToken, str]:
        key = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(
            user=user, name=name, key_hash=hash_token(key), key_prefix=key[:12]
        )
        return token, key
