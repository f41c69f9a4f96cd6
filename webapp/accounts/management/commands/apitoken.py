"""Print a new API token for a user; the token is the last word printed (scripts rely on it)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from webapp.accounts.models import ApiToken
from webapp.accounts.roles import Role, grant, role_of


class Command(BaseCommand):
    help = "Create an API token for USERNAME (creating the user with --role if it does not exist)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", choices=["viewer", "operator", "admin"], default=None)
        parser.add_argument("--name", default="cli", help="A label for the token.")

    def handle(
        self, *args: Any, username: str, role: str | None, name: str, **options: Any
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
        _, key = ApiToken.issue(user, name=name)
        state = "created" if created else "existing"
        self.stdout.write(f"Token for {state} user {username} ({role_of(user).label}): {key}")
