"""The API's URLs as webapp/api/app.py builds them from ninja's routers (one per path)."""

from __future__ import annotations

import re

import pytest
from django.urls import resolve

from webapp.api.app import PREFIX, openapi_document, urlpatterns

pytestmark = pytest.mark.django_db


def test_every_documented_path_has_one_url_that_knows_all_its_methods(api) -> None:  # type: ignore[no-untyped-def]
    import webapp.urls  # noqa: F401 - registers the routers

    document = openapi_document()
    assert len(urlpatterns()) == len(document["paths"])
    for template in document["paths"]:
        path = re.sub(r"\{[^}]+\}", "1", template)  # "1" fits both <int:...> and <str:...>
        assert path.startswith(PREFIX)
        assert resolve(path).func in [u.callback for u in urlpatterns()], template
    answer = api("put", "/api/v1/health")
    assert answer.status_code == 405
    assert answer["Allow"] == "GET" and answer.json()["code"] == "method_not_allowed"
