"""The API's refusals follow Accept-Language (issue 22): the message is said in the request's
language, the machine code never changes, and English stays exactly as it was.

``test_the_messages_are_chinese`` reads the real zh-Hans catalogue; the request-time mechanism is
also checked with a translation put into the catalogue for one test.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from django.test import Client
from django.utils import translation
from django.utils.translation import trans_real

from tests.fixtures.users import token_for
from webapp.registry.tryit import ratelimit

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN"}
EN = {"HTTP_ACCEPT_LANGUAGE": "en-US,en;q=0.9"}


def _has_chinese(message: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in message)


@dataclass(frozen=True)
class Case:
    """One refusal: who asks what, and the status, code and English message it gets."""

    name: str
    method: str
    path: str
    status: int
    code: str
    english: str
    who: str = "operator"  # "operator", "viewer", "nobody" or "bad token"
    extra: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case(
        "unknown job",
        "get",
        "/api/v1/jobs/nope",
        404,
        "not_found",
        "There is no job 'nope'.",
    ),
    Case(
        "unknown version",
        "get",
        "/api/v1/models/nope/versions/3",
        404,
        "not_found",
        "nope has no version 3.",
    ),
    Case(
        "bad JSON",
        "post",
        "/api/v1/models",
        400,
        "invalid_json",
        "The body must be a JSON object.",
        extra={"data": b"[1, 2]", "content_type": "application/json"},
    ),
    Case(
        "missing field",
        "post",
        "/api/v1/models",
        400,
        "missing_field",
        "The field 'name' is required.",
        extra={"data": b"{}", "content_type": "application/json"},
    ),
    Case(
        "no token",
        "get",
        "/api/v1/models",
        401,
        "not_authenticated",
        "Sign in or send 'Authorization: Token <key>'.",
        who="nobody",
    ),
    Case(
        "a token that is not one",
        "get",
        "/api/v1/models",
        401,
        "not_authenticated",
        "This API token is not valid (or was revoked). Create one on your account page or "
        "with 'python manage.py apitoken USERNAME'.",
        who="bad token",
    ),
    Case(
        "role too low",
        "post",
        "/api/v1/models",
        403,
        "forbidden",
        "This needs the operator role; you are viewer.",
        who="viewer",
        extra={"data": b'{"name": "m"}', "content_type": "application/json"},
    ),
    Case(
        "method not allowed",
        "delete",
        "/api/v1/jobs",
        405,
        "method_not_allowed",
        "DELETE is not allowed here; use GET.",
    ),
    Case(
        "no such endpoint",
        "get",
        "/api/v1/nothing-here",
        404,
        "not_found",
        "No API endpoint at /api/v1/nothing-here.",
    ),
    Case(
        "body too large",
        "post",
        "/api/v1/models",
        413,
        "too_large",
        "The request body is 2048 bytes; this endpoint accepts at most 1024 bytes "
        "(REQUEST_MAX_BYTES).",
        extra={"data": b"{" + b" " * 2046 + b"}", "content_type": "application/json"},
    ),
    Case(
        "a node's call without its node token",
        "post",
        "/api/v1/nodes/n1/reports",
        403,
        "node_token_required",
        "Only node 'n1' does this, with its node token (python manage.py nodetoken n1).",
        extra={"data": b"{}", "content_type": "application/json"},
    ),
]


@pytest.fixture
def clients(viewer, operator, settings) -> dict[str, Client]:  # type: ignore[no-untyped-def]
    settings.REQUEST_MAX_BYTES = 1024
    return {
        "operator": Client(HTTP_AUTHORIZATION=f"Token {token_for(operator)}"),
        "viewer": Client(HTTP_AUTHORIZATION=f"Token {token_for(viewer)}"),
        "nobody": Client(),
        "bad token": Client(HTTP_AUTHORIZATION="Token not-a-real-key"),
    }


def _ask(clients: dict[str, Client], case: Case, headers: dict[str, str]) -> Any:
    return getattr(clients[case.who], case.method)(case.path, **case.extra, **headers)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_code_stays_and_english_is_unchanged(clients, case: Case) -> None:  # type: ignore[no-untyped-def]
    english = _ask(clients, case, EN)
    chinese = _ask(clients, case, ZH)
    plain = _ask(clients, case, {})  # what the rest of the suite sends
    assert english.status_code == chinese.status_code == plain.status_code == case.status
    assert english.json() == plain.json() == {"error": case.english, "code": case.code}
    assert chinese.json()["code"] == case.code
    assert chinese["Content-Language"] == "zh-hans"
    assert english["Content-Language"] == "en"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_messages_are_chinese(clients, case: Case) -> None:  # type: ignore[no-untyped-def]
    chinese = _ask(clients, case, ZH).json()
    assert chinese["code"] == case.code
    assert chinese["error"] != case.english
    assert _has_chinese(chinese["error"]), chinese["error"]


def _translate(monkeypatch: pytest.MonkeyPatch, msgid: str, msgstr: str) -> None:
    """Put one zh-Hans catalogue entry in place for this test (monkeypatch undoes it)."""
    catalog = trans_real.translation("zh-hans")._catalog
    monkeypatch.setitem(catalog._catalogs[0], msgid, msgstr)


def test_a_message_is_translated_when_the_request_is_answered(operator, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _translate(monkeypatch, "There is no job %(id)s.", "不存在任务 %(id)s。")
    client = Client(HTTP_AUTHORIZATION=f"Token {token_for(operator)}")
    assert client.get("/api/v1/jobs/nope", **ZH).json() == {
        "error": "不存在任务 'nope'。",
        "code": "not_found",
    }
    assert client.get("/api/v1/jobs/nope", **EN).json()["error"] == "There is no job 'nope'."


def test_a_middleware_refusal_is_translated_too(db, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _translate(monkeypatch, "Sign in or send 'Authorization: Token <key>'.", "请先登录。")
    response = Client().get("/api/v1/models", **ZH)
    assert response.status_code == 401
    assert response.json() == {"error": "请先登录。", "code": "not_authenticated"}


def test_the_v2_gateway_refuses_in_the_requests_language(operator, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from webapp.gateway import REFUSED

    _translate(monkeypatch, REFUSED, "中心的 v2 网关不转发此调用。")
    client = Client(HTTP_AUTHORIZATION=f"Token {token_for(operator)}")
    zh = client.post("/v2/repository/index", **ZH)
    assert zh.status_code == 403 and zh.json() == {"error": "中心的 v2 网关不转发此调用。"}
    assert client.post("/v2/repository/index", **EN).json() == {"error": REFUSED}


def test_the_rate_limit_is_said_in_the_active_language(monkeypatch) -> None:
    template = (
        "Too many inference requests: the limit is %(limit)s per minute per user. "
        "Try again in %(seconds)s s, or ask an admin to raise INFER_RATE_PER_MINUTE."
    )
    english = str(ratelimit.RateLimited(5, 12))
    assert english == template % {"limit": 5, "seconds": 12}
    _translate(monkeypatch, template, "推理请求过多 %(limit)s 次/分钟 %(seconds)s 秒后重试")
    with translation.override("zh-hans"):
        assert str(ratelimit.RateLimited(5, 12)) == "推理请求过多 5 次/分钟 12 秒后重试"
