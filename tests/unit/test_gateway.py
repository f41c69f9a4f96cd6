"""``/v2`` (webapp/gateway.py): which of Triton's calls the hub passes on, and the refusals
that happen before Triton is asked."""

from __future__ import annotations

import pytest
from django.test import Client

from webapp.gateway import Call, classify

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("method", "rest", "call"),
    [
        ("GET", "", Call("server")),
        ("GET", "health/live", Call("health")),
        ("GET", "health/ready", Call("health")),
        ("GET", "models/mlp", Call("model", "mlp")),
        ("GET", "models/mlp/versions/2", Call("model", "mlp", "2")),
        ("GET", "models/mlp/config", Call("model", "mlp", "", "config")),
        ("GET", "models/mlp/versions/3/ready", Call("model", "mlp", "3", "ready")),
        ("POST", "models/mlp/infer", Call("model", "mlp", "", "infer")),
        ("POST", "models/mlp/versions/1/infer", Call("model", "mlp", "1", "infer")),
    ],
)
def test_the_read_only_calls_pass(method: str, rest: str, call: Call) -> None:
    assert classify(method, rest) == call


@pytest.mark.parametrize(
    ("method", "rest"),
    [
        ("POST", "repository/index"),
        ("POST", "repository/models/mlp/load"),
        ("POST", "repository/models/mlp/unload"),
        ("GET", "models/mlp/stats"),
        ("GET", "models/stats"),
        ("POST", "systemsharedmemory/region/r/register"),
        ("POST", "cudasharedmemory/region/r/register"),
        ("GET", "trace/setting"),
        ("POST", "logging"),
        ("GET", "models/mlp/infer"),
        ("POST", "models/mlp"),
        ("DELETE", "models/mlp"),
        ("GET", "models/../repository/index"),
        ("GET", "models/mlp/versions/01"),
    ],
)
def test_control_and_everything_else_is_refused(method: str, rest: str) -> None:
    assert classify(method, rest) is None


def test_refusals_come_before_triton_and_say_why(api) -> None:  # type: ignore[no-untyped-def]
    answer = api("post", "/v2/repository/models/mlp/unload", {})
    assert answer.status_code == 403
    assert "Repository and model control" in answer.json()["error"]
    assert api("get", "/v2/models/nope").status_code == 404
    anonymous = Client().get("/v2/models/mlp")
    assert anonymous.status_code == 401 and anonymous.json()["code"] == "not_authenticated"
