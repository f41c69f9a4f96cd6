"""Request types that carry what our middleware adds, so views stay typed."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HubRequest(HttpRequest):
    user: User | AnonymousUser
    htmx: HtmxDetails
