"""Create the first admin (user name ``admin``) once, printing its password once."""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from webapp.accounts.roles import Role, grant


class Command(BaseCommand):
    help = "Create the user 'admin' if missing; password from HUB_ADMIN_PASSWORD or generated."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--migrate",
            action="store_true",
            help="apply migrations first (make run: one Django start-up instead of two)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["migrate"]:
            call_command("migrate", interactive=False, verbosity=0)
        User = get_user_model()
        if User.objects.filter(username="admin").exists():
            self.stdout.write("Admin user 'admin' exists; sign in with its password.")
            return
        password = os.environ.get("HUB_ADMIN_PASSWORD") or secrets.token_urlsafe(16)
        try:
            # The same rules as every password change: length, not common, not all digits.
            validate_password(password, User(username="admin"))
        except ValidationError as exc:
            raise CommandError(
                "HUB_ADMIN_PASSWORD is not accepted: " + " ".join(exc.messages) + " Choose "
                "another, or leave it unset to have a strong one generated and printed once."
            ) from None
        user = User.objects.create_user("admin", password=password)
        grant(user, Role.ADMIN)
        if os.environ.get("HUB_ADMIN_PASSWORD"):
            self.stdout.write(
                "Created admin user 'admin' with the password from HUB_ADMIN_PASSWORD."
            )
        else:
            self.stdout.write(
                f"Created admin user 'admin' with password: {password}\n"
                "  (shown once; change it at /admin/password_change/)"
            )
