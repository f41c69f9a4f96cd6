"""The "Edit serving config" page: a packaged version's options as a form, a live preview of
what the revision would be, and the POST that makes it.

The form is the target's option form (option_forms.OptionsForm) prefilled with the version's
own options; only the fields the operator changed become the revision's changes. The preview
is a partial of this page (htmx posts the form as the operator types, debounced), rendered
from ``preview_revision``, the same call the API's ``?dry_run=true`` answers with: one mapping
from form fields to options and one rendering of the diff serve the page with and without
JavaScript.
"""

from __future__ import annotations

import re
from typing import Any

from django.contrib import messages
from django.db.models import Max
from django.forms import BoundField
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext

from model_store.targets import get_target
from model_store.targets.base import Target
from model_store.targets.options import OptionSpec
from webapp.accounts.roles import Role, require_role
from webapp.errors import HubError
from webapp.http import HubRequest
from webapp.registry.build.option_forms import OptionsForm
from webapp.registry.catalogue.models import Version
from webapp.registry.performance.actions.revisions import preview_revision, request_revision
from webapp.text import localize

# Config-only options in the order an operator tunes them: instances, batching, queue delay,
# devices. Options not listed keep the target's order after these.
_CONFIG_ORDER = (
    "instance_count",
    "max_batch_size",
    "dynamic_batching",
    "preferred_batch_sizes",
    "max_queue_delay_us",
    "device_ids",
    "device_id",
)
_OPTION_IN_MESSAGE = re.compile(r"Option '([a-z0-9_]+)'")


def _initial(spec: OptionSpec, value: object) -> object:
    """A stored (parsed, resolved) option value as its form field shows it."""
    if value is None:
        return ""
    if spec.kind == "bool" and spec.default is None:
        return "true" if value else "false"
    if spec.kind == "int_list" and isinstance(value, list):
        return ",".join(str(v) for v in value)
    if spec.kind == "shape" and isinstance(value, dict):
        return "; ".join(f"{k}:{','.join(str(d) for d in dims)}" for k, dims in value.items())
    return value


class RevisionForm(OptionsForm):
    """The target's options, prefilled with ``version``'s; ``changes()`` gives what differs."""

    def __init__(self, target: Target, version: Version, *args: Any, **kwargs: Any) -> None:
        specs = {spec.name: spec for spec in target.option_specs()}
        initial = {
            f"opt_{name}": _initial(spec, version.options.get(name, spec.default))
            for name, spec in specs.items()
        }
        super().__init__(target, *args, initial=initial, **kwargs)
        self.config_only = target.config_only_options

    def _ordered(self, names: list[str]) -> list[BoundField]:
        rank = {name: i for i, name in enumerate(_CONFIG_ORDER)}
        names.sort(key=lambda n: rank.get(n, len(rank)))
        return [self[f"opt_{n}"] for n in names]

    def config_fields(self) -> list[BoundField]:
        """The options that only change config.pbtxt (the artifact and its checks are reused)."""
        return self._ordered([n for n in self.specs if n in self.config_only])

    def rebuild_fields(self) -> list[BoundField]:
        """The options the built artifact depends on: changing one compiles and verifies again."""
        return [self[f"opt_{n}"] for n in self.specs if n not in self.config_only]

    def rebuild_open(self) -> bool:
        """Show the rebuild options unfolded when one of them is changed or wrong."""
        touched = set(self.changed_data) | set(self.errors) if self.is_bound else set()
        return any(f.name in touched for f in self.rebuild_fields())

    def changes(self) -> dict[str, Any]:
        """Only the options the operator changed, as the option parsers take them.

        An emptied field means the target's default (None: automatic). Lists and shapes go as
        the text typed; model_store's parsers read it and say what is wrong with it.
        """
        changes: dict[str, Any] = {}
        for key in self.changed_data:
            name = key.removeprefix("opt_")
            spec = self.specs[name]
            value = self.cleaned_data.get(key)
            if spec.kind == "bool" and spec.default is None:
                changes[name] = {"true": True, "false": False}.get(value or "")
            elif spec.kind == "bool":
                changes[name] = bool(value)
            elif value in (None, ""):
                changes[name] = None
            else:
                changes[name] = value
        return changes

    def add_hub_error(self, exc: HubError) -> None:
        """The error beside the field it is about when it names one, else above the form."""
        match = _OPTION_IN_MESSAGE.search(str(exc.message))  # option names are not translated
        field = f"opt_{match.group(1)}" if match else None
        self.add_error(field if field in self.fields else None, localize(exc.message))


