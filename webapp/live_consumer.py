"""The one websocket endpoint: ``/ws/live/``. Clients subscribe to topics; events are forwarded.

Message from the browser: ``{"subscribe": ["server", "models"]}``.
Message to the browser:   ``{"topic": "server", "data": {...}}``.

Each topic followed is a channel-layer group membership (a Redis entry and a fan-out target),
so one connection follows at most ``LIVE_MAX_TOPICS`` topics and sends messages of at most
``LIVE_MAX_MESSAGE_BYTES``; beyond either the browser gets
``{"error": "...", "code": "too_many_topics" | "message_too_large", "limit": N}``.
Pages follow a handful of topics.
"""

from __future__ import annotations

import json
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.utils import translation

from webapp.accounts.language import SESSION_KEY, supported
from webapp.accounts.roles import Role, role_of
from webapp.live import TOPIC_RE, group_name
from webapp.text import localized

USAGE = 'send {"subscribe": [topic, ...]}'


class LiveConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        # The same rule as every page (webapp.accounts.auth): no role, nothing to follow.
        if await database_sync_to_async(role_of)(user) is Role.NONE:
            await self.close(code=4403)
            return
        self.topics: set[str] = set()
        # Messages in pushed data are said in the language the person's pages use.
        session = self.scope.get("session")
        saved = session.get(SESSION_KEY) if session is not None else None
        self.language = supported(saved) or settings.LANGUAGE_CODE
        await self.accept()

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        """Check the size before parsing; answer garbage instead of dropping the connection."""
        limit = settings.LIVE_MAX_MESSAGE_BYTES
        if _size(text_data, bytes_data, limit) > limit:
            await self._error(
                f"A message may be at most {limit} bytes.", "message_too_large", limit=limit
            )
            return
        try:
            content = json.loads(text_data) if text_data is not None else None
        except ValueError:
            content = None
        if content is None:
            await self._error(f"Not a JSON text message: {USAGE}.", "invalid_message")
            return
        await self.receive_json(content, **kwargs)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        wanted = content.get("subscribe") if isinstance(content, dict) else None
        if not isinstance(wanted, list):
            await self._error(USAGE, "invalid_message")
            return
        limit = settings.LIVE_MAX_TOPICS
        refused = 0
        for topic in wanted:
            if not (isinstance(topic, str) and TOPIC_RE.match(topic)) or topic in self.topics:
                continue
            if len(self.topics) >= limit:
                refused += 1
                continue
            await self.channel_layer.group_add(group_name(topic), self.channel_name)
            self.topics.add(topic)
        if refused:
            await self._error(
                f"A connection may follow at most {limit} topics; {refused} more were not "
                "subscribed. Open a new connection to follow others.",
                "too_many_topics",
                limit=limit,
                subscribed=sorted(self.topics),
            )
            return
        await self.send_json({"subscribed": sorted(self.topics)})

    async def _error(self, message: str, code: str, **extra: Any) -> None:
        # The API's error shape (webapp/errors.py), plus what the client needs to adapt.
        await self.send_json({"error": message, "code": code, **extra})

    async def disconnect(self, code: int) -> None:
        for topic in getattr(self, "topics", ()):
            await self.channel_layer.group_discard(group_name(topic), self.channel_name)

    async def live_event(self, event: dict[str, Any]) -> None:
        with translation.override(self.language):
            data = localized(event["data"])
        await self.send_json({"topic": event["topic"], "data": data})


def _size(text: str | None, data: bytes | None, limit: int) -> int:
    """The frame's size in bytes, or a lower bound above ``limit`` without encoding it."""
    if text is None:
        return len(data or b"")
    # Characters never outnumber UTF-8 bytes: a text that is too long is not encoded at all.
    if len(text) > limit:
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))
