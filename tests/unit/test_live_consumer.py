"""``/ws/live/``: one connection follows a bounded number of topics and reads bounded messages.

A client that keeps subscribing must not make the consumer join a channel-layer group per
topic without end (each is a Redis set entry and a fan-out target), nor make it parse a
message of any size.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings

from tests.fixtures.users import make_user
from webapp.live_consumer import LiveConsumer

# The consumer reads the user's role on another thread's database connection: committed rows.
pytestmark = pytest.mark.django_db(transaction=True)


def run_async(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """A fresh loop in another thread: a browser session's loop may own this one."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, scenario()).result(timeout=30)


@pytest.fixture(autouse=True)
def in_memory_layer(settings) -> None:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture
def user() -> Any:
    return make_user("vera", "viewer")


def joined_groups() -> int:
    """Groups of the in-memory layer that have a member (all of them are this test's)."""
    layer: Any = get_channel_layer()
    return sum(1 for members in layer.groups.values() if members)


async def connected(user: Any) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(LiveConsumer.as_asgi(), "/ws/live/")
    communicator.scope["user"] = user
    ok, _ = await communicator.connect()
    assert ok
    return communicator


def test_the_topic_cap_is_a_setting_of_32_by_default() -> None:
    assert django_settings.LIVE_MAX_TOPICS == 32
    assert django_settings.LIVE_MAX_MESSAGE_BYTES >= 32 * 70  # a full subscription fits


def test_subscriptions_stop_at_the_cap_across_messages(settings, user) -> None:
    settings.LIVE_MAX_TOPICS = 3

    async def scenario() -> None:
        ws = await connected(user)
        await ws.send_json_to({"subscribe": ["server", "models"]})
        assert await ws.receive_json_from() == {"subscribed": ["models", "server"]}
        await ws.send_json_to({"subscribe": ["jobs", "job.a", "job.b"]})
        reply = await ws.receive_json_from()
        assert reply["code"] == "too_many_topics"
        assert "3" in reply["error"] and reply["limit"] == 3
        assert reply["subscribed"] == ["jobs", "models", "server"]
        for n in range(20):  # asking again and again changes nothing
            await ws.send_json_to({"subscribe": [f"job.x{n}"]})
            assert (await ws.receive_json_from())["code"] == "too_many_topics"
        assert joined_groups() == 3
        # Topics already followed are no new subscription: no error.
        await ws.send_json_to({"subscribe": ["server"]})
        assert await ws.receive_json_from() == {"subscribed": ["jobs", "models", "server"]}
        await ws.disconnect()
        assert joined_groups() == 0

    run_async(scenario)


def test_many_messages_of_few_topics_stop_at_the_default_cap(user) -> None:
    async def scenario() -> None:
        ws = await connected(user)
        for n in range(40):
            await ws.send_json_to({"subscribe": [f"job.t{n}"]})
            await ws.receive_json_from()
        assert joined_groups() == 32
        await ws.disconnect()

    run_async(scenario)


def test_a_message_over_the_size_cap_is_refused_unread(settings, user) -> None:
    settings.LIVE_MAX_MESSAGE_BYTES = 1024

    async def scenario() -> None:
        ws = await connected(user)
        huge = json.dumps({"subscribe": ["server"] + ["x" * 50] * 100})
        await ws.send_to(text_data=huge)
        reply = await ws.receive_json_from()
        assert reply["code"] == "message_too_large"
        assert "1024" in reply["error"]
        assert joined_groups() == 0
        # The connection stays usable for proper messages.
        await ws.send_json_to({"subscribe": ["server"]})
        assert await ws.receive_json_from() == {"subscribed": ["server"]}
        await ws.disconnect()

    run_async(scenario)


def test_garbage_gets_an_error_not_a_dropped_connection(user) -> None:
    async def scenario() -> None:
        ws = await connected(user)
        await ws.send_to(text_data="{not json")
        assert (await ws.receive_json_from())["code"] == "invalid_message"
        await ws.send_to(bytes_data=b"\x00\x01")
        assert (await ws.receive_json_from())["code"] == "invalid_message"
        await ws.send_json_to({"subscribe": ["server"]})
        assert await ws.receive_json_from() == {"subscribed": ["server"]}
        await ws.disconnect()

    run_async(scenario)