def page_version(name: str, number: int) -> Version:
    """The version of a live model a page is about, or 404."""
    return get_object_or_404(
        Version.objects.select_related("model", "revision_of"),
        model__name=name,
        model__retired_at=None,
        number=number,
    )


def _not_revisable(version: Version, target: Target) -> str:
    """Why this version's config cannot be edited here, or ""."""
    if not target.accepts_uploads:
        return gettext(
            "%(model)s was adopted as an external model; the hub did not build it, so it "
            "cannot revise its config. Adopt the changed repository instead."
        ) % {"model": version.model.name}
    if version.status != Version.Status.READY:
        return gettext(
            "Version %(number)s is %(status)s; only a packaged version's serving config can be "
            "edited."
        ) % {"number": version.number, "status": version.get_status_display().lower()}
    return ""


def _diff_lines(diff: str) -> list[tuple[str, str]]:
    """(kind, text) per line of a unified diff, kind one of head, hunk, add, del, same."""
    lines: list[tuple[str, str]] = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            kind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "same"
        lines.append((kind, line))
    return lines


def _preview(version: Version, form: RevisionForm) -> dict[str, Any]:
    """What the preview panel shows for the form as it stands."""
    if not form.is_valid():
        return {"state": "invalid"}
    changes = form.changes()
    if not changes:
        return {"state": "unchanged"}
    try:
        plan = preview_revision(version, changes)
    except HubError as exc:
        if exc.code == "no_change":
            return {"state": "unchanged"}
        if exc.status == 409:  # the version, not the form (e.g. a bundle's source): say so
            return {"state": "refused", "message": exc.message}
        form.add_hub_error(exc)
        return {"state": "invalid"}
    return {"state": "planned", "plan": plan, "diff_lines": _diff_lines(plan["diff"])}


def version_revise(request: HubRequest, name: str, number: int) -> HttpResponse:
    """GET: the form; POST ``preview=1`` (htmx): the preview partial; POST: make the revision."""
    require_role(request.user, Role.OPERATOR)
    version = page_version(name, number)
    model = version.model
    target = get_target(model.target)
    context: dict[str, Any] = {
        "model": model,
        "version": version,
        "target": target,
        "nav": "models",
        "next_number": (model.versions.aggregate(m=Max("number"))["m"] or 0) + 1,
    }
    if refusal := _not_revisable(version, target):
        context["refusal"] = refusal
        return render(request, "registry/version_revise.html", context, status=409)
    form = RevisionForm(target, version, request.POST if request.method == "POST" else None)
    context["form"] = form
    if request.method != "POST":
        context["preview"] = {"state": "unchanged"}
        return render(request, "registry/version_revise.html", context)
    if request.POST.get("preview") == "1":
        context["preview"] = _preview(version, form)
        template = (
            "registry/_revision_preview.html" if request.htmx else "registry/version_revise.html"
        )
        return render(request, template, context)
    if form.is_valid():
        changes = form.changes()
        if not changes:
            form.add_error(None, "Nothing changed: edit an option first.")
        else:
            try:
                revision, job, plan = request_revision(version, changes, request.user)  # type: ignore[arg-type]
            except HubError as exc:
                if exc.status == 403:
                    raise
                form.add_hub_error(exc)
            else:
                if plan.reuses_artifact:
                    said = gettext(
                        "Version %(number)s is a revision of v%(original)s; it reuses the built "
                        "model and its verification."
                    )
                else:
                    said = gettext(
                        "Version %(number)s is a revision of v%(original)s; it is compiled and "
                        "verified again (%(options)s changed)."
                    )
                messages.success(
                    request,
                    said
                    % {
                        "number": revision.number,
                        "original": version.number,
                        "options": ", ".join(plan.rebuild),
                    },
                )
                return redirect("job", job_id=job.uuid)
    context["preview"] = _preview(version, form) if not form.errors else {"state": "invalid"}
    return render(request, "registry/version_revise.html", context, status=400)
