"""``api_view``: method check, role check, JSON body parsing and one error shape.

Sign-in itself is enforced by ``LoginRequiredMiddleware`` (401); this adds 403/405/400.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.http.response import HttpResponseBase

from model_store.errors import ModelStoreError
from webapp.accounts.roles import Role, role_of
from webapp.api.errors import ApiError, error_response
from webapp.registry.actions import RegistryError

View = Callable[..., HttpResponseBase | dict[str, Any] | list[Any]]

# model_store errors carry a code; most are bad input (400), these mean something else.
STATUS_BY_CODE = {
    "not_found": 404,
    "upload_not_found": 404,
    "upload_offset": 409,
    "upload_busy": 409,
    "conflict": 409,
    "upload_too_large": 413,
    "upload_quota": 409,
    "insufficient_storage": 507,
}


def api_view(
    *methods: str, role: Role = Role.VIEWER
) -> Callable[[View], Callable[..., HttpResponseBase]]:
    """Wrap a view that returns data (dict/list) or a response.

    ``role`` is the least role needed for non-GET methods; GET always needs a viewer.
    """

    def decorate(view: View) -> Callable[..., HttpResponseBase]:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if request.method not in methods:
                response = error_response(
                    f"{request.method} is not allowed here; use {', '.join(methods)}.",
                    "method_not_allowed",
                    405,
                )
                response["Allow"] = ", ".join(methods)
                return response
            needed = Role.VIEWER if request.method in ("GET", "HEAD") else role
            have = role_of(request.user)
            if have < needed:
                return error_response(
                    f"This needs the {needed.label} role; you are {have.label}.", "forbidden", 403
                )
            try:
                result = view(request, *args, **kwargs)
            except ApiError as exc:
                return error_response(exc.message, exc.code, exc.status)
            except RegistryError as exc:
                response = error_response(exc.message, exc.code, exc.status)
                retry_after = getattr(exc, "retry_after", None)
                if retry_after:
                    response["Retry-After"] = str(retry_after)
                return response
            except ModelStoreError as exc:
                code = getattr(exc, "code", "invalid")
                return error_response(str(exc), code, STATUS_BY_CODE.get(code, 400))
            if isinstance(result, HttpResponseBase):  # streamed files (FileResponse) too
                return result
            return JsonResponse(result, safe=False)

        return wrapper

    return decorate


def json_body(request: HttpRequest) -> dict[str, Any]:
    """The request body as a JSON object, or an ApiError that says what is wrong with it."""
    if not request.body:
        return {}
    try:
        data = json.loads(request.body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(f"The body is not valid JSON: {exc}", "invalid_json") from None
    except RecursionError:  # the decoder recurses per level: [[[[...]]]] can exhaust it
        raise ApiError("The body's JSON is nested too deeply.", "invalid_json") from None
    if not isinstance(data, dict):
        raise ApiError("The body must be a JSON object.", "invalid_json")
    return data


def field(
    data: dict[str, Any], name: str, kind: type, *, default: Any = ..., max_len: int = 0
) -> Any:
    """Read one field of a JSON body, strictly typed."""
    if name not in data:
        if default is ...:
            raise ApiError(f"The field {name!r} is required.", "missing_field")
        return default
    value = data[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ApiError(f"The field {name!r} must be a {kind.__name__}.", "invalid_field")
    if max_len and isinstance(value, str) and len(value) > max_len:
        raise ApiError(f"The field {name!r} is longer than {max_len} characters.", "invalid_field")
    return value
