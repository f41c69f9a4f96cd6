"""The hot path of ``/v2``: inference calls checked and passed to Triton in the event loop.

Through Django, an inference on the ``/v2`` gateway (:mod:`webapp.gateway`) cost about 15 ms
more than calling Triton directly (bench/README.md): the middleware stack, the token's and the
model's rows read on every call, a hand-off to a web thread and back, three Redis round trips
for the limits. Here an authenticated ``POST /v2/models/{name}[/versions/{v}]/infer`` is
answered before Django, with the same checks:

* the token must be live, unexpired, not a node's, and its owner must have a role (any role
  may infer, as on the infer API); the token (by its SHA-256) and the model are kept in memory
  after their first call, and every call reads the access epoch (:mod:`webapp.access_epoch`) in
  the Redis round trip that also counts its limits, forgetting what is kept when the epoch
  moved: a revoked token, a deactivated user, a lowered role, a switched or re-placed model
  count from the next call. Nothing is kept longer than :data:`MAX_AGE_SECONDS` in any case;
* ``INFER_RATE_PER_MINUTE`` and ``INFER_CONCURRENCY_PER_USER`` in the same Redis keys as the
  Django path (so both count together), ``INFER_MAX_REQUEST_BYTES`` from the declared length
  before a byte is read, ``INFER_TIMEOUT_SECONDS`` for Triton's answer;
* each call is counted in the hub's metrics for its model, and Triton's answer (status, body,
  ``Content-Type``, ``Inference-Header-Content-Length``) is passed back as it is.

Everything else goes to Django unchanged, before any byte of the body is read: other ``/v2``
calls, no token or a session cookie, a token or model it cannot vouch for (Django answers
401/403/404 with the reason), a body without a declared length, no Redis, or Redis failing.
The fast path says yes faster; the only no it says itself is a limit's.

This module imports no Django (a contract in pyproject.toml): what it reads from the database
and the settings comes through :class:`HubReads`, which ``webapp.edge.asgi`` builds from
``webapp.fast_path_reads``. Its cost is then what it does, not what importing Django pulls in,
and a test can drive it with reads of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import logging
import random
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import redis
import redis.asyncio as aioredis

from model_store.runtime.keepalive_http import AnswerError, KeepAliveClient
from webapp.edge.canary_split import WINDOW_TTL_SECONDS, Split, choose, count_commands
from webapp.edge.shared import (
    EPOCH_KEY,
    PASSED_BACK,
    PASSED_ON,
    PREFIX,
    WINDOW_SECONDS,
    Receive,
    Scope,
    Send,
    rate_key,
    slow_key,
)

ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Target = tuple[str, str, str | None] | None

#: The longest anything is kept without a database read, even if the epoch never moved
#: (a write made while Redis was unreachable could not move it).
MAX_AGE_SECONDS = 60.0
#: Where a model placed on several nodes is served is re-read this often (a node that stops
#: reporting is marked down within its heartbeat timeout anyway).
NODES_MAX_AGE_SECONDS = 2.0
#: A canary's counts are written to Redis at most this often (added up in memory between).
COUNT_FLUSH_SECONDS = 0.2
_INFER = re.compile(
    r"/v2/models/(?P<name>[A-Za-z0-9][A-Za-z0-9_.\-]{0,63})"
    r"(?:/versions/(?P<version>[1-9][0-9]{0,18}))?/infer/?"
)
_HEADERS_ON = {h.lower().encode(): h for h in PASSED_ON}
#: The Redis side of a call's checks, as one script: one command instead of a pipeline of
#: seven (measured: a seven-command pipeline cost ~0.6 ms in redis-py's asyncio client, one
#: command ~0.1 ms). The same keys as the Django path (webapp/registry/tryit/ratelimit.py,
#: webapp/slow_requests.py), so that both count together.
_COUNT_LUA = """
local epoch = redis.call('GET', KEYS[1]) or ''
local rate = 0
if ARGV[1] == '1' then
  rate = redis.call('INCR', KEYS[2])
  redis.call('EXPIRE', KEYS[2], ARGV[2])
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], 0, ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[5])
local in_flight = redis.call('ZCARD', KEYS[3])
redis.call('EXPIRE', KEYS[3], ARGV[6])
return {epoch, rate, in_flight}
"""

log = logging.getLogger(__name__)
#: Counts that tests and the benchmark read: calls answered here, calls passed to Django, and
#: database reads of tokens and models (one per token or model after the epoch moved).
stats = {"fast": 0, "passed": 0, "token_reads": 0, "model_reads": 0}


@dataclass
class Grant:
    """What a token may do, as read from the database."""

    user_key: str
    token_pk: int
    expires: float | None
    read_at: float
    touched_at: float  # when ``last_used`` was last written
    #: The token's own calls a minute (``ApiToken.rate_per_minute``; 0: none), counted under
    #: the token; None: its owner's ``INFER_RATE_PER_MINUTE``, counted under the owner.
    rate_per_minute: int | None = None
    #: The owner's user name, which a captured call records (never the token).
    username: str = ""

    def budget(self, default: int) -> tuple[str, int]:
        """Whose rate window this call is counted in, and its limit (the Django path's too)."""
        if self.rate_per_minute is not None:
            return f"infer-token:{self.token_pk}", self.rate_per_minute
        return f"infer:{self.user_key}", default


@dataclass
class Route:
    """A model as the fast path needs it."""

    name: str
    serving_version: int | None
    placed: bool  # a placement other than the default (local only)
    read_at: float
    split: Split | None = None  # a canary's share of unpinned calls (webapp/edge/canary_split.py)
    #: Percent of answered calls the model's capture keeps (0: capture off).
    capture_rate: float = 0.0
    targets: dict[int, tuple[float, list[Target]]] = field(default_factory=dict)


@dataclass
class _Cache:
    epoch: bytes | str | None = None
    grants: dict[str, Grant] = field(default_factory=dict)
    routes: dict[str, Route] = field(default_factory=dict)

    def align(self, epoch: bytes | str | None) -> bool:
        """Forget everything if the epoch moved; True when it had."""
        if epoch == self.epoch:
            return False
        self.epoch, self.grants, self.routes = epoch, {}, {}
        return True

    def forget(self) -> None:
        self.epoch, self.grants, self.routes = None, {}, {}


class Limits(Protocol):
    """The settings the fast path reads on every call (Django's ``settings`` is one)."""

    LIMITS_REDIS_URL: str
    INFER_MAX_REQUEST_BYTES: int
    INFER_TIMEOUT_SECONDS: float
    INFER_RATE_PER_MINUTE: int
    INFER_CONCURRENCY_PER_USER: int
    TRITON_URL: str


class HubReads(Protocol):
    """What the fast path needs from the hub's database, each called in a worker thread."""

    @property
    def settings(self) -> Limits: ...

    def grant(self, key: str) -> Grant | None:
        """What the token ``key`` may do, or None when the fast path must not vouch for it."""

    def route(self, name: str) -> Route | None:
        """The model called ``name``, or None when there is none."""

    def targets(self, name: str, version: int) -> list[Target]:
        """The nodes that serve ``version`` of a placed model, as ``(node, url, token)``."""

    def touch(self, token_pk: int) -> None:
        """Note that the token was used (its ``last_used``)."""

    def count_call(self, model: str, version: int, latency_ms: float, ok: bool) -> None:
        """Count one call in the hub's metrics for the model (cheap: called on the loop)."""

    def capture(self, call: CapturedCall) -> None:
        """Hand an answered call to the capture writer (called on the loop: it must only
        queue, never block)."""


@dataclass
class CapturedCall:
    """An answered call the model's capture sampled: both bodies as they crossed the hub."""

    model: str
    version: int
    caller: str
    latency_ms: float
    request: bytes
    request_header_length: int | None
    answer: bytes
    answer_header_length: int | None


class _Refused(Exception):
    def __init__(self, message: str, status: int, retry_after: int) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class V2FastPath:
    """ASGI middleware: answers authenticated ``/v2`` inference itself, passes the rest on."""

    def __init__(self, app: ASGIApp, hub: HubReads) -> None:
        self.app = app
        self.hub = hub
        self.cache = _Cache()
        self._turn = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._redis: dict[str, aioredis.Redis] = {}
        self._count_script: Any = None
        self._client: KeepAliveClient | None = None
        self._background: set[asyncio.Task[None]] = set()
        #: A canary's counts not yet written: (window key, field) -> calls.
        self._counts: dict[tuple[str, str], int] = {}
        self._flush_pending = False

    async def aclose(self) -> None:
        """Close the connections to Redis and Triton (a server shutting down, or a test)."""
        if self._counts:
            await self._write_counts()  # a canary's last calls still count
        if self._client is not None:
            await self._client.aclose()
        for client in self._redis.values():
            await client.aclose()
        self._loop, self._redis, self._client, self._count_script = None, {}, None, None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        call = self._call_of(scope) if scope["type"] == "http" else None
        if call is None:
            await self.app(scope, receive, send)
            return
        key, name, version, length = call
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # clients belong to the loop that made them
            self._loop, self._redis, self._client, self._count_script = loop, {}, None, None
            self._flush_pending = False  # a flush timed on the old loop never runs
        try:
            admitted = await self._admit(key, name, version)
        except (redis.RedisError, OSError) as exc:
            log.warning("Fast path off for this call (Redis: %s); Django answers it", exc)
            self.cache.forget()
            admitted = None
        except _Refused as refused:
            stats["fast"] += 1
            await _answer_error(send, str(refused), refused.status, refused.retry_after)
            return
        if admitted is None:
            stats["passed"] += 1
            await self.app(scope, receive, send)
            return
        grant, slot, route, version_now, target = admitted
        stats["fast"] += 1
        left = False

        async def leave() -> None:
            nonlocal left
            if not left:
                left = True
                await self._leave(grant.user_key, slot)

        try:
            await self._forward(
                scope, receive, send, length, route, version_now, target, grant, leave
            )
        finally:
            await leave()

    # -- which calls ------------------------------------------------------------------------
    def _call_of(self, scope: Scope) -> tuple[str, str, int | None, int] | None:
        """``(token key, model, version, body length)`` of a call this path may take."""
        settings = self.hub.settings
        if scope["method"] != "POST" or not settings.LIMITS_REDIS_URL:
            return None
        found = _INFER.fullmatch(scope["path"])
        if found is None:
            return None
        authorization = length = None
        for raw_name, raw_value in scope["headers"]:
            if raw_name == b"authorization":
                authorization = raw_value
            elif raw_name == b"content-length":
                length = raw_value
            elif raw_name == b"transfer-encoding":
                return None  # a body without a declared length: Django's guard decides
        if authorization is None or length is None or not length.isdigit():
            return None
        scheme, _, key = authorization.decode("latin-1").partition(" ")
        key = key.strip()
        if scheme.lower() not in ("token", "bearer") or not key:
            return None
        if int(length) > settings.INFER_MAX_REQUEST_BYTES:
            return None  # Django answers 413 with the limit's name
        version = int(found["version"]) if found["version"] else None
        return key, found["name"], version, int(length)

    # -- the checks ---------------------------------------------------------------------------
    async def _admit(
        self, key: str, name: str, version: int | None
    ) -> tuple[Grant, str, Route, int, Target] | None:
        """``(token's grant, concurrency slot, model, version, target)``, or None for Django."""
        client = self._redis_client()
        key_hash = hashlib.sha256(key.encode()).hexdigest()
        for _ in range(3):
            now = time.time()
            grant, route = self._kept(key_hash, name, now)
            if grant is None or route is None:
                self.cache.align(await client.get(EPOCH_KEY))
                if grant is None:
                    stats["token_reads"] += 1
                    grant = await asyncio.to_thread(self.hub.grant, key)
                    if grant is None:
                        return None
                    self.cache.grants[key_hash] = grant
                if route is None:
                    stats["model_reads"] += 1
                    route = await asyncio.to_thread(self.hub.route, name)
                    if route is None:
                        return None
                    self.cache.routes[name] = route
            if grant.expires is not None and grant.expires <= now:
                return None  # Django says when it expired
            slot = uuid.uuid4().hex
            epoch, rate_count, in_flight = await self._count(client, grant, slot, now)
            if not self.cache.align(epoch):
                break
            await client.zrem(slow_key(grant.user_key), slot)  # moved meanwhile: look again
        else:
            return None
        self._check_limits(grant, slot, rate_count, in_flight, now)
        # A call that names no version goes to the serving one, or to a canary's candidate
        # with the step's probability.
        chosen = version or choose(route.serving_version, route.split)
        if chosen is None:
            await client.zrem(slow_key(grant.user_key), slot)
            return None  # nothing served: Django says so
        target = await self._target(route, chosen, now)
        self._touch_later(grant, now)
        return grant, slot, route, chosen, target

    def _kept(self, key_hash: str, name: str, now: float) -> tuple[Grant | None, Route | None]:
        grant = self.cache.grants.get(key_hash)
        route = self.cache.routes.get(name)
        if grant is not None and now - grant.read_at > MAX_AGE_SECONDS:
            grant = None
        if route is not None and now - route.read_at > MAX_AGE_SECONDS:
            route = None
        return grant, route

    async def _count(
        self, client: aioredis.Redis, grant: Grant, slot: str, now: float
    ) -> tuple[bytes | str | None, int, int]:
        """One round trip: the epoch, this call counted in the rate window and in flight."""
        settings = self.hub.settings
        user_key = grant.user_key
        who, limit = grant.budget(settings.INFER_RATE_PER_MINUTE)
        longest = settings.INFER_TIMEOUT_SECONDS + 30
        window = int(now // WINDOW_SECONDS)
        script = self._count_script
        if script is None:
            script = self._count_script = client.register_script(_COUNT_LUA)
        epoch, rate_count, in_flight = await script(
            keys=[EPOCH_KEY, rate_key(who, window), slow_key(user_key)],
            args=[
                1 if limit > 0 else 0,
                WINDOW_SECONDS * 2,
                repr(now - longest),
                repr(now),
                slot,
                int(longest) + 1,
            ],
            client=client,
        )
        return epoch or None, int(rate_count), int(in_flight)

    def _check_limits(
        self, grant: Grant, slot: str, rate_count: int, in_flight: int, now: float
    ) -> None:
        user_key = grant.user_key
        who, rate_limit = grant.budget(self.hub.settings.INFER_RATE_PER_MINUTE)
        concurrency = self.hub.settings.INFER_CONCURRENCY_PER_USER
        refused: _Refused | None = None
        if rate_limit > 0 and rate_count > rate_limit:
            window = int(now // WINDOW_SECONDS)
            retry_after = max(1, int((window + 1) * WINDOW_SECONDS - now))
            whose, knob = (
                ("this token's limit is", "its rate_per_minute")
                if who.startswith("infer-token:")
                else ("the limit is", "INFER_RATE_PER_MINUTE")
            )
            per = "" if who.startswith("infer-token:") else " per user"
            refused = _Refused(
                f"Too many inference requests: {whose} {rate_limit} per minute{per}. "
                f"Try again in {retry_after} s, or ask an admin to raise {knob}.",
                429,
                retry_after,
            )
        elif in_flight > concurrency:
            refused = _Refused(
                f"You have {concurrency} slow requests running (inference or waiting "
                "switches); the limit is INFER_CONCURRENCY_PER_USER. Wait for one to finish.",
                429,
                1,
            )
        if refused is not None:
            self._later(self._leave(user_key, slot))
            raise refused

    async def _target(self, route: Route, version: int, now: float) -> Target:
        if not route.placed:
            return None
        kept = route.targets.get(version)
        if kept is None or now - kept[0] > NODES_MAX_AGE_SECONDS:
            kept = (now, await asyncio.to_thread(self.hub.targets, route.name, version))
            route.targets[version] = kept
        candidates = kept[1]
        return candidates[next(self._turn) % len(candidates)] if candidates else None

    async def _leave(self, user_key: str, slot: str) -> None:
        # Should Redis fail here, the entry expires after the longest call anyway.
        with contextlib.suppress(redis.RedisError):
            await self._redis_client().zrem(slow_key(user_key), slot)

    def _touch_later(self, grant: Grant, now: float) -> None:
        # ``last_used`` is a hint written at most once a minute, off the call's path.
        if now - grant.touched_at > 60:
            grant.touched_at = now
            self._later(asyncio.to_thread(self.hub.touch, grant.token_pk))

    def _later(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- passing the call on ---------------------------------------------------------------
    async def _forward(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        length: int,
        route: Route,
        version: int,
        target: Target,
        grant: Grant,
        leave: Callable[[], Awaitable[None]],
    ) -> None:
        """Pass the call to Triton and its answer back. ``leave`` gives the concurrency place
        back, and runs before the answer goes out: a client that sends its next call the
        moment this one is answered must not find this one still counted."""
        model = route.name
        body = await _read_body(receive, length)
        if body is None:
            return  # the client went away
        settings = self.hub.settings
        address = settings.TRITON_URL if target is None else target[1]
        host, _, port = address.split("://")[-1].rstrip("/").partition(":")
        path = f"{PREFIX}/models/{model}/versions/{version}/infer"
        headers = {
            _HEADERS_ON[name]: value.decode("latin-1")
            for name, value in scope["headers"]
            if name in _HEADERS_ON
        }
        started = time.perf_counter()
        try:
            answer = await self._triton().post(
                host,
                int(port or 80),
                path,
                body,
                headers,
                timeout=float(settings.INFER_TIMEOUT_SECONDS),
            )
        except (OSError, TimeoutError, AnswerError) as exc:
            self.hub.count_call(model, version, 0.0, ok=False)
            self._count_for_canary(route.split, version, 0.0, ok=False)
            await leave()
            await _answer_error(send, f"Triton did not answer: {exc or type(exc).__name__}", 503)
            return
        status, payload = answer.status, answer.body
        passed = [
            (h.lower().encode(), answer.headers[h.lower()].encode("latin-1"))
            for h in PASSED_BACK
            if h.lower() in answer.headers
        ]
        ms = (time.perf_counter() - started) * 1000
        self.hub.count_call(model, version, ms if status == 200 else 0.0, ok=status == 200)
        self._count_for_canary(route.split, version, ms, ok=status == 200)
        await leave()
        await _answer(send, status, payload, passed)
        if status == 200 and route.capture_rate > 0 and _sampled(route.capture_rate):
            self.hub.capture(
                CapturedCall(model, version, grant.username, ms, body,
                             _header_length(headers.get("Inference-Header-Content-Length")),
                             payload, _header_length(answer.headers.get(
                                 "inference-header-content-length")))
            )  # fmt: skip

    def _count_for_canary(self, split: Split | None, version: int, ms: float, ok: bool) -> None:
        """Count the call in the canary's window: added up here, and written to Redis in one
        pipeline at most every :data:`COUNT_FLUSH_SECONDS` (the watcher looks every 2 s), so
        a call pays a dictionary update, not a Redis write."""
        for key, name, amount in count_commands(split, version, ms, ok):
            self._counts[(key, name)] = self._counts.get((key, name), 0) + int(amount)
        if self._counts and not self._flush_pending:
            self._flush_pending = True
            asyncio.get_running_loop().call_later(
                COUNT_FLUSH_SECONDS, lambda: self._later(self._write_counts())
            )

    async def _write_counts(self) -> None:
        counts, self._counts, self._flush_pending = self._counts, {}, False
        with contextlib.suppress(redis.RedisError, OSError):  # fewer counted: the step waits
            pipe = self._redis_client().pipeline(transaction=False)
            for (key, name), amount in counts.items():
                pipe.hincrby(key, name, amount)
            for key in {key for key, _ in counts}:
                pipe.expire(key, WINDOW_TTL_SECONDS)
            await pipe.execute()

    def _redis_client(self) -> aioredis.Redis:
        url = self.hub.settings.LIMITS_REDIS_URL
        client = self._redis.get(url)
        if client is None:
            client = aioredis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)
            self._redis[url] = client
        return client

    def _triton(self) -> KeepAliveClient:
        if self._client is None:
            self._client = KeepAliveClient()
        return self._client


def _sampled(rate: float) -> bool:
    return rate >= 100 or random.random() * 100 < rate  # noqa: S311 (sampling, not secrets)


def _header_length(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


async def _read_body(receive: Receive, length: int) -> bytes | None:
    chunks: list[bytes] = []
    received = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        received += len(chunk)
        if received > length:
            return None  # more than declared: the server would not allow it; do not guess
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _answer(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                *headers,
                (b"content-length", str(len(body)).encode()),
                (b"x-content-type-options", b"nosniff"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _answer_error(send: Send, message: str, status: int, retry_after: int = 0) -> None:
    headers = [(b"content-type", b"application/json")]
    if retry_after:
        headers.append((b"retry-after", str(retry_after).encode()))
    await _answer(send, status, json.dumps({"error": message}).encode(), headers)
