"""A node's settings, from its environment: who it is, where the hub and the broker are, its
Triton and its repository.

Read once when the worker starts; a missing or malformed setting stops the start with a
sentence that names it (never with a traceback deep in Celery).
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from model_store.errors import ModelStoreError
from model_store.load_timeouts import (
    LoadTimeouts,
    LoadTimeoutSettingError,
    read_load_timeouts,
    seconds_setting,
)
from model_store.names import validate_model_name

#: How often a node reports when the hub has not said (the hub's answer overrides it).
DEFAULT_REPORT_EVERY_S = 30.0
#: A node's load timeout for targets without their own (``LOAD_TIMEOUT_SECONDS``); npu_ge has
#: its own (model_store.load_timeouts).
DEFAULT_LOAD_TIMEOUT_S = 120.0
#: A node token is an API token: printable, no spaces (it goes into an HTTP header).
_TOKEN = re.compile(r"[A-Za-z0-9_\-.:~+/=]{16,512}")


class NodeSettingsError(ValueError):
    """A setting is missing or malformed; the message names it and says what to set."""


@dataclass(frozen=True)
class NodeSettings:
    """Everything a node worker needs to know, checked.

    Attributes:
        name: The node's name (``NODE_NAME``); its queue is ``node.<name>``.
        hub_url: The hub's base URL (``HUB_URL``), without a trailing slash.
        token: The node token (``NODE_TOKEN`` or the file ``NODE_TOKEN_FILE``); not shown in
            ``repr``.
        broker_url: The broker (``REDIS_URL``).
        triton_http, triton_grpc, triton_metrics: The node's Triton (``TRITON_URL``,
            ``TRITON_GRPC_URL``, ``TRITON_METRICS_URL``).
        triton_api_key: The key of Triton's repository API (``TRITON_API_KEY``); not shown.
        repository: The Triton model repository this node writes (``NODE_REPOSITORY``); its
            parent is the node's store root (packages, staging, downloads).
        labels: ``NODE_LABELS``, ``key=value`` pairs separated by commas, reported to the hub.
        load_timeouts: How long a load may take per target (``LOAD_TIMEOUT_SECONDS``,
            ``LOAD_TIMEOUT_<TARGET>_SECONDS``; :mod:`model_store.load_timeouts`).
        env: The whole environment, for the host report (CANN is found through it).
    """

    name: str
    hub_url: str
    token: str = field(repr=False)
    broker_url: str
    triton_http: str
    triton_grpc: str
    triton_metrics: str
    triton_api_key: str | None = field(default=None, repr=False)
    repository: Path = Path()
    labels: dict[str, str] = field(default_factory=dict)
    report_every_s: float = DEFAULT_REPORT_EVERY_S
    load_timeouts: LoadTimeouts = field(
        default_factory=lambda: read_load_timeouts({}, default_s=DEFAULT_LOAD_TIMEOUT_S)
    )
    env: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def queue(self) -> str:
        return queue_name(self.name)

    @property
    def store_root(self) -> Path:
        return self.repository.parent


def queue_name(node: str) -> str:
    """The Celery queue of node ``node``: ``node.<name>``."""
    return f"node.{validate_node_name(node)}"


def validate_node_name(name: object) -> str:
    """A node name follows the model-name rules (letters, digits, ``-``, ``_``, ``.``)."""
    try:
        return validate_model_name(name)
    except ModelStoreError as exc:
        # The rules are the model names'; the sentence should name what was given.
        raise NodeSettingsError(
            f"NODE_NAME: {str(exc.message).replace('model name', 'node name')}"
        ) from None


def read_settings(env: Mapping[str, str] | None = None) -> NodeSettings:
    """The node's settings from ``env`` (default: ``os.environ``).

    Raises:
        NodeSettingsError: A setting is missing or malformed.
    """
    env = dict(os.environ if env is None else env)
    name = validate_node_name(_required(env, "NODE_NAME"))
    repository = Path(_required(env, "NODE_REPOSITORY")).expanduser()
    if not repository.is_absolute():
        raise NodeSettingsError(f"NODE_REPOSITORY must be an absolute path, not {repository}.")
    if repository.name != "repository":
        # The store's layout (packages, staging) is beside the repository, under its parent.
        raise NodeSettingsError(
            f"NODE_REPOSITORY must be a folder named 'repository' (the node's store keeps its "
            f"packages beside it), not {repository}."
        )
    return NodeSettings(
        name=name,
        hub_url=http_url(_required(env, "HUB_URL"), "HUB_URL"),
        token=read_token(env),
        broker_url=_broker_url(_required(env, "REDIS_URL")),
        triton_http=_triton_address(env, "TRITON_URL"),
        triton_grpc=_triton_address(env, "TRITON_GRPC_URL"),
        triton_metrics=_triton_address(env, "TRITON_METRICS_URL"),
        triton_api_key=env.get("TRITON_API_KEY", "").strip() or None,
        repository=repository,
        labels=parse_labels(env.get("NODE_LABELS", "")),
        report_every_s=_positive(env, "NODE_REPORT_EVERY_SECONDS", DEFAULT_REPORT_EVERY_S),
        load_timeouts=_load_timeouts(env),
        env=env,
    )


def read_token(env: Mapping[str, str]) -> str:
    """``NODE_TOKEN``, or the first line of the file ``NODE_TOKEN_FILE``; never echoed."""
    token = env.get("NODE_TOKEN", "").strip()
    source = "NODE_TOKEN"
    if not token and env.get("NODE_TOKEN_FILE", "").strip():
        path = Path(env["NODE_TOKEN_FILE"].strip()).expanduser()
        source = f"NODE_TOKEN_FILE ({path})"
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise NodeSettingsError(f"{source} cannot be read: {exc.__class__.__name__}.") from None
        token = lines[0].strip() if lines else ""
    if not token:
        raise NodeSettingsError(
            "No node token: set NODE_TOKEN or NODE_TOKEN_FILE (mint one on the hub with "
            "`python manage.py nodetoken NAME`)."
        )
    if not _TOKEN.fullmatch(token):
        # The value itself is not shown: a mangled secret is still a secret.
        raise NodeSettingsError(
            f"{source} does not look like a token (16-512 printable characters, no spaces)."
        )
    return token


def parse_labels(text: str) -> dict[str, str]:
    """``"soc=Ascend310P3, zone=a"`` -> ``{"soc": "Ascend310P3", "zone": "a"}``."""
    labels = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if (
            not sep
            or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}", key)
            or len(value) > 128  # the hub takes 200
        ):
            raise NodeSettingsError(
                f"NODE_LABELS: {item!r} is not key=value (the key starts with a letter or "
                "digit, then letters, digits, '_', '-' and '.'; the value is up to 128 characters)."
            )
        labels[key] = value
    if len(labels) > 32:
        raise NodeSettingsError("NODE_LABELS: at most 32 labels.")
    return labels


def http_url(value: str, setting: str) -> str:
    """An ``http(s)://host[:port][/path]`` URL without a trailing slash; a bare
    ``host:port`` gets ``http://``."""
    value = value.strip()
    if "://" not in value:
        value = f"http://{value}"
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise NodeSettingsError(
            f"{setting} must be an http(s) URL such as http://hub:8080, not {value!r}."
        )
    if parts.username or parts.password or parts.query or parts.fragment:
        raise NodeSettingsError(f"{setting} must not carry credentials, a query or a fragment.")
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise NodeSettingsError(f"{setting} has a port that is not a number: {value!r}.") from None
    return value.rstrip("/")


