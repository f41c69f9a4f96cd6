from __future__ import annotations

import hashlib
import secrets
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from webapp.access_epoch import WatchedQuerySet

TOKEN_PREFIX = "tmh_"  # noqa: S105 (a recognisable prefix, not a secret)


def hash_token(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiTokenQuerySet(WatchedQuerySet["ApiToken"]):
    def for_key(self, key: str) -> ApiToken | None:
        """The live token with this key (not revoked; expired ones too: the caller says so)."""
        return (
            self.select_related("user")
            .filter(key_hash=hash_token(key), user__is_active=True, revoked__isnull=True)
            .first()
        )

    def live(self) -> ApiTokenQuerySet:
        return self.filter(revoked__isnull=True)


class ApiToken(models.Model):
    """An API token. Only its hash is stored: the key is shown once, when it is created.

    ``scope`` caps what the token may do below its owner's role (empty: the owner's role, as
    tokens made before scopes were; the owner's role still caps it if it is lowered later).
    ``expires`` empty means no expiry (tokens made before expiry existed); the page offers to
    set one. A revoked token stays as a record and is refused from that moment on.
    """

    class Scope(models.TextChoices):
        VIEWER = "viewer", _("viewer (read only)")
        OPERATOR = "operator", _("operator (upload, compile, serve)")
        ADMIN = "admin", _("admin")

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tokens"
    )
    name = models.CharField(max_length=100, default="api")
    key_hash = models.CharField(max_length=64, unique=True)
    key_prefix = models.CharField(
        max_length=12, help_text=_("The first characters, to recognise it.")
    )
    # A role (Scope), or ``node:<name>`` for a node token (webapp/nodes/tokens.py).
    scope = models.CharField(max_length=80, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    expires = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)
    # Inference calls a minute for this token alone, replacing its owner's INFER_RATE_PER_MINUTE
    # (a service's token carries production traffic); 0: no limit; empty: the owner's. Only an
    # admin sets it.
    rate_per_minute = models.PositiveIntegerField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.key_prefix}… ({self.user})"

    @classmethod
    def issue(
        cls,
        user: User,
        name: str = "api",
        *,
        scope: str = "",
        expires: datetime | None = None,
    ) -> tuple[ApiToken, str]:
        key = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(
            user=user,
            name=name,
            key_hash=hash_token(key),
            key_prefix=key[:12],
            scope=scope,
            expires=expires,
        )
        return token, key

    def is_expired(self, now: datetime | None = None) -> bool:
        return self.expires is not None and self.expires <= (now or timezone.now())

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.pk,
            "name": self.name,
            "prefix": self.key_prefix,
            "scope": self.scope or "owner's role",
            "created": self.created.isoformat(),
            "last_used": self.last_used.isoformat() if self.last_used else None,
            "expires": self.expires.isoformat() if self.expires else None,
            "expired": self.is_expired(),
            "rate_per_minute": self.rate_per_minute,
            "infer_rate_per_minute": self.infer_rate_per_minute,
        }

    @property
    def infer_rate_per_minute(self) -> int:
        """The inference calls a minute this token may make (0: no limit)."""
        if self.rate_per_minute is not None:
            return self.rate_per_minute
        return int(settings.INFER_RATE_PER_MINUTE)


class Preference(models.Model):
    """What one person chose for the pages they see; today only the language.

    The language is one of ``settings.LANGUAGES`` (empty: follow the browser). It applies to
    pages only; the API follows each request's ``Accept-Language`` (docs/i18n.md).
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="hub_preference"
    )
    language = models.CharField(max_length=16, blank=True)

    def __str__(self) -> str:
        return f"{self.user}: {self.language or 'browser language'}"
