"""A node's settings: read from its environment, and a missing or malformed one is named in a
sentence that never shows the token."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.node.settings import NodeSettingsError, parse_labels, queue_name, read_settings

TOKEN = "node-token-0123456789abcdef"


def _env(tmp_path: Path, **changes: str) -> dict[str, str]:
    env = {
        "NODE_NAME": "b",
        "HUB_URL": "http://127.0.0.1:8080/",
        "NODE_TOKEN": TOKEN,
        "REDIS_URL": "redis://127.0.0.1:6379/0",
        "TRITON_URL": "127.0.0.1:9000",
        "TRITON_GRPC_URL": "127.0.0.1:9001",
        "TRITON_METRICS_URL": "127.0.0.1:9002",
        "NODE_REPOSITORY": str(tmp_path / "store" / "repository"),
    }
    env |= changes
    return {k: v for k, v in env.items() if v != "-"}


def test_settings_come_from_the_environment(tmp_path: Path) -> None:
    settings = read_settings(_env(tmp_path, NODE_LABELS="soc=Ascend310P3, zone=a"))

    assert settings.queue == "node.b"
    assert settings.hub_url == "http://127.0.0.1:8080"
    assert settings.triton_http == "127.0.0.1:9000"  # reported as the hub writes its own
    assert settings.store_root == tmp_path / "store"
    assert settings.labels == {"soc": "Ascend310P3", "zone": "a"}
    assert settings.report_every_s == 30
    assert TOKEN not in repr(settings)


def test_the_token_can_come_from_a_file(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")

    settings = read_settings(_env(tmp_path, NODE_TOKEN="-", NODE_TOKEN_FILE=str(token_file)))

    assert settings.token == TOKEN


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"HUB_URL": "-"}, "HUB_URL is not set"),
        ({"NODE_TOKEN": "-"}, "No node token: set NODE_TOKEN or NODE_TOKEN_FILE"),
        ({"NODE_TOKEN": "-", "NODE_TOKEN_FILE": "/nonexistent/token"}, "cannot be read"),
        ({"NODE_TOKEN": "short secret"}, "does not look like a token"),
        ({"HUB_URL": "ftp://hub"}, "HUB_URL must be an http(s) URL"),
        ({"HUB_URL": "http://user:pw@hub"}, "must not carry credentials"),
        ({"HUB_URL": "http://hub:port"}, "port that is not a number"),
        ({"REDIS_URL": "http://redis"}, "REDIS_URL must be a redis://"),
        ({"NODE_NAME": "../b"}, "NODE_NAME"),
        ({"NODE_REPOSITORY": "relative/repository"}, "must be an absolute path"),
        ({"NODE_REPOSITORY": "/srv/models"}, "folder named 'repository'"),
        ({"NODE_LABELS": "soc"}, "is not key=value"),
        ({"NODE_LABELS": "_soc=a"}, "is not key=value"),
        ({"TRITON_URL": "triton:http"}, "TRITON_URL has a port that is not a number"),
        ({"NODE_REPORT_EVERY_SECONDS": "0"}, "from 1 to 3600"),
    ],
)
def test_a_bad_setting_is_named(tmp_path: Path, changes: dict[str, str], message: str) -> None:
    with pytest.raises(NodeSettingsError, match=None) as caught:
        read_settings(_env(tmp_path, **changes))

    assert message in str(caught.value)
    assert "short secret" not in str(caught.value)


def test_labels_and_queue_names() -> None:
    assert parse_labels("") == {}
    assert parse_labels("a=1,,b = 2 ") == {"a": "1", "b": "2"}
    assert queue_name("edge-1") == "node.edge-1"
    with pytest.raises(NodeSettingsError):
        queue_name("a b")
