"""A signed-in user without a role sees one page ("ask an admin") and nothing else.

Such users exist: an admin who creates a Django user in the admin and forgets the group. They
must not read models, jobs, the server page, ``/metrics``, the API or the live websocket.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client

from tests.fixtures.users import PASSWORD, signed_in, token_for
from webapp.live_consumer import LiveConsumer
from webapp.registry.catalogue.models import Model
from webapp.registry.jobs.models import Job

PAGES = [
    "/models/",
    "/models/new/",
    "/models/m/",
    "/jobs/",
    "/server/",
    "/diagnostics/",
    "/audit/",
]
API = ["/api/v1/models", "/api/v1/jobs", "/api/v1/server", "/api/v1/health", "/api/v1/schema"]


@pytest.fixture
def nobody(db: None) -> Any:
    """A user as the Django admin creates one: active, signed in, in no hub group."""
    return get_user_model().objects.create_user("nemo", password=PASSWORD)


@pytest.fixture
def nobody_client(nobody: Any) -> Client:
    return signed_in(nobody)


@pytest.fixture
def job(db: None) -> Job:
    return Job.objects.create(kind="compile", model=Model.objects.create(name="m"))


@pytest.mark.parametrize("path", PAGES)
def test_a_user_without_a_role_sees_only_the_ask_an_admin_page(
    nobody_client: Client, job: Job, path: str
) -> None:
    response = nobody_client.get(path)
    assert response.status_code == 403
    body = response.content.decode()
    assert "ask an admin" in body.lower()
    assert 'action="/logout/"' in body  # the way out
    for link in ('href="/jobs/"', 'href="/server/"', 'href="/audit/"', 'href="/api/'):
        assert link not in body
    assert "Content-Security-Policy" in response.headers


def test_a_user_without_a_role_cannot_open_a_job(nobody_client: Client, job: Job) -> None:
    assert nobody_client.get(f"/jobs/{job.uuid}/").status_code == 403


def test_a_user_without_a_role_can_sign_out(nobody_client: Client) -> None:
    response = nobody_client.post("/logout/")
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert nobody_client.get("/models/").status_code == 302  # signed out: back to sign-in


def test_signing_in_without_a_role_lands_on_the_ask_an_admin_page(client: Client, nobody) -> None:
    response = client.post("/login/", {"username": "nemo", "password": PASSWORD}, follow=True)
    assert response.status_code == 403
    assert "ask an admin" in response.content.decode().lower()


@pytest.mark.parametrize("path", API)
def test_the_api_refuses_a_session_without_a_role(nobody_client: Client, path: str) -> None:
    response = nobody_client.get(path)
    assert response.status_code == 403
    assert response.json()["code"] == "no_role"
    assert "admin" in response.json()["error"]


def test_the_api_refuses_a_token_without_a_role(client: Client, nobody) -> None:
    response = client.get("/api/v1/models", HTTP_AUTHORIZATION=f"Token {token_for(nobody)}")
    assert response.status_code == 403
    assert response.json() == {
        "error": response.json()["error"],
        "code": "no_role",
    }


def test_metrics_refuse_a_user_without_a_role(client: Client, nobody, settings) -> None:
    settings.METRICS_PUBLIC = False
    assert signed_in(nobody).get("/metrics").status_code == 403
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token_for(nobody)}")
    assert response.status_code == 403


def test_a_viewer_still_reads_everything(viewer_client: Client, job: Job, settings) -> None:
    settings.TRITON_URL = "127.0.0.1:9"
    for path in ("/models/", "/jobs/", f"/jobs/{job.uuid}/"):
        assert viewer_client.get(path).status_code == 200
    assert viewer_client.get("/api/v1/jobs").status_code == 200


def _connect(user: Any) -> tuple[bool, int | None]:
    async def scenario() -> tuple[bool, int | None]:
        communicator = WebsocketCommunicator(LiveConsumer.as_asgi(), "/ws/live/")
        communicator.scope["user"] = user
        connected, code = await communicator.connect()
        if connected:
            await communicator.disconnect()
        return connected, code

    # A fresh loop in another thread, as in the integration tests (a browser session's loop
    # may own this one); the consumer's database reads then use another connection, hence
    # the transactional database below.
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, scenario()).result(timeout=30)


@pytest.mark.django_db(transaction=True)
def test_the_live_websocket_refuses_a_user_without_a_role() -> None:
    from tests.fixtures.users import make_user

    nobody = get_user_model().objects.create_user("nemo", password=PASSWORD)
    connected, code = _connect(nobody)
    assert not connected and code == 4403
    assert _connect(make_user("vera", "viewer"))[0]
