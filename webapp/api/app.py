"""The ``/api/v1/`` application: django-ninja, with the hub's auth, errors and URL rules.

Each area module (``views``, ``versions``, ``serving``, ``tryit``, ``tokens``, ``metrics``,
``memory``, ``diagnostics``) declares its endpoints on a ``Router`` with the types of
``webapp.api.types``; this module mounts them and owns what is common:

* **Sign-in** stays with the middleware (a session, or ``Authorization: Token <key>``; 401
  for anyone else). Each operation names the least role it needs (:class:`Needs`), checked
  by the product's one role check before the body is read (403 ``forbidden``).
* **CSRF**: the URL patterns are plain Django views, not CSRF-exempt, so a session-signed
  write needs ``X-CSRFToken`` exactly as on pages (a token request is exempt, see
  ``webapp.accounts.auth``).
* **Errors**: one shape, ``{"error", "code"}``. A :class:`~webapp.errors.HubError`, a
  ``ModelStoreError`` (status from :data:`STATUS_BY_CODE`), a body that is not a JSON object
  and a field that fails its declared type are all mapped here, once.
* **Methods**: a method a path does not serve is a 405 in that shape, with ``Allow``.
* **The document**: :func:`openapi_document` is ninja's, plus what ninja cannot see: the
  sign-in schemes, the answers any endpoint can give (401, 403, 500; 411/413 where a body is
  read), the bodies handled by hand (``application/octet-stream`` chunks, ``text/plain``
  labels, the multipart upload) and response headers (an operation's ``openapi_extra`` key
  ``x-responses`` is merged into its responses).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
from django.http import Http404, HttpRequest, JsonResponse
from django.http.response import HttpResponseBase
from django.urls import URLPattern, path
from django.utils.translation import gettext
from ninja import NinjaAPI, Router
from ninja.errors import HttpError, ValidationError
from ninja.operation import PathView
from ninja.params.models import BodyModel
from ninja.parser import Parser
from ninja.utils import normalize_path, replace_path_param_notation
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from model_store.errors import ModelStoreError
from model_store.uploads import UploadOffsetMismatch
from webapp.accounts.roles import Role, require_role
from webapp.api import types
from webapp.errors import HubError, error_json, json_error
from webapp.text import localize, localized

PREFIX = "/api/v1"

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

MEANING = {
    400: "Bad input",
    401: "Not signed in / bad token",
    403: "Role too low, no role, or CSRF failed",
    404: "Not found",
    405: "Method not allowed (see Allow)",
    409: "Conflict",
    411: "Length required (no chunked request bodies)",
    413: "Too large",
    415: "Not an image",
    422: "Wrong dtype or shape",
    429: "Rate limited (see Retry-After)",
    500: "Unexpected error (logged)",
    503: "Unavailable or busy (see Retry-After)",
    504: "Timed out",
    507: "The store is out of space",
}


RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait", "schema": {"type": "integer"}}}


def errors(*codes: int) -> dict[int, type[types.Error]]:
    """Response declarations for refusals: each in the one error shape."""
    return dict.fromkeys(codes, types.Error)


def store_error(exc: ModelStoreError) -> HubError:
    """A ``model_store`` error as the API answers it (409 offset carries the expected one)."""
    code = getattr(exc, "code", "invalid")
    headers = {}
    if isinstance(exc, UploadOffsetMismatch):
        headers["Upload-Offset"] = str(exc.expected)
    status = getattr(exc, "status", None) or STATUS_BY_CODE.get(code, 400)
    # A message model_store said with its template (model_store.text) is translated here.
    message = localize(getattr(exc, "message", None) or str(exc))
    return HubError(message, code, status, headers)


class Needs:
    """Ninja auth for an operation: sign-in is the middleware's; this checks the role."""

    def __init__(self, role: Role) -> None:
        self.role = role

    def __call__(self, request: HttpRequest) -> bool:
        require_role(request.user, self.role)
        return True


VIEWER = Needs(Role.VIEWER)
OPERATOR = Needs(Role.OPERATOR)
ADMIN = Needs(Role.ADMIN)


class JsonObjectParser(Parser):
    """Request bodies are JSON objects; anything else is refused saying what is wrong."""

    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        return json_object(request.body)


def json_object(raw: bytes) -> dict[str, Any]:
    # orjson, not json: an ImageNet-sized tensor as a JSON list (3 MB, 150,528 numbers) took the
    # standard decoder ~47 ms on the development VM and orjson ~7 ms. orjson is also stricter:
    # NaN, Infinity and numbers that overflow a double are refused rather than read as inf/nan,
    # and nesting stops at 1024 levels.
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):
            raise HubError(
                gettext("The body's JSON is nested too deeply."), "invalid_json"
            ) from None
        message = gettext("The body is not valid JSON: %(reason)s") % {"reason": exc}
        raise HubError(message, "invalid_json") from None
    if not isinstance(data, dict):
        raise HubError(gettext("The body must be a JSON object."), "invalid_json")
    return data


T = TypeVar("T", bound=BaseModel)


