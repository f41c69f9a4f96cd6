"""Signing in through a real OpenID Connect provider process (tests/fixtures/sso.py), over HTTP
as a browser does: to the provider, its form, back with a code, into the hub with the role
its groups map to. Then the hostile and broken cases the browser can cause: a replayed
callback, a person in no mapped group, the provider down (local sign-in still works)."""

from __future__ import annotations

import http.cookiejar
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import pytest

from tests.fixtures.ports import free_ports
from tests.fixtures.sso import Provider
from tests.fixtures.users import PASSWORD

pytestmark = [pytest.mark.integration, pytest.mark.sso, pytest.mark.django_db(transaction=True)]


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class Browser:
    """Cookies kept, redirects seen one by one."""

    def __init__(self) -> None:
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.jar), _NoRedirects
        )

    def go(
        self, url: str, form: dict[str, str] | None = None, **headers: str
    ) -> tuple[int, str, str]:
        """``(status, Location, body)``."""
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        request = urllib.request.Request(url, data=data, headers=headers)
        try:
            with self.opener.open(request, timeout=30) as answer:
                return answer.status, answer.headers.get("Location", ""), answer.read().decode()
        except urllib.error.HTTPError as answer:
            return answer.code, answer.headers.get("Location", ""), answer.read().decode()

    def cookie(self, name: str) -> str:
        return next((c.value or "" for c in self.jar if c.name == name), "")


def _configure(settings: Any, issuer: str) -> None:
    from webapp.sso.oidc import forget_documents
    from webapp.sso.settings import checked_settings

    settings.OIDC_ISSUER = issuer
    settings.OIDC_CLIENT_ID = "triton-hub"
    settings.OIDC_CLIENT_SECRET = "hub-secret"
    settings.OIDC_PROVIDER_NAME = "Example ID"
    settings.SSO_ROLE_MAP = "ml-admins=admin;ml-ops=operator;ml-viewers=viewer"
    forget_documents()
    checked_settings()


def _sign_in(browser: Browser, hub: str, sub: str) -> tuple[int, str, str]:
    """Through the provider's form as ``sub``; the hub's answer to the callback."""
    status, to_provider, _ = browser.go(f"{hub}/sso/oidc/?next=/nodes/")
    assert status == 302 and "code_challenge_method=S256" in to_provider, to_provider
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(to_provider).query)
    assert query["nonce"][0] and query["state"][0] and query["code_challenge"][0]
    status, _, form = browser.go(to_provider)
    assert status == 200 and "sub" in form
    status, back, _ = browser.go(to_provider, {"sub": sub})
    assert status == 302 and back.startswith(f"{hub}/sso/oidc/callback/"), back
    answer = browser.go(back)
    browser.last_callback = back  # type: ignore[attr-defined]
    return answer


def _me(browser: Browser, hub: str) -> dict[str, Any]:
    status, _, body = browser.go(f"{hub}/api/v1/me")
    assert status == 200, body
    return dict(json.loads(body))


def test_a_person_signs_in_through_the_provider_with_the_role_of_their_groups(
    live_server: Any, settings: Any, oidc_provider: Provider
) -> None:
    from webapp.registry.jobs.models import Event
    from webapp.sso.models import Identity

    _configure(settings, oidc_provider.issuer)
    hub = live_server.url
    oidc_provider.person("ana-sub", preferred_username="ana", email="ana@example.org",
                         name="Ana Lima", groups=["ml-ops", "staff"])  # fmt: skip
    browser = Browser()
    page = browser.go(f"{hub}/login/")[2]
    assert "Sign in with Example ID" in page

    status, landing, _ = _sign_in(browser, hub, "ana-sub")
    assert (status, landing) == (302, "/nodes/")
    assert _me(browser, hub) == {"username": "ana", "role": "operator", "source": "oidc"}
    identity = Identity.objects.get(subject="ana-sub")
    assert identity.issuer == oidc_provider.issuer and identity.groups == ["ml-ops", "staff"]
    event = Event.objects.get(kind="user.signed_in")
    assert event.data["source"] == "oidc" and event.data["role"] == "operator"

    # The callback replayed (a stolen URL, the back button): refused, nothing changes.
    replay = Browser()
    status, _, body = replay.go(browser.last_callback)  # type: ignore[attr-defined]
    assert status == 400 and "already used" in body
    status, _, body = browser.go(browser.last_callback)  # type: ignore[attr-defined]
    assert status == 400 and "already used" in body

    # Groups change in the directory: the role follows at the next sign-in.
    oidc_provider.person("ana-sub", preferred_username="ana", groups=["ml-viewers"])
    fresh = Browser()
    assert _sign_in(fresh, hub, "ana-sub")[0] == 302
    assert _me(fresh, hub)["role"] == "viewer"
    assert Identity.objects.count() == 1


