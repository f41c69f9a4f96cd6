"""Round trips through a real Redis: a Celery task to a real worker process, and a websocket
event through the Redis channel layer to the live consumer."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from model_store import spawn
from webapp.live import group_name
from webapp.live_consumer import LiveConsumer

pytestmark = pytest.mark.integration


def run_async(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run on a fresh loop in another thread: Playwright's session loop may own this thread."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, scenario()).result(timeout=60)


ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def celery_worker_process(redis_url: str, tmp_path: Path):
    env = dict(os.environ, REDIS_URL=redis_url, HUB_VAR_DIR=str(tmp_path))
    log = (tmp_path / "worker.log").open("wb")
    proc = spawn.start(
        [sys.executable, "-m", "celery", "-A", "workers.celery", "worker", "--pool=solo",
         "--loglevel=INFO", "-n", f"test-{os.getpid()}@%h", "--without-gossip", "--without-mingle"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()


def test_a_task_round_trips_through_redis_to_a_real_worker(
    redis_url: str, celery_worker_process
) -> None:
    client = Celery(broker=redis_url, backend=redis_url)
    started = time.monotonic()
    result = client.send_task("workers.tasks.health.ping", args=["hello"])
    reply = result.get(timeout=60)
    assert reply["echo"] == "hello"
    assert (
        reply["pid"] == celery_worker_process.pid
    )  # the solo pool runs tasks in the worker itself
    assert time.monotonic() - started < 60


# Committed rows: the consumer reads the user's role on another thread's connection.
@pytest.mark.django_db(transaction=True)
def test_a_live_event_reaches_a_websocket_through_the_redis_layer(
    redis_url: str, settings, operator
) -> None:
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [redis_url], "prefix": f"test{os.getpid()}"},
        }
    }

    async def scenario() -> None:
        communicator = WebsocketCommunicator(LiveConsumer.as_asgi(), "/ws/live/")
        communicator.scope["user"] = operator
        connected, _ = await communicator.connect()
        assert connected
        await communicator.send_json_to({"subscribe": ["server", "bad topic!"]})
        assert await communicator.receive_json_from(timeout=5) == {"subscribed": ["server"]}
        layer = get_channel_layer()
        assert type(layer).__name__ == "RedisChannelLayer"
        await layer.group_send(
            group_name("server"), {"type": "live.event", "topic": "server", "data": {"ready": True}}
        )
        assert await communicator.receive_json_from(timeout=5) == {
            "topic": "server",
            "data": {"ready": True},
        }
        await communicator.disconnect()

    run_async(scenario)


def test_anonymous_websockets_are_refused(settings) -> None:
    from django.contrib.auth.models import AnonymousUser

    async def scenario() -> None:
        communicator = WebsocketCommunicator(LiveConsumer.as_asgi(), "/ws/live/")
        communicator.scope["user"] = AnonymousUser()
        connected, code = await communicator.connect()
        assert not connected and code == 4401

    run_async(scenario)
