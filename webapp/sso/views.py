"""The two pages of an OpenID Connect sign-in: off to the provider, and back.

Both are reachable signed out (``login_not_required``). A refusal shows the sign-in page again
with the reason (400; 503 when the provider does not answer), is logged with the detail, and
counts as a failed sign-in for django-axes, under the user name ``oidc`` from that address, so
repeated forgeries lock out OIDC sign-in from there and no local account.
"""

from __future__ import annotations

import logging

from axes.handlers.proxy import AxesProxyHandler
from django.conf import settings
from django.contrib.auth import authenticate, login, user_login_failed
from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render, resolve_url
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET

from model_store.text import Message, say
from webapp.sso import accounts
from webapp.sso.models import Identity
from webapp.sso.oidc import Pending, SignInRefused, finish, start
from webapp.sso.settings import oidc_provider

log = logging.getLogger(__name__)
SESSION_KEY = "sso_oidc_pending"
#: What django-axes counts OIDC failures under (with the address).
AXES_NAME = "oidc"
_TOO_MANY = say("Too many failed sign-ins from here. Wait, then try again.")


@login_not_required
@require_GET
def oidc_start(request: HttpRequest) -> HttpResponse:
    provider = oidc_provider()
    if provider is None:
        raise Http404
    if not AxesProxyHandler.is_allowed(request, credentials={"username": AXES_NAME}):
        return _again(
            request, say("Too many failed sign-ins from here. Wait, then try again."), 429
        )
    try:
        url, pending = start(provider, _callback_url(request), _next(request))
    except SignInRefused as refused:
        log.warning("OIDC sign-in could not start: %s", refused.detail)
        status = 503 if refused.code == "oidc_unreachable" else 502
        return _again(request, refused.message, status)
    request.session[SESSION_KEY] = pending.to_dict()
    return HttpResponseRedirect(url)


@login_not_required
@require_GET
def oidc_callback(request: HttpRequest) -> HttpResponse:
    provider = oidc_provider()
    if provider is None:
        raise Http404
    # Used once: a replayed callback finds nothing to match.
    pending = Pending.from_dict(request.session.pop(SESSION_KEY, None))
    if not AxesProxyHandler.is_allowed(request, credentials={"username": AXES_NAME}):
        return _again(
            request, say("Too many failed sign-ins from here. Wait, then try again."), 429
        )
    params = {key: request.GET.get(key, "")[:4096] for key in request.GET}
    try:
        signed = finish(provider, pending, params, _callback_url(request))
    except SignInRefused as refused:
        log.warning("OIDC sign-in refused (%s): %s", refused.code, refused.detail)
        user_login_failed.send(
            sender=__name__, credentials={"username": AXES_NAME}, request=request
        )
        status = 503 if refused.code == "oidc_unreachable" else 400
        return _again(request, refused.message, status)
    identity = accounts.sign_in(
        accounts.Person(
            source=Identity.Source.OIDC, issuer=provider.issuer, subject=signed.subject,
            username=signed.username, email=signed.email, name=signed.name,
            groups=signed.groups,
        )
    )  # fmt: skip
    user = authenticate(request, identity=identity)
    if user is None:  # an admin deactivated the account: the directory does not override it
        return _again(request, say("This account is deactivated on the hub."), 403)
    login(request, user, backend="webapp.sso.backends.DirectoryBackend")
    request.session["sign_in_source"] = Identity.Source.OIDC
    next_url = pending.next if pending is not None else "/"
    return HttpResponseRedirect(next_url)


def _again(request: HttpRequest, message: Message, status: int) -> HttpResponse:
    """The sign-in page with the reason above the forms."""
    from django.contrib.auth.forms import AuthenticationForm

    context = {"form": AuthenticationForm(request), "sso_error": message,
               "next": _next(request)}  # fmt: skip
    return render(request, "registration/login.html", context, status=status)


def _callback_url(request: HttpRequest) -> str:
    return request.build_absolute_uri(reverse("sso-oidc-callback"))


def _next(request: HttpRequest) -> str:
    wanted = request.GET.get("next", "")
    allowed = url_has_allowed_host_and_scheme(
        wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return wanted if wanted and allowed else resolve_url(settings.LOGIN_REDIRECT_URL)
