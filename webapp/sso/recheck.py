"""The LDAP re-check: is each LDAP user still in the directory, and in which groups?

Run by the workers every ``LDAP_RECHECK_SECONDS`` (``workers.tasks.sso.recheck_directory``).
A person the directory still finds gets their groups and role as it says now, and is vouched
for from now (their API tokens keep working, :mod:`webapp.sso.tokens`). A person it no longer
finds (deleted, disabled out of the user filter, moved out of the search base) is not: their
tokens stop 15 minutes after the last vouch, and they cannot sign in. When the directory does
not answer the service account's bind, nobody is vouched for, and the run says so: failing
closed is the point of the check.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings

from webapp.sso.models import Identity

log = logging.getLogger(__name__)


def recheck_directory() -> dict[str, Any]:
    """Re-check every active LDAP user of this directory; counts of what was found."""
    if not settings.LDAP_SERVER_URI:
        return {"enabled": False}
    from webapp.sso import directory

    try:
        directory.probe()
    except Exception as exc:
        reason = directory.describe_error(exc)
        log.warning("LDAP re-check skipped: the directory did not answer (%s)", reason)
        return {"enabled": True, "directory": "unreachable", "reason": reason}
    identities = Identity.objects.filter(
        source=Identity.Source.LDAP, issuer=settings.LDAP_SERVER_URI, user__is_active=True
    ).exclude(login="")
    found = gone = 0
    for identity in identities.iterator():
        backend = directory.HubLDAPBackend()
        backend.rechecking = True
        # django-auth-ldap's populate_user: the service account searches the person as a
        # sign-in would, reads their groups, and hands them to get_or_build_user (no password).
        try:
            user = backend.populate_user(identity.login)
        except Identity.DoesNotExist:  # the name now finds an entry nobody signed in as
            user = None
        if user is not None and _same_entry(user, identity):
            found += 1
        else:
            gone += 1
            log.info("LDAP re-check: %s is no longer in the directory", identity.login)
    return {"enabled": True, "directory": "ok", "found": found, "gone": gone}


def _same_entry(user: Any, identity: Identity) -> bool:
    """The search found the entry this identity signed in as (a reused login name finds
    another DN: that person is someone else, and this one is gone)."""
    return bool(user.pk == identity.user_id)
