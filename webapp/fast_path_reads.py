"""What the ``/v2`` fast path (webapp/edge/gateway_fast.py) reads from the hub, through Django.

The fast path itself imports no Django; ``webapp.edge.asgi`` hands it :data:`READS`. Each read
runs in a worker thread, so each first lets go of a connection the database may have closed.
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings as django_settings
from django.db import close_old_connections
from django.utils import timezone

from webapp.accounts.models import ApiToken
from webapp.accounts.roles import Role
from webapp.edge.canary_split import split_of
from webapp.edge.gateway_fast import CapturedCall, Grant, Route, Target
from webapp.inference.tokens import Refusal, token_verdict
from webapp.ops.metrics_store import record_client_call
from webapp.registry.capture import recorder
from webapp.registry.catalogue.models import Model
from webapp.registry.serving.rollout import inference_candidates


class DjangoReads:
    """:class:`webapp.edge.gateway_fast.HubReads` over the ORM and Django's settings."""

    @property
    def settings(self) -> Any:
        return django_settings  # read per call, so settings changed at run time hold

    def grant(self, key: str) -> Grant | None:
        close_old_connections()
        # The same verdict as the token middleware's: what it refuses, Django answers (with
        # the reason); a node token is served by Django alone (its path rules live there).
        verdict = token_verdict(key, timezone.now())
        if isinstance(verdict, Refusal) or verdict.node is not None:
            return None
        if verdict.role is Role.NONE:
            return None
        token = verdict.token
        return Grant(
            user_key=str(token.user.pk),
            token_pk=token.pk,
            # Past the earlier of the token's expiry and the directory's vouching, the grant
            # ends and Django's path answers (and says why).
            expires=verdict.ends.timestamp() if verdict.ends else None,
            read_at=time.time(),
            touched_at=token.last_used.timestamp() if token.last_used else 0.0,
            rate_per_minute=token.rate_per_minute,
            username=token.user.get_username(),
        )

    def route(self, name: str) -> Route | None:
        close_old_connections()
        model = (
            Model.objects.filter(name=name)
            .select_related("capture_policy")
            .only("id", "name", "serving_version", "placement", "canary", "capture_policy")
            .first()
        )
        if model is None:
            return None
        policy = getattr(model, "capture_policy", None)
        return Route(
            model.name,
            model.serving_version,
            bool(model.placement),
            time.time(),
            split=split_of(model.canary),
            capture_rate=policy.sample_rate if policy is not None and policy.active else 0.0,
        )

    def targets(self, name: str, version: int) -> list[Target]:
        close_old_connections()
        model = Model.objects.filter(name=name).first()
        return inference_candidates(model, version) if model is not None else []

    def touch(self, token_pk: int) -> None:
        close_old_connections()
        ApiToken.objects.filter(pk=token_pk).update(last_used=timezone.now())

    def count_call(self, model: str, version: int, latency_ms: float, ok: bool) -> None:
        record_client_call(model, version, latency_ms, ok=ok)

    def capture(self, call: CapturedCall) -> None:
        recorder.offer(
            recorder.Item(
                call.model, call.version, call.caller, call.latency_ms, "v2",
                request=call.request, request_header_length=call.request_header_length,
                answer=call.answer, answer_header_length=call.answer_header_length,
            )
        )  # fmt: skip


READS = DjangoReads()
