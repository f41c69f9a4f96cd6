"""What people do with captures: set the policy, list, export, delete, purge, keep one as an
example; and what the clock does (retention). Views and the API call these; nothing here
reads a request."""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Count, QuerySet, Sum
from django.utils import timezone
from django.utils.translation import gettext

from model_store.text import say
from webapp.errors import HubError
from webapp.registry.capture import recorder
from webapp.registry.capture.models import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_ITEMS,
    DEFAULT_RETENTION_HOURS,
    LIMIT_MAX_BYTES,
    LIMIT_MAX_ITEMS,
    LIMIT_RETENTION_HOURS,
    Capture,
    CaptureCounters,
    CapturePolicy,
)
from webapp.registry.catalogue.models import Model
from webapp.registry.jobs.record import record_event

MIN_MAX_BYTES = 1 << 20
#: The most captures one export holds (its size is bounded by max_bytes too).
EXPORT_MAX_ITEMS = 10_000


def policy_of(model: Model) -> CapturePolicy:
    """The model's policy as stored, or the defaults (off) when none was ever set."""
    return CapturePolicy.objects.filter(model=model).first() or CapturePolicy(model=model)


def summary(model: Model) -> dict[str, Any]:
    """The policy, how much is kept, and what was not captured and why (everyone may read)."""
    policy = policy_of(model)
    kept = Capture.objects.filter(model=model).aggregate(n=Count("id"), size=Sum("size"))
    counters = CaptureCounters.objects.filter(model=model).first() or CaptureCounters()
    return {
        **policy.to_dict(),
        "count": kept["n"] or 0,
        "bytes": kept["size"] or 0,
        "counters": counters.to_dict(),
    }


@dataclass(frozen=True)
class PolicyIn:
    enabled: bool = True
    sample_rate: float = 100.0
    max_items: int = DEFAULT_MAX_ITEMS
    max_bytes: int = DEFAULT_MAX_BYTES
    retention_hours: int = DEFAULT_RETENTION_HOURS


def set_policy(model: Model, wanted: PolicyIn, user: User) -> CapturePolicy:
    """Store the model's capture settings (a stop for a full disk is lifted by saving again).

    Raises:
        HubError: A value out of range (400), or capture turned on for a model that serves
            nothing (409).
    """
    _check_range("sample_rate", wanted.sample_rate, 0, 100)
    _check_range("max_items", wanted.max_items, 1, LIMIT_MAX_ITEMS)
    _check_range("max_bytes", wanted.max_bytes, MIN_MAX_BYTES, LIMIT_MAX_BYTES)
    _check_range("retention_hours", wanted.retention_hours, 1, LIMIT_RETENTION_HOURS)
    if wanted.enabled and model.serving_version is None:
        raise HubError(
            gettext(
                "%(model)s serves no version, so there is nothing to capture: serve a version "
                "first."
            )
            % {"model": model.name},
            "not_served",
            409,
        )
    with transaction.atomic():
        policy, _ = CapturePolicy.objects.select_for_update().get_or_create(model=model)
        policy.enabled = wanted.enabled
        policy.sample_rate = float(wanted.sample_rate)
        policy.max_items = wanted.max_items
        policy.max_bytes = wanted.max_bytes
        policy.retention_hours = wanted.retention_hours
        policy.stopped_reason, policy.stopped_at = "", None
        policy.save()
    recorder.forget_rates()
    record_event(
        "capture.set",
        say("%(user)s set capture of %(model)s: %(state)s.", user=user.get_username(),
            model=model.name,
            state=say("on at %(rate)s%%, up to %(items)s captures", rate=f"{wanted.sample_rate:g}",
                      items=wanted.max_items) if wanted.enabled else say("off")),
        model=model, actor=user, data=policy.to_dict(),
    )  # fmt: skip
    recorder.trim(policy)  # a lower cap applies at once
    return policy


def _check_range(name: str, value: float, low: float, high: float) -> None:
    if isinstance(value, bool) or not (isinstance(value, (int, float)) and math.isfinite(value)):
        raise HubError(gettext("'%(name)s' must be a number.") % {"name": name}, "invalid_field")
    if not low <= value <= high:
        raise HubError(
            gettext("'%(name)s' must be from %(low)s to %(high)s; got %(value)s.")
            % {"name": name, "low": f"{low:g}", "high": f"{high:g}", "value": f"{value:g}"},
            "invalid_field",
        )


# -- finding captures ---------------------------------------------------------------------
@dataclass(frozen=True)
class Filters:
    version: int | None = None
    since: datetime | None = None
    until: datetime | None = None


def matching(model: Model, filters: Filters) -> QuerySet[Capture]:
    found = Capture.objects.filter(model=model)
    if filters.version is not None:
        found = found.filter(version=filters.version)
    if filters.since is not None:
        found = found.filter(created__gte=filters.since)
    if filters.until is not None:
        found = found.filter(created__lt=filters.until)
    return found


def to_dict(capture: Capture) -> dict[str, Any]:
    return {
        "id": capture.pk,
        "version": capture.version,
        "created": capture.created.isoformat(),
        "caller": capture.caller,
        "latency_ms": capture.latency_ms,
        "source": capture.source,
        "inputs": capture.inputs,
        "outputs": capture.outputs,
        "size": capture.size,
    }


