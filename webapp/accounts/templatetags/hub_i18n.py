"""Template helpers for the page's language: the JavaScript catalogue's URL and local times."""

from __future__ import annotations

import functools
from datetime import datetime
from pathlib import Path

from django import template
from django.conf import settings
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from webapp.hub_version import hub_version
from webapp.text import localize

register = template.Library()


@functools.cache
def _catalogue_version() -> str:
    """The hub's version and the newest compiled catalogue's time: a new one gives a new URL."""
    compiled = [p.stat().st_mtime_ns for d in settings.LOCALE_PATHS for p in Path(d).rglob("*.mo")]
    return f"{hub_version()}-{max(compiled, default=0) // 1_000_000_000}"


@register.simple_tag
def js_catalog_url() -> str:
    """``/jsi18n/?l=<language>&v=<version>`` for this request's language (cacheable a day)."""
    query = urlencode({"l": translation.get_language() or "", "v": _catalogue_version()})
    return f"{reverse('javascript-catalog')}?{query}"


@register.simple_tag
def local_time(value: datetime | None, style: str = "datetime") -> SafeString | str:
    """A time the browser shows in its own time zone and the page's language.

    Renders ``<time datetime="ISO" data-local="datetime|date">`` with the server's
    ``Y-m-d H:i`` (in ``TIME_ZONE``) as the text until static/hub/times.js replaces it.
    """
    if value is None:
        return ""
    shown = timezone.localtime(value) if timezone.is_aware(value) else value
    text = shown.strftime("%Y-%m-%d" if style == "date" else "%Y-%m-%d %H:%M")
    return format_html(
        '<time datetime="{}" data-local="{}">{}</time>', value.isoformat(), style, text
    )


@register.simple_tag
def other_languages() -> list[tuple[str, str]]:
    """The languages the switcher offers: all but the page's, each named in its own language
    (settings.LANGUAGES's names, which Django's own tag would translate)."""
    current = translation.get_language()
    return [(code, name) for code, name in settings.LANGUAGES if code != current]


@register.filter
def translated(value: object) -> str:
    """``{{ finding.message|translated }}``: the one filter for messages, said in the page's
    language (a :class:`model_store.text.Message` or its stored JSON; plain words as they are)."""
    return localize(value)
