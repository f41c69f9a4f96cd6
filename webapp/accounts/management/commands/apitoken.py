"""Print a new API token for a user; the token is the last word printed (scripts rely on it)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from webapp.accounts.models import ApiToken
from webapp.accounts.roles import Role, grant, role_of
from webapp.accounts.tokens import MAX_RATE_PER_MINUTE


class Command(BaseCommand):
    help = "Create an API token for USERNAME (creating the user with --role if it does not exist)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", choices=["viewer", "operator", "admin"], default=None)
        parser.add_argument("--name", default="cli", help="A label for the token.")
        parser.add_argument(
            "--days", type=int, default=None, help="Expire after this many days (default: never)."
        )
        parser.add_argument(
            "--scope",
            choices=["viewer", "operator", "admin"],
            default="",
            help="Cap what the token may do below the user's role (default: the user's role).",
        )
        parser.add_argument(
            "--rate-per-minute",
            type=int,
            default=None,
            help="This token's own inference calls a minute, replacing the user's "
            "INFER_RATE_PER_MINUTE (0: no limit), for a service carrying production traffic.",
        )

    def handle(
        self,
        *args: Any,
        username: str,
        role: str | None,
        name: str,
        days: int | None,
        scope: str,
        rate_per_minute: int | None,
        **options: Any,
    ) -> None:
        User = get_user_model()
        user, created = User.objects.get_or_create(username=username)
        if created:
            user.set_unusable_password()
            user.save()
            grant(user, Role.parse(role or "viewer"))
        elif role is not None:
            grant(user, Role.parse(role))
        if role_of(user) is Role.NONE:
            raise CommandError(f"{username} has no role; pass --role viewer|operator|admin.")
        if scope and Role.parse(scope) > role_of(user):
            raise CommandError(f"{username} is {role_of(user).label}; the scope may not be wider.")
        if days is not None and not 1 <= days <= 3650:
            raise CommandError("--days must be from 1 to 3650.")
        if rate_per_minute is not None and not 0 <= rate_per_minute <= MAX_RATE_PER_MINUTE:
            raise CommandError(f"--rate-per-minute must be from 0 to {MAX_RATE_PER_MINUTE}.")
        expires = timezone.now() + timedelta(days=days) if days else None
        token, key = ApiToken.issue(user, name=name, scope=scope, expires=expires)
        if rate_per_minute is not None:  # whoever runs manage.py is the host's admin
            token.rate_per_minute = rate_per_minute
            token.save(update_fields=["rate_per_minute"])
        state = "created" if created else "existing"
        self.stdout.write(f"Token for {state} user {username} ({role_of(user).label}): {key}")