def parse_body(request: HttpRequest, model: type[T]) -> T:
    """A body handled by hand (beside another content type), checked against its type."""
    data = json_object(request.body) if request.body else {}
    try:
        return model.model_validate(data)
    except PydanticValidationError as exc:
        raise ValidationError(
            [{**e, "loc": ("body", "data", *e["loc"])} for e in exc.errors(include_url=False)]
        ) from None


api = NinjaAPI(
    title="Triton Model Hub API",
    version="1",
    description="Authenticate with `Authorization: Token <key>` "
    "(`python manage.py apitoken USERNAME`) or a browser session (then send X-CSRFToken "
    "on writes). Every error is `{error, code}`.",
    auth=VIEWER,
    parser=JsonObjectParser(),
    docs_url=None,
    openapi_url=None,
    urls_namespace="api-v1",
)

# --------------------------------------------------------------------------- errors, once

_TYPE_NAMES = {
    "string_type": "str",
    "int_type": "int",
    "int_from_float": "int",
    "bool_type": "bool",
    "dict_type": "dict",
    "list_type": "list",
    "float_type": "float",
    "model_type": "dict",
    "model_attributes_type": "dict",
}


def validation_message(error: dict[str, Any]) -> HubError:
    """One pydantic error of a body or query as a plain message naming the field."""
    source, *where = error["loc"]
    kind, ctx = error["type"], error.get("ctx") or {}
    if source == "body":
        where = where[1:]  # the handler's parameter name
    name = ".".join(str(p) for p in where)
    if source != "body":
        return HubError(_query_message(name, kind, ctx, error["msg"]), "invalid_query")
    if not name:
        return HubError(gettext("The body must be a JSON object."), "invalid_json")
    field = {"name": repr(name)}
    if kind == "missing":
        return HubError(gettext("The field %(name)s is required.") % field, "missing_field")
    if kind == "string_too_long":
        message = gettext("The field %(name)s is longer than %(limit)s characters.")
        return HubError(message % {**field, "limit": ctx.get("max_length")}, "invalid_field")
    if kind in _TYPE_NAMES:
        message = gettext("The field %(name)s must be a %(type)s.")
        return HubError(message % {**field, "type": _TYPE_NAMES[kind]}, "invalid_field")
    # pydantic's own wording (English) for the rest.
    message = gettext("The field %(name)s: %(problem)s.")
    return HubError(message % {**field, "problem": error["msg"]}, "invalid_field")


def _query_message(name: str, kind: str, ctx: dict[str, Any], fallback: str) -> str:
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return gettext("%(name)s must be a whole number.") % {"name": name}
    if kind == "greater_than_equal":
        return gettext("%(name)s must be at least %(limit)s.") % {
            "name": name,
            "limit": ctx.get("ge"),
        }
    if kind == "less_than_equal":
        return gettext("%(name)s must be at most %(limit)s.") % {
            "name": name,
            "limit": ctx.get("le"),
        }
    return f"{name}: {fallback}."


@api.exception_handler(HubError)
def _hub_error(request: HttpRequest, exc: HubError) -> HttpResponseBase:
    return error_json(exc)


@api.exception_handler(ModelStoreError)
def _store_error(request: HttpRequest, exc: ModelStoreError) -> HttpResponseBase:
    error = store_error(exc)
    field = getattr(exc, "field", None)
    if not field:
        return error_json(error)
    # An inference input at fault is named beside the error (types.Input).
    body = {"error": localize(error.message), "code": error.code, "input": field}
    return JsonResponse(body, status=error.status)


@api.exception_handler(ValidationError)
def _validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponseBase:
    return error_json(validation_message(exc.errors[0]))


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponseBase:
    if isinstance(exc.__cause__, HubError):  # the parser's refusal, wrapped by ninja
        return error_json(exc.__cause__)
    return json_error(str(exc), "bad_request", exc.status_code)


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponseBase:
    message = str(exc) or gettext("Nothing at %(path)s.") % {"path": request.path}
    return json_error(message, "not_found", 404)


@api.exception_handler(Exception)
def _unexpected(request: HttpRequest, exc: Exception) -> HttpResponseBase:
    raise exc  # Django logs it and answers with webapp.api.views.server_error


# --------------------------------------------------------------------------- URLs


def _said_in_the_callers_language(handler: Callable[..., Any]) -> Callable[..., Any]:
    """``handler`` whose answer has every message in it said in the request's language
    (``Accept-Language``, English without it): an answer holds words, never stored templates."""

    @functools.wraps(handler)
    def said(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        result = handler(request, *args, **kwargs)
        if isinstance(result, HttpResponseBase):
            return result
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], int):
            return result[0], localized(result[1])
        return localized(result)

    return said


