"""Simplified Chinese beside English (issue 22): which language a request gets, the switcher
that remembers it per person, the API on Accept-Language alone, and the JavaScript catalogue."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.fixtures.users import signed_in, token_for
from webapp.accounts.models import Preference

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-Hans,zh;q=0.9,en;q=0.5"}
EN = {"HTTP_ACCEPT_LANGUAGE": "en-US,en;q=0.9"}


def _page(client: Client, path: str = "/models/", **headers: str) -> str:
    response = client.get(path, **headers)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def test_a_chinese_browser_gets_the_header_in_chinese(operator) -> None:  # type: ignore[no-untyped-def]
    page = _page(signed_in(operator), **ZH)
    assert '<html lang="zh-hans"' in page
    assert "模型" in page and "退出登录" in page
    assert ">Sign out<" not in page


def test_an_english_browser_and_no_header_get_english(operator) -> None:  # type: ignore[no-untyped-def]
    for headers in (EN, {}):
        page = _page(signed_in(operator), **headers)
        assert '<html lang="en"' in page
        assert ">Sign out<" in page and "退出登录" not in page


def test_the_sign_in_page_follows_the_browser_and_offers_the_other_language(db) -> None:  # type: ignore[no-untyped-def]
    zh = _page(Client(), "/login/", **ZH)
    assert "<h1>登录</h1>" in zh and 'value="en"' in zh and ">English</button>" in zh
    en = _page(Client(), "/login/", **EN)
    assert "<h1>Sign in</h1>" in en and ">简体中文</button>" in en


def test_the_switcher_saves_the_preference_and_it_wins_over_the_browser(operator) -> None:  # type: ignore[no-untyped-def]
    client = signed_in(operator)
    response = client.post("/language/", {"language": "zh-hans", "next": "/jobs/"}, **EN)
    assert response.status_code == 302 and response["Location"] == "/jobs/"
    assert Preference.objects.get(user=operator).language == "zh-hans"
    assert '<html lang="zh-hans"' in _page(client)
    assert '<html lang="zh-hans"' in _page(client, **EN)
    # A new sign-in (another browser: no cookie) reads the saved choice.
    other = signed_in(operator)
    other.cookies.pop("django_language", None)
    assert "退出登录" in _page(other, **EN)


def test_the_switcher_refuses_to_send_anyone_elsewhere(operator) -> None:  # type: ignore[no-untyped-def]
    client = signed_in(operator)
    response = client.post("/language/", {"language": "zh-hans", "next": "https://evil.example/"})
    assert response["Location"] == "/"
    response = client.post("/language/", {"language": "klingon", "next": "/jobs/"})
    assert response["Location"] == "/jobs/"
    assert Preference.objects.get(user=operator).language == "zh-hans"


def test_an_anonymous_switch_on_the_sign_in_page_sets_a_cookie(db) -> None:  # type: ignore[no-untyped-def]
    client = Client(enforce_csrf_checks=True)
    page = _page(client, "/login/")
    token = page.split('name="csrfmiddlewaretoken" value="')[1].split('"')[0]
    response = client.post(
        "/language/", {"language": "zh-hans", "next": "/login/", "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302
    assert response.cookies["django_language"].value == "zh-hans"
    assert "<h1>登录</h1>" in _page(client, "/login/", **EN)
    assert not Preference.objects.exists()


def test_the_switch_needs_its_csrf_token(db) -> None:  # type: ignore[no-untyped-def]
    response = Client(enforce_csrf_checks=True).post("/language/", {"language": "zh-hans"})
    assert response.status_code == 403


def test_an_api_error_follows_accept_language_and_keeps_its_code(operator) -> None:  # type: ignore[no-untyped-def]
    client = Client(HTTP_AUTHORIZATION=f"Token {token_for(operator)}")
    zh = client.get("/api/v1/models/nope", **ZH)
    en = client.get("/api/v1/models/nope", **EN)
    assert zh.status_code == en.status_code == 404
    assert zh.json() == {"error": "不存在名为 'nope' 的模型。", "code": "not_found"}
    assert en.json() == {"error": "There is no model named 'nope'.", "code": "not_found"}
    assert "Accept-Language" in zh["Vary"] and zh["Content-Language"] == "zh-hans"


def test_the_api_ignores_the_saved_page_preference(operator) -> None:  # type: ignore[no-untyped-def]
    Preference.objects.create(user=operator, language="zh-hans")
    client = signed_in(operator)  # the session a page's scripts would send
    assert "退出登录" in _page(client)
    assert client.get("/api/v1/models/nope").json()["error"].startswith("There is no model")
    assert client.get("/api/v1/models/nope", **ZH).json()["error"].startswith("不存在")


def test_the_javascript_catalogue_answers_anonymous_requests(db) -> None:  # type: ignore[no-untyped-def]
    response = Client().get("/jsi18n/?l=zh-hans")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/javascript")
    body = response.content.decode()
    assert "django.gettext" in body and "\\u5df2\\u590d\\u5236" in body  # 已复制, escaped
    assert "max-age" in response["Cache-Control"]
    assert "\\u5df2\\u590d\\u5236" not in Client().get("/jsi18n/?l=en").content.decode()


def test_pages_load_the_catalogue_before_the_hubs_scripts(db) -> None:  # type: ignore[no-untyped-def]
    page = _page(Client(), "/login/", **ZH)
    catalogue = page.index('<script src="/jsi18n/?l=zh-hans&amp;v=')
    assert catalogue < page.index("hub/csrf.js") < page.index("hub/confirm.js")


@pytest.mark.parametrize("path", ["/models/", "/login/"])
def test_a_signed_out_or_new_page_costs_no_query_for_the_language(  # type: ignore[no-untyped-def]
    operator, path: str
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = signed_in(operator) if path == "/models/" else Client()
    client.get(path)
    with CaptureQueriesContext(connection) as queries:
        client.get(path)
    assert not [q for q in queries.captured_queries if "accounts_preference" in q["sql"]]
