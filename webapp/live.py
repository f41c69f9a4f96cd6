"""Live updates: publish a topic event to every open page that subscribed to it.

Workers and web processes publish through the Channels layer (Redis in every real deployment);
``webapp.live_consumer.LiveConsumer`` forwards the events to browsers. Pages never depend
on it: they also poll, so a missed push only delays an update.
"""

from __future__ import annotations

import logging
import re

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from model_store.text import as_json

log = logging.getLogger(__name__)

TOPIC_RE = re.compile(r"^[a-z][a-z0-9_.-]{0,60}$")


def group_name(topic: str) -> str:
    if not TOPIC_RE.match(topic):
        raise ValueError(f"invalid topic {topic!r}")
    return f"live.{topic}"


def publish(topic: str, data: dict[str, object]) -> None:
    """Best effort: a push that fails is logged, never raised into the caller's work."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(
            group_name(topic), {"type": "live.event", "topic": topic, "data": as_json(data)}
        )
    except Exception:
        log.warning("live push on %r failed", topic, exc_info=True)
