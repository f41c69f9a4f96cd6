"""How long an SSO user's API tokens keep working: ``SSO_TOKEN_MAX_AGE`` after the directory
last vouched for them (their last sign-in through it). A person removed from the directory
cannot sign in again, so their tokens stop by themselves within that time."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from webapp.sso.models import Identity


def vouched_until(user: Any) -> datetime | None:
    """When ``user``'s tokens stop unless they sign in again; None for a local account."""
    identity = Identity.objects.filter(user_id=user.pk).only("vouched").first()
    if identity is None:
        return None
    return identity.vouched + timedelta(seconds=settings.SSO_TOKEN_MAX_AGE)
