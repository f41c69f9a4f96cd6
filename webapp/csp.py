"""The Content-Security-Policy every response carries.

Scripts and styles come only from our own static files: no inline ``<script>``, no ``on*=``
handlers, no ``style=`` attributes, no ``eval``. A string of data that reaches a page by
mistake as markup then cannot run (the Try it page shows tensor names an uploader chose).
``data:`` images are the photo previews of Try it; ``connect-src 'self'`` covers the API and
the live websocket (CSP level 3 matches ``ws:``/``wss:`` on the same host to ``'self'``).
Django 5.2 has no CSP support of its own (6.0 adds it), hence this small middleware.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data: blob:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", POLICY)
        return response
