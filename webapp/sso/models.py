from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class Identity(models.Model):
    """A person as a directory knows them, tied to the hub's user (one each).

    Written at every sign-in through the directory (webapp/sso/accounts.py); read by the token
    check, which stops an SSO user's API tokens once the directory has not vouched for them
    for too long (``SSO_TOKEN_MAX_AGE``).
    """

    class Source(models.TextChoices):
        OIDC = "oidc", _("OpenID Connect")
        LDAP = "ldap", _("LDAP")

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identity"
    )
    source = models.CharField(max_length=8, choices=Source.choices)
    #: The provider's issuer URL, or the LDAP server URI.
    issuer = models.CharField(max_length=500)
    #: OIDC ``sub``, or the LDAP entry's DN: stable where a user name may be reused.
    subject = models.CharField(max_length=500)
    #: LDAP: the name the person signs in with (what the user filter matches), for the
    #: re-check; empty for OIDC.
    login = models.CharField(max_length=254, blank=True)
    groups = models.JSONField(default=list, blank=True)
    role = models.CharField(max_length=16, blank=True)
    signed_in = models.DateTimeField()
    #: When the directory last said this person may come in (a sign-in, or an LDAP re-check).
    vouched = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "issuer", "subject"], name="sso_identity_subject"
            )
        ]

    def __str__(self) -> str:
        return f"{self.source}:{self.subject} -> {self.user_id}"
