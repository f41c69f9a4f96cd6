"""Models: create one, edit its description, tags and owner, retire it.

Retiring is a soft delete: the row stays with its versions, jobs and events (the audit trail),
marked with who retired it and when; its name is free for a new model. The unload from Triton
and the file removal run on a worker (``webapp.registry.catalogue.retire``) under the model's switch
lock, like every other change to what Triton serves.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils.translation import gettext

from model_store.errors import ModelStoreError
from model_store.names import validate_model_name
from model_store.text import Message, say
from webapp import live
from webapp.accounts.roles import Role, require_role
from webapp.errors import HubError
from webapp.registry.catalogue.models import Model, ModelTag
from webapp.registry.catalogue.rules import MAX_TAGS_PER_MODEL, TAG_MAX_LENGTH, TAG_PATTERN, Target
from webapp.registry.jobs.models import Job
from webapp.registry.jobs.record import record_event
from webapp.registry.serving.actions.switch import queue_locked_job, with_reason
from webapp.text import localize

MAX_DESCRIPTION = 2000


def create_model(*, name: str, target: str, description: str, user: User) -> Model:
    try:
        name = validate_model_name(name)
    except ModelStoreError as exc:
        raise HubError(localize(exc.message), "invalid_name") from exc
    if target not in Target.values:
        raise HubError(
            gettext("Unknown target %(target)s; choose one of %(choices)s.")
            % {"target": repr(target), "choices": ", ".join(Target.values)},
            "invalid_target",
        )
    _check_description(description)
    try:
        with transaction.atomic():
            model = Model.objects.create(
                name=name, target=target, description=description, created_by=user, owner=user
            )
    except IntegrityError:
        raise HubError(
            gettext(
                "A model named %(name)s exists already; pick another name or upload a new version."
            )
            % {"name": repr(name)},
            "name_taken",
            409,
        ) from None
    transaction.on_commit(lambda: live.publish("models", {"created": model.name}))
    return model


# --------------------------------------------------------------------------- edit


def clean_tags(raw: Iterable[str]) -> list[str]:
    """Tags as stored: trimmed, lower case, each once, in the order given; or HubError 400."""
    tags: list[str] = []
    for item in raw:
        if not isinstance(item, str):
            raise HubError(gettext("Tags are strings, such as team:vision."), "invalid_tag")
        tag = item.strip().lower()
        if not tag or tag in tags:
            continue
        if len(tag) > TAG_MAX_LENGTH or not re.match(TAG_PATTERN, tag):
            raise HubError(
                gettext(
                    "The tag %(tag)s is not allowed: up to %(max)s characters, "
                    "letters, digits and . _ : / - (starting with a letter or digit), "
                    "for example team:vision or stage:prod."
                )
                % {"tag": repr(item[:60]), "max": TAG_MAX_LENGTH},
                "invalid_tag",
            )
        tags.append(tag)
    if len(tags) > MAX_TAGS_PER_MODEL:
        raise HubError(
            gettext("A model takes up to %(max)s tags; %(count)s were given.")
            % {"max": MAX_TAGS_PER_MODEL, "count": len(tags)},
            "too_many_tags",
        )
    return tags


def _check_description(description: str) -> None:
    if len(description) > MAX_DESCRIPTION:
        raise HubError(
            gettext("The description is longer than %(max)s characters.")
            % {"max": MAX_DESCRIPTION},
            "invalid_description",
        )


def _find_owner(username: str) -> User | None:
    """The owner is a user of the hub (so the list filters by it and it follows renames)."""
    if not username.strip():
        return None
    owner = get_user_model().objects.filter(username=username.strip()).first()
    if owner is None:
        raise HubError(
            gettext(
                "There is no user named %(name)s; the owner must be a user of "
                "the hub (or empty for none)."
            )
            % {"name": repr(username.strip()[:150])},
            "unknown_owner",
        )
    return owner


def edit_model(
    *,
    model: Model,
    user: User,
    description: str | None = None,
    tags: Iterable[str] | None = None,
    owner: str | None = None,
) -> Model:
    """Change what is given (None: unchanged; ``owner=""`` clears the owner)."""
    require_role(user, Role.OPERATOR)
    changes: dict[str, object] = {}
    fields: list[str] = []
    if description is not None:
        _check_description(description)
        if description != model.description:
            model.description = description
            fields.append("description")
            changes["description"] = description[:200]
    if owner is not None:
        new_owner = _find_owner(owner)
        if new_owner != model.owner:
            model.owner = new_owner
            fields.append("owner")
            changes["owner"] = new_owner.get_username() if new_owner else None
    new_tags = clean_tags(tags) if tags is not None else None
    old_tags = model.tag_labels
    with transaction.atomic():
        if fields:
            model.save(update_fields=[*fields, "updated"])
        if new_tags is not None and sorted(new_tags) != old_tags:
            model.tags.exclude(label__in=new_tags).delete()
            ModelTag.objects.bulk_create(
                [ModelTag(model=model, label=t) for t in new_tags if t not in old_tags]
            )
            changes["tags"] = {
                "added": [t for t in new_tags if t not in old_tags],
                "removed": [t for t in old_tags if t not in new_tags],
            }
            if not fields:
                model.save(update_fields=["updated"])  # "last change" in the list
        if changes:
            text = say(
                "%(user)s changed the %(fields)s of %(model)s.",
                user=user.get_username(),
                fields=_listed(list(changes)),
                model=model.name,
            )
            record_event(
                "model.edited",
                text,
                model=model,
                actor=user,
                data=changes,
            )
    if hasattr(model, "_prefetched_objects_cache"):
        model._prefetched_objects_cache.pop("tags", None)
    transaction.on_commit(lambda: live.publish("models", {"model": model.name}))
    return model


#: The edited fields as an event names them (said in the reader's language).
_FIELD_NAMES = {
    "description": say("description"),
    "owner": say("owner"),
    "tags": say("tags"),
}


def _listed(words: list[str]) -> Message:
    names = [_FIELD_NAMES[word] for word in words]
    if len(names) == 1:
        return names[0]
    if len(names) == 2:
        return say("%(first)s and %(second)s", first=names[0], second=names[1])
    return say(
        "%(first)s, %(second)s and %(third)s", first=names[0], second=names[1], third=names[2]
    )


# --------------------------------------------------------------------------- retire


def request_retire(
    *,
    model: Model,
    user: User,
    purge_sources: bool = False,
    confirm_serving: bool = False,
    reason: str = "",
) -> Job:
    """Check a retirement, take the model's lock and queue the job that does it.

    Operators retire; purging the sources (the uploaded ONNX files and the built packages)
    also needs an admin, since nothing can rebuild them. A serving model needs
    ``confirm_serving``: its clients fail from the moment it is unloaded.
    """
    require_role(user, Role.OPERATOR)
    if purge_sources:
        require_role(user, Role.ADMIN)
    if model.serving_version is not None and not confirm_serving:
        raise HubError(
            gettext(
                "%(model)s serves v%(version)s: retiring it unloads it from Triton "
                "and every client request for it fails from then on. Confirm that clients may "
                "fail (confirm_serving) to retire it anyway."
            )
            % {"model": model.name, "version": model.serving_version},
            "serving",
            409,
        )
    busy = model.jobs.exclude(state__in=Job.FINISHED).exclude(kind=Job.Kind.RETIRE).first()
    if busy is not None:
        raise HubError(
            gettext(
                "A %(kind)s job of %(model)s is still running "
                "(job %(job)s); wait for it to end or cancel it, then retire."
            )
            % {"kind": busy.get_kind_display().lower(), "model": model.name, "job": busy.uuid},
            "busy",
            409,
        )
    return queue_locked_job(
        model,
        Job.Kind.RETIRE,
        user,
        params={
            "from": model.serving_version,
            "purge_sources": purge_sources,
            "reason": reason[:500],
        },
        message=_retire_message(user.get_username(), model.name, purge_sources, reason[:500]),
    )


def _retire_message(user: str, model: str, purge_sources: bool, reason: str) -> Message:
    if purge_sources:
        request = say(
            "%(user)s asked to retire %(model)s and purge its sources", user=user, model=model
        )
    else:
        request = say("%(user)s asked to retire %(model)s", user=user, model=model)
    return with_reason(request, reason)