def test_a_directory_name_never_takes_over_a_local_account(
    live_server: Any, settings: Any, oidc_provider: Provider, operator: Any
) -> None:
    """A provider user called ``otto`` (as the local operator) becomes ``otto.oidc``."""
    _configure(settings, oidc_provider.issuer)
    oidc_provider.person("x-1", preferred_username="otto", groups=["ml-admins"])
    browser = Browser()
    assert _sign_in(browser, live_server.url, "x-1")[0] == 302
    assert _me(browser, live_server.url) == {
        "username": "otto.oidc", "role": "admin", "source": "oidc",
    }  # fmt: skip
    operator.refresh_from_db()
    assert not operator.is_superuser


def test_a_person_in_no_mapped_group_gets_the_no_access_page(
    live_server: Any, settings: Any, oidc_provider: Provider
) -> None:
    _configure(settings, oidc_provider.issuer)
    oidc_provider.person("bob-sub", preferred_username="bob", groups=["marketing"])
    browser = Browser()
    assert _sign_in(browser, live_server.url, "bob-sub")[0] == 302
    assert _me(browser, live_server.url) == {"username": "bob", "role": None, "source": "oidc"}
    status, _, page = browser.go(f"{live_server.url}/models/")
    assert status == 403 and "no role" in page


def test_the_provider_down_is_said_and_local_sign_in_still_works(
    live_server: Any, settings: Any, operator: Any
) -> None:
    (closed,) = free_ports(1)
    _configure(settings, f"http://127.0.0.1:{closed}")
    browser = Browser()
    status, _, page = browser.go(f"{live_server.url}/sso/oidc/")
    assert status == 503 and "does not answer" in page and "Sign in with Example ID" in page

    browser.go(f"{live_server.url}/login/")
    token = browser.cookie("csrftoken")
    status, landing, _ = browser.go(
        f"{live_server.url}/login/", {"username": "otto", "password": PASSWORD,
                                      "csrfmiddlewaretoken": token},
        Referer=f"{live_server.url}/login/",
    )  # fmt: skip
    assert status == 302, landing
    assert _me(browser, live_server.url) == {"username": "otto", "role": "operator",
                                              "source": "local"}  # fmt: skip


def test_a_forged_callback_counts_as_a_failed_sign_in(
    live_server: Any, settings: Any, oidc_provider: Provider
) -> None:
    """Callbacks with a made-up state: each refused and counted by django-axes, which then
    locks OIDC sign-in from this address (``SIGNIN_FAILURE_LIMIT``)."""
    from axes.models import AccessAttempt

    _configure(settings, oidc_provider.issuer)
    settings.AXES_FAILURE_LIMIT = 3
    browser = Browser()
    for attempt in range(3):
        status, _, body = browser.go(
            f"{live_server.url}/sso/oidc/callback/?code=stolen&state=guess{attempt}"
        )
        # The attempt that reaches the limit gets django-axes' own "paused" page.
        assert status == (400 if attempt < 2 else 429), body[:300]
    assert AccessAttempt.objects.filter(username="oidc").exists()
    status, _, body = browser.go(f"{live_server.url}/sso/oidc/")
    assert status == 429 and re.search("Too many failed sign-ins", body)
