"""The hub's user behind a directory identity, and its role, recomputed at every sign-in.

A person is found by their identity (source, issuer, subject), never by user name: a local
account named like a directory user is never taken over. A new person gets a user named
after their directory name, or, when a local account already has that name, the name with the
source added (``ana.oidc``). The role comes from their groups (``SSO_ROLE_MAP``) each time, so
leaving a group in the directory takes the role away at the next sign-in; no mapped group
means no role (the "no access yet" page).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from django.contrib.auth.models import Group, User
from django.db import transaction
from django.utils import timezone

from model_store.text import say
from webapp.accounts.roles import GROUP_NAMES, Role, grant
from webapp.registry.jobs.record import record_event
from webapp.sso.models import Identity
from webapp.sso.settings import role_map

_NOT_IN_NAME = re.compile(r"[^\w.@+-]")


@dataclass(frozen=True)
class Person:
    """Who a directory says signed in."""

    source: str  # Identity.Source
    issuer: str
    subject: str
    username: str
    email: str
    name: str
    groups: tuple[str, ...]


def sign_in(person: Person, login: str = "") -> Identity:
    """The identity (and user) for ``person``, made or updated, with their role now; one line
    in the audit trail saying who, through what, and the role given. ``login``: the name an
    LDAP user typed, kept for the re-check."""
    role = role_map().role_for(person.groups)
    now = timezone.now()
    with transaction.atomic():
        identity = (
            Identity.objects.select_for_update()
            .select_related("user")
            .filter(source=person.source, issuer=person.issuer, subject=person.subject)
            .first()
        )
        if identity is None:
            user = User.objects.create_user(_free_username(person), email=person.email)
            user.set_unusable_password()  # a directory user has no password here
            identity = Identity(user=user, source=person.source, issuer=person.issuer,
                                subject=person.subject, signed_in=now, vouched=now)  # fmt: skip
        user = identity.user
        first, _, last = person.name.partition(" ")
        user.email, user.first_name, user.last_name = person.email, first[:150], last[:150]
        user.save(update_fields=["email", "first_name", "last_name", "password"])
        _set_role(user, role)
        if login:
            identity.login = login[:254]
        identity.groups = list(person.groups)[:1000]
        identity.role = role or ""
        identity.signed_in = identity.vouched = now
        identity.save()
    record_event(
        "user.signed_in",
        say("%(user)s signed in through %(source)s with the role %(role)s.",
            user=user.get_username(), source=identity.get_source_display(),
            role=role or say("none (no mapped group)")),
        actor=user,
        data={"source": person.source, "issuer": person.issuer, "role": role,
              "groups": list(person.groups)[:50]},
    )  # fmt: skip
    return identity


def recheck(person: Person) -> Identity:
    """The directory still knows ``person`` (an LDAP re-check): their groups and role as it
    says now, and vouched for from now. A changed role is written to the audit trail; the
    identity must exist (a re-check never makes an account).

    Raises:
        Identity.DoesNotExist: Nobody signed in as ``person`` before.
    """
    role = role_map().role_for(person.groups)
    with transaction.atomic():
        identity = (
            Identity.objects.select_for_update()
            .select_related("user")
            .get(source=person.source, issuer=person.issuer, subject=person.subject)
        )
        before = identity.role or None
        if role != before:
            _set_role(identity.user, role)
        identity.groups = list(person.groups)[:1000]
        identity.role = role or ""
        identity.vouched = timezone.now()
        identity.save(update_fields=["groups", "role", "vouched"])
    if role != before:
        user = identity.user
        record_event(
            "user.role_changed",
            say("The directory now gives %(user)s the role %(role)s (was %(before)s).",
                user=user.get_username(), role=role or say("none (no mapped group)"),
                before=before or say("none (no mapped group)")),
            actor=None,
            data={"source": person.source, "role": role, "before": before,
                  "groups": list(person.groups)[:50]},
        )  # fmt: skip
    return identity


def _set_role(user: User, role: str | None) -> None:
    if role is not None:
        grant(user, Role.parse(role))
        return
    user.groups.remove(*Group.objects.filter(name__in=GROUP_NAMES))
    user.is_staff = user.is_superuser = False
    user.save(update_fields=["is_staff", "is_superuser"])
    user.__dict__.pop("_hub_role", None)


def _free_username(person: Person) -> str:
    """A user name no account has: the directory's name, else with the source, else with a
    piece of the subject's hash (two directory users whose names clash)."""
    base = _NOT_IN_NAME.sub("_", person.username.strip())[:120] or "user"
    digest = hashlib.sha256(f"{person.issuer}\n{person.subject}".encode()).hexdigest()[:8]
    for name in (base, f"{base}.{person.source}", f"{base}.{person.source}.{digest}"):
        if not User.objects.filter(username__iexact=name).exists():
            return name
    return f"{person.source}-{digest}-{User.objects.count()}"
