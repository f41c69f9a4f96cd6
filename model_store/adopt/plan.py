"""What adopting a scanned repository would do, model by model; the dry run prints this.

:func:`plan_adoption` takes the scan, what the hub already holds (by model name) and the
admin's choices (which models, renames) and decides per model:

* ``adopt``: a new hub model with the adoptable versions, under its own or a chosen name;
* ``add_versions``: the hub model was adopted from this same repository before; only the
  versions it does not hold yet (by SHA-256 of their files) are added;
* ``already_adopted``: every version is in the hub already (same files): nothing to do, so
  adopting twice duplicates nothing;
* ``clash``: a hub model of that name exists and is not this one: it is never overwritten;
  the choice is to skip it or to adopt under another name (a rename);
* ``not_adoptable``: a problem blocks it (a broken config, no versions, a bad name);
* ``not_chosen``: the admin left it out.

An ensemble brings the models it composes with it: they are planned too, or the ensemble is
blocked when one of them is neither in the repository nor in the hub.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from model_store.adopt.found import RepositoryScan, ScannedModel
from model_store.errors import ModelStoreError
from model_store.names import validate_model_name
from model_store.text import Said, as_json, joined, say

Action = Literal["adopt", "add_versions", "already_adopted", "clash", "not_adoptable", "not_chosen"]
#: Actions that copy something.
COPYING_ACTIONS = ("adopt", "add_versions")


@dataclass(frozen=True)
class ExistingModel:
    """What the hub holds under one name: the version digests and where it was adopted from."""

    target: str
    digests: frozenset[str]
    numbers: frozenset[int]
    adopted_from: str = ""


@dataclass
class PlannedModel:
    """What would happen to one model directory."""

    directory: str
    hub_name: str
    action: Action
    target: str
    versions: list[int] = field(default_factory=list)
    already: dict[int, int] = field(default_factory=dict)
    reasons: list[Said] = field(default_factory=list)

    @property
    def copies(self) -> bool:
        return self.action in COPYING_ACTIONS and bool(self.versions)

    def to_dict(self) -> dict[str, object]:
        return {
            "directory": self.directory,
            "hub_name": self.hub_name,
            "action": self.action,
            "target": self.target,
            "versions": self.versions,
            "already": {str(k): v for k, v in self.already.items()},
            "reasons": as_json(self.reasons),
        }


@dataclass
class AdoptionPlan:
    """The plan for the whole repository; nothing has been changed when it exists."""

    root: str
    models: list[PlannedModel]

    def copying(self) -> list[PlannedModel]:
        return [m for m in self.models if m.copies]

    def to_dict(self) -> dict[str, object]:
        return {"root": self.root, "models": [m.to_dict() for m in self.models]}


class InvalidRename(ModelStoreError):
    """A ``--rename old=new`` that names no scanned model, or a name that is not allowed."""

    code = "invalid_rename"


def parse_renames(items: Iterable[str]) -> dict[str, str]:
    """``["old=new", ...]`` -> ``{"old": "new"}``, each new name validated."""
    renames = {}
    for item in items:
        old, sep, new = item.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise InvalidRename(say("Write a rename as old=new, not %(item)s.", item=repr(item)))
        renames[old.strip()] = validate_model_name(new.strip())
    return renames


def plan_adoption(
    scan: RepositoryScan,
    existing: Mapping[str, ExistingModel],
    *,
    chosen: Iterable[str] | None = None,
    renames: Mapping[str, str] | None = None,
) -> AdoptionPlan:
    """Decides what adopting would do; see the module docstring.

    Args:
        scan: The repository's scan.
        existing: The hub's models by name (only names the scan could touch are needed).
        chosen: Directories to adopt (None: every adoptable one). Composed models of a chosen
            ensemble are added.
        renames: Directory -> hub name, for clashes and names the hub does not allow.

    Raises:
        InvalidRename: A rename names no scanned model, or two models would get one name.
    """
    renames = {old: validate_model_name(new) for old, new in (renames or {}).items()}
    unknown = sorted(set(renames) - {m.directory for m in scan.models})
    if unknown:
        raise InvalidRename(
            say(
                "No model folder called %(names)s was found to rename.",
                names=", ".join(unknown),
            )
        )
    wanted = _with_composed(scan, set(chosen) if chosen is not None else None)
    planned = [
        _plan_model(model, existing, renames.get(model.directory), str(scan.root), wanted)
        for model in scan.models
    ]
    _check_unique_names(planned)
    _block_ensembles_missing_parts(scan, planned, existing)
    return AdoptionPlan(str(scan.root), planned)


def _with_composed(scan: RepositoryScan, chosen: set[str] | None) -> set[str] | None:
    """The chosen directories plus, transitively, the models chosen ensembles compose."""
    if chosen is None:
        return None
    pending = list(chosen)
    while pending:
        model = scan.model(pending.pop())
        for part in model.composes if model else []:
            if part not in chosen:
                chosen.add(part)
                pending.append(part)
    return chosen


def _plan_model(
    model: ScannedModel,
    existing: Mapping[str, ExistingModel],
    rename: str | None,
    root: str,
    wanted: set[str] | None,
) -> PlannedModel:
    hub_name = rename or model.directory
    plan = PlannedModel(model.directory, hub_name, "adopt", model.target)
    if wanted is not None and model.directory not in wanted:
        plan.action = "not_chosen"
        return plan
    # A name the hub does not allow blocks only when no rename gives the model another one.
    blocking: list[Said] = [
        p.message for p in model.problems if p.level == "error" and p.code != "invalid_name"
    ]
    if rename is None and any(p.code == "invalid_name" for p in model.problems):
        blocking.append(
            say(
                "%(name)s is not a name the hub allows; adopt it under another name.",
                name=repr(model.directory),
            )
        )
    adoptable = [v for v in model.versions if v.adoptable]
    if blocking or not model.target or not adoptable:
        plan.action = "not_adoptable"
        plan.reasons = blocking or [say("No version can be adopted.")]
        return plan
    for version in model.versions:
        if not version.adoptable:
            plan.reasons += [p.message for p in version.problems if p.level == "error"]
    hub = existing.get(hub_name)
    if hub is None:
        plan.versions = [v.number for v in adoptable]
        return plan
    new = [v for v in adoptable if v.digest not in hub.digests]
    plan.already = {v.number: v.number for v in adoptable if v.digest in hub.digests}
    if not new:
        plan.action = "already_adopted"
        plan.reasons.append(
            say(
                "Every version is in the hub already as %(name)s (same files).",
                name=hub_name,
            )
        )
        return plan
    if hub.adopted_from == root and hub.target == model.target:
        taken = [v.number for v in new if v.number in hub.numbers]
        plan.action = "add_versions"
        plan.versions = [v.number for v in new if v.number not in hub.numbers]
        if taken:
            plan.reasons.append(
                say(
                    "Version(s) %(versions)s changed since they were adopted; the hub keeps "
                    "what it adopted (adopt the new files under another name).",
                    versions=", ".join(map(str, taken)),
                )
            )
        if not plan.versions:
            plan.action = "already_adopted"
        return plan
    plan.action = "clash"
    plan.reasons.append(
        say(
            "The hub has a model called %(name)s already; it is not overwritten. Skip it, or "
            "adopt it under another name (%(directory)s=NEW_NAME).",
            name=hub_name,
            directory=model.directory,
        )
    )
    return plan


def _check_unique_names(planned: list[PlannedModel]) -> None:
    seen: dict[str, str] = {}
    for plan in planned:
        if not plan.copies:
            continue
        if plan.hub_name in seen:
            raise InvalidRename(
                say(
                    "%(first)s and %(second)s would both become %(name)s; rename one of them.",
                    first=seen[plan.hub_name],
                    second=plan.directory,
                    name=plan.hub_name,
                )
            )
        seen[plan.hub_name] = plan.directory


def _block_ensembles_missing_parts(
    scan: RepositoryScan, planned: list[PlannedModel], existing: Mapping[str, ExistingModel]
) -> None:
    """An ensemble whose composed models will be neither adopted nor in the hub cannot serve."""
    by_directory = {p.directory: p for p in planned}
    for model in scan.models:
        plan = by_directory[model.directory]
        if not plan.copies or not model.composes:
            continue
        missing: list[Said] = []
        for part in model.composes:
            part_plan = by_directory.get(part)
            coming = part_plan is not None and (
                part_plan.copies or part_plan.action == "already_adopted"
            )
            if part_plan is not None and part_plan.action == "clash":
                missing.append(say("%(part)s (the hub's %(part)s is another model)", part=part))
            elif part_plan is not None and part_plan.hub_name != part and coming:
                missing.append(
                    say(
                        "%(part)s (renamed to %(name)s; the ensemble calls %(part)s)",
                        part=part,
                        name=part_plan.hub_name,
                    )
                )
            elif not coming and part not in existing:
                missing.append(part)
        if missing:
            plan.action = "not_adoptable"
            plan.versions = []
            plan.reasons.append(
                say(
                    "The ensemble calls models that would not be in the hub: %(missing)s.",
                    missing=joined(missing, ", "),
                )
            )
