"""Bring Triton and the repository in line with the database now, and print what was done."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from webapp.registry.serving.reconcile import reconcile


class Command(BaseCommand):
    help = (
        "Reload serving models Triton forgot, repair configs and staging leftovers, list warnings."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        report = reconcile()
        for line in report.repairs:
            self.stdout.write(f"repaired: {line!s}")
        for line in report.warnings:
            self.stdout.write(f"warning: {line!s}")
        if not report.repairs and not report.warnings:
            self.stdout.write("Database, repository and Triton agree.")
