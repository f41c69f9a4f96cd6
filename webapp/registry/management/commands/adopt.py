"""``python manage.py adopt PATH [--dry-run]``: bring in a Triton repository a team already serves.

The dry run prints, per model folder, what the hub understood (backend, target, versions,
problems) and what adopting would do; it changes nothing. Without ``--dry-run`` the chosen
models are copied into the store in this process (PATH is a path on this host), one version at a
time, each whole or not at all; adopting again adds nothing that is already there.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser

from model_store.adopt import parse_renames
from model_store.errors import ModelStoreError
from webapp.errors import HubError
from webapp.registry.catalogue.adopt import DryRun, dry_run, start_adoption
from webapp.registry.jobs.models import Job

ACTION_WORDS = {
    "adopt": "adopt",
    "add_versions": "add versions",
    "already_adopted": "already in the hub",
    "clash": "CLASH: skipped",
    "not_adoptable": "cannot adopt",
    "not_chosen": "not chosen",
}


class Command(BaseCommand):
    help = "Adopt the models of an existing Triton model repository (copies; never edits it)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="The repository on this host (absolute path).")
        parser.add_argument(
            "--dry-run", action="store_true", help="Show what would happen; change nothing."
        )
        parser.add_argument("--json", action="store_true", help="Print the result as JSON.")
        parser.add_argument(
            "--only", action="append", default=None, metavar="FOLDER",
            help="Adopt only this model folder (repeat for more; an ensemble brings its parts).",
        )  # fmt: skip
        parser.add_argument(
            "--rename", action="append", default=[], metavar="OLD=NEW",
            help="Adopt folder OLD as hub model NEW (for a name clash; repeatable).",
        )  # fmt: skip
        parser.add_argument(
            "--user", default="", help="Record the adoption as done by this (admin) user."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            renames = parse_renames(options["rename"])
            user = self._user(options["user"])
            created: list[Job] = []
            if options["dry_run"]:
                result, created = (
                    dry_run(options["path"], chosen=options["only"], renames=renames),
                    [],
                )
            else:
                result, created = start_adoption(
                    path=options["path"], user=user, chosen=options["only"], renames=renames,
                    in_process=True,
                )  # fmt: skip
        except (HubError, ModelStoreError) as exc:
            raise CommandError(exc.message) from exc
        jobs = [Job.objects.select_related("model", "version").get(pk=j.pk) for j in created]
        if options["json"]:
            data = result.to_dict() | {
                "dry_run": options["dry_run"],
                "jobs": [_job(j) for j in jobs],
            }
            self.stdout.write(json.dumps(data, indent=2))
        else:
            self._table(result, dry=options["dry_run"])
            self._outcome(jobs, dry=options["dry_run"])
        if any(j.state == Job.State.FAILED for j in jobs):
            raise CommandError("Some versions could not be adopted (see above).")

    def _user(self, username: str) -> User | None:
        if not username:
            return None
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"There is no user {username!r}.")
        return user

    def _table(self, result: DryRun, *, dry: bool) -> None:
        self.stdout.write(
            f"Repository {result.scan.root}" + (" (dry run: nothing changes)" if dry else "")
        )
        header = f"{'FOLDER':<20} {'BACKEND':<12} {'TARGET':<12} {'VERSIONS':<10} WHAT HAPPENS"
        self.stdout.write(header)
        for found, planned in result.rows():
            versions = ",".join(str(v.number) for v in found.versions) or "-"
            what = ACTION_WORDS[planned.action]
            if planned.copies:
                what += f" v{','.join(map(str, planned.versions))} as {planned.hub_name}"
            self.stdout.write(
                f"{found.directory[:20]:<20} {(found.backend or '?')[:12]:<12} "
                f"{(found.target or '-')[:12]:<12} {versions[:10]:<10} {what}"
            )
            for problem in [*found.problems, *(p for v in found.versions for p in v.problems)]:
                if problem.message not in planned.reasons:
                    self.stdout.write(f"    {problem.level}: {problem.message!s}")
            for reason in planned.reasons:
                self.stdout.write(f"    plan: {reason!s}")
            for limit in found.limits:
                self.stdout.write(f"    the hub cannot: {limit!s}")
        for problem in result.scan.problems:
            self.stdout.write(f"{problem.level}: {problem.message!s}")

    def _outcome(self, jobs: list[Job], *, dry: bool) -> None:
        if dry:
            return
        if not jobs:
            self.stdout.write("Nothing to adopt: everything chosen is in the hub already.")
        for job in jobs:
            version = job.version
            assert version is not None
            state = "adopted" if job.state == Job.State.SUCCEEDED else f"FAILED: {job.error!s}"
            verification = (version.verification or {}).get("status")
            self.stdout.write(
                f"{job.model.name} v{version.number}: {state} (verification {verification})"
            )


def _job(job: Job) -> dict[str, Any]:
    version = job.version
    return {
        "model": job.model.name,
        "version": version.number if version else None,
        "state": job.state,
        "error": job.error,
        "verification": (version.verification or {}).get("status") if version else None,
    }
