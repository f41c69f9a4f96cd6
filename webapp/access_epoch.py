"""One counter in Redis that moves whenever who may infer, or where a model is served, changes.

The ``/v2`` fast path (:mod:`webapp.edge.gateway_fast`) keeps API tokens and models in memory so
that an inference costs no database query. It reads this counter with every call, in the same
Redis round trip as the rate limit, and forgets everything it keeps when the counter moved: a
revoked token, a deactivated user, a lowered role or a switched model count from the next call.

What moves it, always after the write's transaction commits (moving it before would let a
concurrent call re-read the old row and keep it under the new value):

* saves and deletes of API tokens, users, group memberships, models and node servings
  (Django's signals, :func:`connect`);
* ``QuerySet.update()`` on tokens, models and node servings, which sends no signal
  (:class:`WatchedQuerySet`, their managers' query set).

Writes of fields the fast path never reads (a token's ``last_used``, a model's lock and its
bookkeeping) do not move it, so that busy traffic does not empty the caches every minute.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from typing import Any, TypeVar

import redis
from django.conf import settings
from django.db import models, transaction

from webapp.edge.shared import EPOCH_KEY as KEY

#: Fields whose writes leave every cached answer of the fast path true.
QUIET_FIELDS = frozenset(
    {
        "last_used",
        "lock_holder",
        "lock_expires",
        "compare_version",
        "previous_version",
        "updated",
        "last_login",
    }
)

log = logging.getLogger(__name__)
_M = TypeVar("_M", bound=models.Model)


@functools.lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)


def _move() -> None:
    if not settings.LIMITS_REDIS_URL:
        return  # no Redis: no fast path either (it needs the counter), nothing to tell
    try:
        _client(settings.LIMITS_REDIS_URL).incr(KEY)
    except redis.RedisError as exc:
        # The fast path forgets its caches whenever Redis fails it, and keeps nothing longer
        # than MAX_AGE_SECONDS (webapp/edge/gateway_fast.py), so a lost move is bounded.
        log.warning("Could not move the access epoch in Redis: %s", exc)


def bump() -> None:
    """Move the counter once the current transaction (if any) has committed."""
    transaction.on_commit(_move)


def _touches_cache(fields: Iterable[str] | None) -> bool:
    return fields is None or not set(fields) <= QUIET_FIELDS


class WatchedQuerySet(models.QuerySet[_M]):
    """A query set whose ``update()`` moves the access epoch (``update`` sends no signal)."""

    def update(self, **kwargs: Any) -> int:
        rows = super().update(**kwargs)
        if rows and _touches_cache(kwargs):
            bump()
        return rows

    def bulk_update(self, objs: Iterable[_M], fields: Iterable[str], *args: Any, **kw: Any) -> int:
        fields = list(fields)
        rows = super().bulk_update(objs, fields, *args, **kw)
        if rows and _touches_cache(fields):
            bump()
        return rows


def _on_save(sender: Any, update_fields: Iterable[str] | None = None, **_: Any) -> None:
    if _touches_cache(update_fields):
        bump()


def _on_change(sender: Any, **_: Any) -> None:
    bump()


def _on_membership(sender: Any, action: str, **_: Any) -> None:
    if action.startswith("post_"):  # each change also sends a pre_ signal
        bump()


def connect(watched: Iterable[Any], memberships: Any) -> None:
    """Bump the epoch on every change of the ``watched`` models and of ``memberships`` (the
    user-group table); called from an AppConfig's ``ready``, which names the models, so that
    this module, which the models import, imports none of them."""
    from django.db.models.signals import m2m_changed, post_delete, post_save

    for model in watched:
        uid = f"access-epoch:{model._meta.label}"
        post_save.connect(_on_save, sender=model, dispatch_uid=uid + ":save")
        post_delete.connect(_on_change, sender=model, dispatch_uid=uid + ":delete")
    # A role is a group membership (webapp/accounts/roles.py).
    m2m_changed.connect(_on_membership, sender=memberships, dispatch_uid="access-epoch:groups")
