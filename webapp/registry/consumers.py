"""The one websocket endpoint: ``/ws/live/``. Clients subscribe to topics; events are forwarded.

Message from the browser: ``{"subscribe": ["server", "models"]}``.
Message to the browser:   ``{"topic": "server", "data": {...}}``.
"""

from __future__ import annotations

from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from webapp.live import TOPIC_RE, group_name

MAX_TOPICS = 20


class LiveConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        self.topics: set[str] = set()
        await self.accept()

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        wanted = content.get("subscribe") if isinstance(content, dict) else None
        if not isinstance(wanted, list):
            await self.send_json({"error": 'send {"subscribe": [topic, ...]}'})
            return
        for topic in wanted[:MAX_TOPICS]:
            if isinstance(topic, str) and TOPIC_RE.match(topic) and topic not in self.topics:
                await self.channel_layer.group_add(group_name(topic), self.channel_name)
                self.topics.add(topic)
        await self.send_json({"subscribed": sorted(self.topics)})

    async def disconnect(self, code: int) -> None:
        for topic in getattr(self, "topics", ()):
            await self.channel_layer.group_discard(group_name(topic), self.channel_name)

    async def live_event(self, event: dict[str, Any]) -> None:
        await self.send_json({"topic": event["topic"], "data": event["data"]})
