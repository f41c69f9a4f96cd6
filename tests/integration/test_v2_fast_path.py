"""``/v2`` inference through the real web server (uvicorn with ``webapp.edge.asgi``): the fast path
(webapp/edge/gateway_fast.py) answers with no database read after the first call, and whatever
changes who may call or which version serves takes effect with the very next call.

uvicorn runs in this process (a thread) so that the fast path's counters can be read; the
database, Redis, Celery worker and Triton are the real ones of the other integration tests.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.fixtures.pipeline import add_version, create_model, mlp_payload
from tests.fixtures.triton import reference_outputs
from webapp.edge import gateway_fast
from webapp.ops.metrics_store import flush_client_calls
from webapp.ops.models import ClientTally

pytestmark = pytest.mark.integration


@pytest.fixture
def served(api, celery_worker, triton) -> None:  # type: ignore[no-untyped-def]
    create_model(api, "mlp")
    add_version(api, celery_worker, 1)
    answer = api("post", "/api/v1/models/mlp/serve?wait=true", {"version": 1})
    assert answer.status_code == 200, answer.json()


def _infer(address: str, key: str, x: np.ndarray) -> httpclient.InferResult:
    client = httpclient.InferenceServerClient(address)
    given = httpclient.InferInput("x", list(x.shape), "FP32")
    given.set_data_from_numpy(x, binary_data=True)
    wanted = [httpclient.InferRequestedOutput("y", binary_data=True)]
    return client.infer("mlp", [given], outputs=wanted, headers={"Authorization": f"Bearer {key}"})


def _refusal(address: str, key: str, x: np.ndarray) -> str:
    with pytest.raises(InferenceServerException) as refused:
        _infer(address, key, x)
    return str(refused.value)


X = np.random.default_rng(11).standard_normal((2, 8)).astype(np.float32)


def test_after_the_first_call_no_database_read_and_changes_count_at_once(
    web, served, api, celery_worker, operator
) -> None:  # type: ignore[no-untyped-def]
    from webapp.accounts.models import ApiToken
    from webapp.accounts.tokens import revoke

    before = dict(gateway_fast.stats)
    expected = reference_outputs(mlp_payload(1), X)
    for _ in range(5):
        answer = _infer(web, api.key, X)
        np.testing.assert_allclose(answer.as_numpy("y"), expected, atol=1e-5)
        assert answer.get_response()["model_version"] == "1"
    assert gateway_fast.stats["fast"] - before["fast"] == 5
    # One read of the token and one of the model, for the first call only.
    assert gateway_fast.stats["token_reads"] - before["token_reads"] == 1
    assert gateway_fast.stats["model_reads"] - before["model_reads"] == 1
    flush_client_calls()
    assert sum(r.requests for r in ClientTally.objects.filter(model_name="mlp", version="1")) == 5

    # A switch is seen by the next call: the unversioned call goes to v2.
    add_version(api, celery_worker, 2)
    switched = api("post", "/api/v1/models/mlp/serve?wait=true", {"version": 2})
    assert switched.status_code == 200, switched.json()
    assert _infer(web, api.key, X).get_response()["model_version"] == "2"

    # A revoked token is refused by the next call, with Django's reason.
    revoke(ApiToken.objects.get(user=operator))
    assert "not valid" in _refusal(web, api.key, X)


def test_a_lost_role_and_a_deactivated_user_count_at_once(web, served, api, operator) -> None:  # type: ignore[no-untyped-def]
    _infer(web, api.key, X)
    operator.groups.clear()
    assert "no role" in _refusal(web, api.key, X)
    from webapp.accounts.roles import Role, grant

    grant(operator, Role.VIEWER)  # viewers may infer, as on the infer API
    _infer(web, api.key, X)
    operator.is_active = False
    operator.save()
    assert "not valid" in _refusal(web, api.key, X)


def test_the_limits_hold_on_the_fast_path(web, served, api, settings) -> None:  # type: ignore[no-untyped-def]
    settings.INFER_RATE_PER_MINUTE = 3
    now = time.time()
    if now % 60 > 50:  # the three calls must fall in one rate window
        time.sleep(61 - now % 60)
    for _ in range(3):
        _infer(web, api.key, X)
    refusal = _refusal(web, api.key, X)
    assert "3 per minute" in refusal and "INFER_RATE_PER_MINUTE" in refusal


def test_a_call_gives_its_place_back_before_its_answer_arrives(
    web, served, api, settings, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """A client that sends its next call the moment one is answered must never be refused for
    the call it already has: when the answer arrives, nothing of its own is still counted."""
    import asyncio

    import redis

    settings.INFER_CONCURRENCY_PER_USER = 1
    client = redis.Redis.from_url(settings.LIMITS_REDIS_URL)
    # A slow Redis (a loaded host) widens the window in which a place given back after the
    # answer would still be counted when the client's next call arrives.
    plain_leave = gateway_fast.V2FastPath._leave

    async def slow_leave(self: gateway_fast.V2FastPath, user_key: str, slot: str) -> None:
        await asyncio.sleep(0.2)
        await plain_leave(self, user_key, slot)

    monkeypatch.setattr(gateway_fast.V2FastPath, "_leave", slow_leave)
    before = gateway_fast.stats["fast"]
    for _ in range(5):
        _infer(web, api.key, X)
        counted = [key for key in client.scan_iter("hub:slow:*") if client.zcard(key)]
        assert counted == [], counted
    assert gateway_fast.stats["fast"] - before == 5


def test_other_calls_and_bad_tokens_go_to_django(web, served, api) -> None:  # type: ignore[no-untyped-def]
    before = dict(gateway_fast.stats)
    assert "not valid" in _refusal(web, "tmh_not-a-token", X)
    client = httpclient.InferenceServerClient(web)
    assert client.is_model_ready("mlp", headers={"Authorization": f"Token {api.key}"})
    with pytest.raises(InferenceServerException) as unknown:
        given = httpclient.InferInput("x", [2, 8], "FP32")
        given.set_data_from_numpy(X, binary_data=True)
        client.infer("nope", [given], headers={"Authorization": f"Token {api.key}"})
    assert "nope" in str(unknown.value)
    assert gateway_fast.stats["passed"] - before["passed"] == 2  # the bad token, the unknown model
    assert gateway_fast.stats["fast"] == before["fast"]


def test_what_moves_the_access_epoch(redis_url, settings, transactional_db, operator) -> None:  # type: ignore[no-untyped-def]
    import redis
    from django.utils import timezone

    from webapp.access_epoch import KEY
    from webapp.accounts.models import ApiToken
    from webapp.registry.catalogue.models import Model

    settings.REDIS_URL = settings.LIMITS_REDIS_URL = redis_url
    client = redis.Redis.from_url(redis_url)

    def epoch() -> int:
        return int(client.get(KEY) or 0)

    token, _ = ApiToken.issue(operator, "t")
    model = Model.objects.create(name="m")
    start = epoch()
    # What the fast path never reads leaves it alone (busy traffic would empty the caches).
    ApiToken.objects.filter(pk=token.pk).update(last_used=timezone.now())
    Model.objects.filter(pk=model.pk).update(lock_holder="job", lock_expires=timezone.now())
    assert epoch() == start
    # update() sends no signal; the query set moves it itself.
    ApiToken.objects.filter(pk=token.pk).update(revoked=timezone.now())
    assert epoch() == start + 1
    Model.objects.filter(pk=model.pk).update(serving_version=3)
    assert epoch() == start + 2
    operator.groups.clear()
    assert epoch() == start + 3
    model.delete()
    assert epoch() > start + 3


def test_a_token_with_its_own_limit_is_counted_apart_from_its_owner(
    web, served, api, operator, settings
) -> None:  # type: ignore[no-untyped-def]
    """A service's token carries its own rate_per_minute: the fast path counts it under the
    token, refuses past it with the token's reason, and the owner's budget is untouched."""
    from tritonclient.utils import InferenceServerException

    from webapp.accounts.models import ApiToken

    settings.INFER_RATE_PER_MINUTE = 2  # the owner's, shared by their other tokens
    service, service_key = ApiToken.issue(operator, "service")
    ApiToken.objects.filter(pk=service.pk).update(rate_per_minute=5)
    for _ in range(5):
        _infer(web, service_key, X)
    with pytest.raises(InferenceServerException, match="this token's limit is 5 per minute"):
        _infer(web, service_key, X)
    _infer(web, api.key, X)  # the owner's own budget: untouched by the service's calls
    _infer(web, api.key, X)
    with pytest.raises(InferenceServerException, match="the limit is 2 per minute per user"):
        _infer(web, api.key, X)
    unlimited, unlimited_key = ApiToken.issue(operator, "unlimited")
    ApiToken.objects.filter(pk=unlimited.pk).update(rate_per_minute=0)
    for _ in range(8):
        _infer(web, unlimited_key, X)