def _triton_address(env: Mapping[str, str], key: str) -> str:
    """A Triton endpoint as the hub writes its own (``host:port``, as tritonclient takes it;
    a scheme is kept if given): checked, and reported to the hub as it is."""
    value = _required(env, key).rstrip("/")
    http_url(value.split("://", 1)[-1] if value.startswith("grpc://") else value, key)
    return value


def _broker_url(value: str) -> str:
    value = value.strip()
    if urllib.parse.urlsplit(value).scheme not in ("redis", "rediss"):
        raise NodeSettingsError("REDIS_URL must be a redis:// or rediss:// URL.")
    return value


def _required(env: Mapping[str, str], key: str) -> str:
    value = env.get(key, "").strip()
    if not value:
        raise NodeSettingsError(
            f"{key} is not set; a node needs it (docs/nodes.md#running-a-node)."
        )
    return value


def _load_timeouts(env: Mapping[str, str]) -> LoadTimeouts:
    try:
        return read_load_timeouts(env, default_s=DEFAULT_LOAD_TIMEOUT_S)
    except LoadTimeoutSettingError as exc:
        raise NodeSettingsError(str(exc)) from None


def _positive(env: Mapping[str, str], key: str, default: float) -> float:
    try:
        return seconds_setting(env, key, default, lowest=1, highest=3600)
    except LoadTimeoutSettingError as exc:
        raise NodeSettingsError(str(exc)) from None