def tensors(capture: Capture) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The capture's inputs and outputs.

    Raises:
        HubError: Its file is gone (410).
    """
    try:
        return recorder.store().read(capture.model.name, capture.file)
    except (OSError, ValueError):
        raise HubError(
            gettext("The tensors of capture %(id)s are no longer on disk.") % {"id": capture.pk},
            "capture_gone",
            410,
        ) from None


def export_npz(model: Model, filters: Filters) -> tuple[bytes, int]:
    """The matching captures as one ``.npz``, oldest first: ``inputs.<name>`` and
    ``outputs.<name>`` each the items joined along the first axis, ``capture_ids``,
    ``versions`` and ``rows`` (how many rows of each array each capture gave). Captures whose
    tensors do not join the first one's shapes are left out. Returns the bytes and how many
    captures they hold.

    Raises:
        HubError: Nothing matches (409).
    """
    found = list(matching(model, filters).order_by("created", "id")[:EXPORT_MAX_ITEMS])
    if not found:
        raise HubError(
            gettext("%(model)s has no captures that match, so there is nothing to export.")
            % {"model": model.name},
            "no_captures",
            409,
        )
    columns: dict[str, list[np.ndarray]] = {}
    ids, versions, rows = [], [], []
    trailing: dict[str, tuple[tuple[int, ...], str]] = {}
    for capture in found:
        try:
            inputs, outputs = tensors(capture)
        except HubError:
            continue
        arrays = {f"inputs.{k}": v for k, v in inputs.items()}
        arrays |= {f"outputs.{k}": v for k, v in outputs.items()}
        if not arrays or any(a.ndim == 0 for a in arrays.values()):
            continue
        shapes = {k: (tuple(a.shape[1:]), str(a.dtype)) for k, a in arrays.items()}
        if not trailing:
            trailing = shapes
        if shapes != trailing or len({a.shape[0] for a in arrays.values()}) != 1:
            continue
        for key, array in arrays.items():
            columns.setdefault(key, []).append(array)
        ids.append(capture.pk)
        versions.append(capture.version)
        rows.append(next(iter(arrays.values())).shape[0])
    if not ids:
        raise HubError(
            gettext("The captures of %(model)s that match are no longer readable.")
            % {"model": model.name},
            "no_captures",
            409,
        )
    buffer = io.BytesIO()
    joined = {key: np.concatenate(parts, axis=0) for key, parts in columns.items()}
    np.savez(
        buffer,
        capture_ids=np.array(ids, dtype=np.int64),
        versions=np.array(versions, dtype=np.int64),
        rows=np.array(rows, dtype=np.int64),
        **joined,
    )
    return buffer.getvalue(), len(ids)


# -- removing ---------------------------------------------------------------------------------
def delete(captures: Iterable[Capture]) -> int:
    by_model: dict[str, list[tuple[int, str]]] = {}
    for capture in captures:
        by_model.setdefault(capture.model.name, []).append((capture.pk, capture.file))
    return sum(recorder.remove(name, doomed) for name, doomed in by_model.items())


def purge(model: Model, user: User | None) -> int:
    """Remove every capture of ``model`` (rows and files); how many there were."""
    count = Capture.objects.filter(model=model).count()
    Capture.objects.filter(model=model).delete()
    recorder.store().purge(model.name)
    if user is not None:
        record_event(
            "capture.purged",
            say("%(user)s removed all %(count)s captures of %(model)s.",
                user=user.get_username(), count=count, model=model.name),
            model=model, actor=user, data={"count": count},
        )  # fmt: skip
    return count


def expire(now: datetime | None = None) -> int:
    """Remove captures older than their model's retention; how many."""
    now = now or timezone.now()
    removed = 0
    for policy in CapturePolicy.objects.select_related("model"):
        cutoff = now - timedelta(hours=policy.retention_hours)
        old = Capture.objects.filter(model=policy.model, created__lt=cutoff)
        removed += recorder.remove(policy.model.name, list(old.values_list("pk", "file")))
    return removed


def recent_inputs(
    model: Model, fits: Callable[[dict[str, np.ndarray]], bool], limit: int
) -> list[tuple[int, dict[str, np.ndarray]]]:
    """Up to ``limit`` of the model's newest captured inputs that ``fits`` accepts (a new
    version's signature may differ from the one that answered), as ``(capture id, inputs)``."""
    chosen: list[tuple[int, dict[str, np.ndarray]]] = []
    for capture in Capture.objects.filter(model=model).select_related("model")[: limit * 4]:
        try:
            inputs, _ = tensors(capture)
        except HubError:
            continue
        if fits(inputs):
            chosen.append((capture.pk, inputs))
            if len(chosen) == limit:
                break
    return chosen


def newest_request_for(model: Model, fits: Callable[[dict[str, np.ndarray]], bool]) -> int:
    """The id of the model's newest captured request that ``fits``, for a sweep or a tuning
    run that asked for one.

    Raises:
        HubError: None fits (409 ``no_captures``).
    """
    found = recent_inputs(model, fits, 1)
    if not found:
        raise HubError(
            gettext(
                "%(model)s has no captured request that fits its serving version: turn capture "
                "on (the Captures tab) and let it answer some requests first."
            )
            % {"model": model.name},
            "no_captures",
            409,
        )
    return found[0][0]


def as_example_inputs(capture: Capture) -> dict[str, Any]:
    """The capture's inputs as the infer API and saved examples take them (name -> values)."""
    inputs, _ = tensors(capture)
    return {name: array.tolist() for name, array in inputs.items()}
