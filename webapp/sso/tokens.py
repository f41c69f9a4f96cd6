"""How long an SSO user's API tokens keep working after the directory last vouched for them.

- OpenID Connect: ``SSO_TOKEN_MAX_AGE`` after their last sign-in through the provider (the hub
  cannot ask a provider about a person between sign-ins). Someone removed there cannot sign
  in again, so their tokens stop by themselves within that time.
- LDAP: :data:`LDAP_VOUCH_SECONDS` (15 minutes) after the last sign-in or re-check that found
  them in the directory (:mod:`webapp.sso.recheck`, every ``LDAP_RECHECK_SECONDS``). Someone
  removed from the directory, or a directory that does not answer, stops them within that.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from webapp.sso.models import Identity

#: An LDAP user's tokens work this long after the directory last vouched for them.
LDAP_VOUCH_SECONDS = 15 * 60


def vouched_until(user: Any) -> datetime | None:
    """When ``user``'s tokens stop unless the directory vouches again; None for a local
    account."""
    identity = Identity.objects.filter(user_id=user.pk).only("vouched", "source").first()
    if identity is None:
        return None
    if identity.source == Identity.Source.LDAP:
        return identity.vouched + timedelta(seconds=LDAP_VOUCH_SECONDS)
    return identity.vouched + timedelta(seconds=settings.SSO_TOKEN_MAX_AGE)