def _wrap(path_view: PathView, public: bool) -> Callable[..., HttpResponseBase]:
    """Ninja's view for one path, behind the 405 rule and the empty-body rule."""
    for operation in path_view.operations:
        operation.view_func = _said_in_the_callers_language(operation.view_func)
    ninja_view = path_view.get_view()
    methods: list[str] = []
    for operation in path_view.operations:
        methods += [m for m in operation.methods if m not in methods]
    with_body = {
        m
        for operation in path_view.operations
        if any(issubclass(model, BodyModel) for model in operation.models)
        for m in operation.methods
    }

    def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.method not in methods:
            message = gettext("%(method)s is not allowed here; use %(allowed)s.")
            return json_error(
                message % {"method": request.method, "allowed": ", ".join(methods)},
                "method_not_allowed",
                405,
                {"Allow": ", ".join(methods)},
            )
        if request.method in with_body and not request.META.get("CONTENT_LENGTH", "0").strip("0"):
            request._body = b"{}"  # no body: no fields, so each missing one is named
        return ninja_view(request, *args, **kwargs)

    if getattr(path_view.operations[0].view_func, "_hub_any_role", False):
        view.role_required = False  # type: ignore[attr-defined]
    if public:
        view.login_required = False  # type: ignore[attr-defined]
        view.csrf_exempt = True  # type: ignore[attr-defined]
    return view


_views: dict[str, Callable[..., HttpResponseBase]] = {}


def public(view: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a handler anyone may call, signed in or not (with ``auth=None``): no CSRF either."""
    view._hub_public = True  # type: ignore[attr-defined]
    return view


def any_role(view: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a handler a signed-in caller may call without a role (with ``auth=None``)."""
    view._hub_any_role = True  # type: ignore[attr-defined]
    return view


def add_routers(*routers: Router) -> None:
    for router in routers:
        api.add_router("", router)


@functools.cache
def urlpatterns() -> list[URLPattern]:
    """One Django URL per path (ninja makes one per operation), named as before.

    This reads ninja's private ``_get_bound_routers()``: its public ``api.urls`` gives one URL
    per operation, each with ninja's own view and no way back to the path it serves, and the
    rules wrapped around every path here (a 405 naming the methods the path allows, an empty
    body read as ``{}``, answers said in the caller's language) need the path's operations
    together. tests/unit/test_api_urls.py fails first if a ninja upgrade changes it.
    """
    result = []
    for bound in api._get_bound_routers():
        for route, path_view in bound.path_operations.items():
            route = normalize_path(replace_path_param_notation(route)).lstrip("/")
            first = path_view.operations[0]
            is_public = getattr(first.view_func, "_hub_public", False)
            view = _wrap(path_view, is_public)
            name = first.url_name
            _views[name] = view
            result.append(path(route, view, name=name))
    return result


def django_view(url_name: str) -> Callable[..., HttpResponseBase]:
    """The Django view serving a named API URL (the chunk fast path runs its checks)."""
    urlpatterns()
    return _views[url_name]


# --------------------------------------------------------------------------- the document

#: Bodies read by hand, documented from their types (name -> model).
EXTRA_SCHEMAS: dict[str, type[BaseModel]] = {}


@functools.cache
def openapi_document() -> dict[str, Any]:
    """``/api/v1/schema``: generated from the routers' declarations, plus the common rules."""
    document: dict[str, Any] = json.loads(
        json.dumps(api.get_openapi_schema(path_prefix=PREFIX), default=str)
    )
    components = document.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name, model in EXTRA_SCHEMAS.items():
        generated = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(generated.pop("$defs", {}))
        schemas[name] = generated
    schemas.setdefault("Error", types.Error.model_json_schema())
    components["securitySchemes"] = {
        "token": {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "Token <key>",
        },
        "session": {"type": "apiKey", "in": "cookie", "name": "sessionid"},
    }
    document["security"] = [{"token": []}, {"session": []}]
    error = {"$ref": "#/components/schemas/Error"}
    roles = _roles_by_operation_id()
    for item in document["paths"].values():
        for operation in item.values():
            if operation.get("operationId") in roles:
                operation["x-role"] = roles[operation["operationId"]]
            responses = operation["responses"]
            for code, extra in operation.pop("x-responses", {}).items():
                responses.setdefault(code, {}).update(extra)
            for code, response in responses.items():
                if code.isdigit() and int(code) >= 400:
                    response["description"] = MEANING.get(
                        int(code), response.get("description", "")
                    )
            common = [500] if operation.get("security") == [] else [401, 403, 500]
            if "requestBody" in operation:
                common += [411, 413]
            for code in common:
                responses.setdefault(
                    str(code),
                    {
                        "description": MEANING[code],
                        "content": {"application/json": {"schema": error}},
                    },
                )
            if operation.get("security") != []:
                operation.pop("security", None)
    return document


def _roles_by_operation_id() -> dict[str, str]:
    """The least role each operation needs (``x-role`` in the document)."""
    roles = {}
    for bound in api._get_bound_routers():
        for path_view in bound.path_operations.values():
            for operation in path_view.operations:
                needs = [a for a in operation.auth_callbacks if isinstance(a, Needs)]
                if needs:
                    operation_id = operation.operation_id or api.get_openapi_operation_id(operation)
                    roles[operation_id] = needs[0].role.label
    return roles
