"""One error type (``webapp.errors.HubError``), shown once as JSON and once on pages."""

from __future__ import annotations

import json

from django.test import Client, RequestFactory

from webapp.errors import HubError, HubErrorMiddleware, error_json


def test_as_json_it_is_the_one_shape_with_its_headers() -> None:
    response = error_json(HubError("Slow down.", "rate_limited", 429, {"Retry-After": "3"}))
    assert response.status_code == 429 and response["Retry-After"] == "3"
    assert json.loads(response.content) == {"error": "Slow down.", "code": "rate_limited"}
    assert HubError("x", headers={"Retry-After": "3"}).retry_after == 3


def test_a_role_too_low_on_a_page_is_the_403_page(viewer_client: Client) -> None:
    page = viewer_client.get("/models/new/")
    assert page.status_code == 403
    assert "This needs the operator role; you are viewer." in page.content.decode()


def test_a_refusal_no_page_caught_is_a_message_on_the_way_back(db) -> None:  # type: ignore[no-untyped-def]
    from django.contrib.messages import get_messages
    from django.contrib.messages.storage.fallback import FallbackStorage

    request = RequestFactory().post("/models/m/serve/", HTTP_REFERER="http://testserver/models/m/")
    request.session = {}  # type: ignore[attr-defined]
    request._messages = FallbackStorage(request)  # type: ignore[attr-defined]
    middleware = HubErrorMiddleware(lambda r: None)  # type: ignore[arg-type,return-value]
    response = middleware.process_exception(request, HubError("Not served.", "not_served", 409))
    assert response.status_code == 302 and response["Location"] == "http://testserver/models/m/"
    assert [str(m) for m in get_messages(request)] == ["Not served."]
    api_request = RequestFactory().post("/api/v1/models/m/serve")
    answer = middleware.process_exception(api_request, HubError("Not served.", "not_served", 409))
    assert answer.status_code == 409 and json.loads(answer.content)["code"] == "not_served"
