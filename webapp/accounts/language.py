"""Which language a request is answered in, and the switcher that remembers it per person.

``LocaleMiddleware`` has already chosen from the switcher's cookie or ``Accept-Language``.
:class:`LanguagePreferenceMiddleware` then refines that choice:

* the API (``/api/``, ``/v2``) and ``/metrics`` follow the request's ``Accept-Language`` alone:
  a script says what it reads in its header, and a person's page preference (or a cookie a
  browser happens to carry) must not change what the same script gets tomorrow;
* a page for a signed-in person uses the language they saved with the switcher, when they
  saved one; that wins over the browser's ``Accept-Language``.

The saved language is read from the database once per session (at sign-in, or on the first
page of a session made before the preference existed) and kept in the session, so a page
costs no extra query. Another browser signed in as the same person picks a new choice up at
its next sign-in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth import user_logged_in
from django.contrib.auth.decorators import login_not_required
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils import translation
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation.trans_real import parse_accept_lang_header
from django.views.decorators.http import require_POST
from django.views.i18n import JavaScriptCatalog

from webapp.accounts.auth import is_api_request
from webapp.accounts.models import Preference

#: The session's copy of the saved language ("" once read and none was saved).
SESSION_KEY = "hub_language"


def supported(code: str | None) -> str | None:
    """``code`` as one of ``settings.LANGUAGES`` (``zh-CN`` is ``zh-hans``), or None."""
    if not code:
        return None
    try:
        return translation.get_supported_language_variant(code)
    except LookupError:
        return None


def from_accept_language(request: HttpRequest) -> str:
    """The first supported language of the request's ``Accept-Language``, else the default."""
    for code, _quality in parse_accept_lang_header(request.headers.get("Accept-Language", "")):
        if code == "*":
            break
        found = supported(code)
        if found:
            return found
    return supported(settings.LANGUAGE_CODE) or settings.LANGUAGE_CODE


def saved_language(request: HttpRequest) -> str | None:
    """The language the signed-in person saved, from the session (read once per session)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or hasattr(request, "api_token"):
        return None
    if SESSION_KEY not in request.session:
        request.session[SESSION_KEY] = _stored_language(user)
    return supported(request.session[SESSION_KEY])


def _stored_language(user: Any) -> str:
    return Preference.objects.filter(user=user).values_list("language", flat=True).first() or ""


@receiver(user_logged_in, dispatch_uid="hub-language-on-sign-in")
def _copy_preference_on_sign_in(
    sender: Any, request: HttpRequest | None, user: Any, **_: Any
) -> None:
    if request is not None and hasattr(request, "session"):
        request.session[SESSION_KEY] = _stored_language(user)


class LanguagePreferenceMiddleware:
    """Sits after the authentication middlewares: it needs to know who is asking."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if is_api_request(request) or request.path == "/metrics":
            language: str | None = from_accept_language(request)
        else:
            language = saved_language(request)
        if language:
            translation.activate(language)
            request.LANGUAGE_CODE = translation.get_language()
        return self.get_response(request)


def _safe_next(request: HttpRequest) -> str:
    allowed = {request.get_host()}
    for candidate in (request.POST.get("next"), request.headers.get("Referer")):
        if candidate and url_has_allowed_host_and_scheme(
            candidate, allowed_hosts=allowed, require_https=request.is_secure()
        ):
            return candidate
    return "/"


@login_not_required
@require_POST
def set_language(request: HttpRequest) -> HttpResponse:
    """The header's switcher: remember the language (cookie; and the person's preference
    when signed in) and go back to the page it was chosen on."""
    language = supported(request.POST.get("language"))
    response = HttpResponseRedirect(_safe_next(request))
    if language is None:
        return response
    if request.user.is_authenticated:
        Preference.objects.update_or_create(user=request.user, defaults={"language": language})
        request.session[SESSION_KEY] = language
    response.set_cookie(
        settings.LANGUAGE_COOKIE_NAME,
        language,
        max_age=settings.LANGUAGE_COOKIE_AGE,
        path=settings.LANGUAGE_COOKIE_PATH,
        domain=settings.LANGUAGE_COOKIE_DOMAIN,
        secure=settings.LANGUAGE_COOKIE_SECURE or settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite=settings.LANGUAGE_COOKIE_SAMESITE or "Lax",
    )
    return response


class HubJavaScriptCatalog(JavaScriptCatalog):
    """Django's catalogue for static/hub's scripts, in the language its URL names.

    base.html asks for ``?l=<language>&v=<catalogue version>``, so a browser may keep the
    answer for a day: a new language or new catalogues give a new URL.
    """

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        language = supported(request.GET.get("l"))
        if language:
            translation.activate(language)
        response = super().get(request, *args, **kwargs)
        response["Cache-Control"] = "private, max-age=86400"
        return response


javascript_catalog = login_not_required(HubJavaScriptCatalog.as_view())
