"""Request bodies are refused before anything reads them, unless they may be read.

Django's CSRF middleware parses a POST body (``request.POST``) before the sign-in check
runs, and its multipart parser spools file parts over ``FILE_UPLOAD_MAX_MEMORY_SIZE`` to
temporary files: an anonymous client could make the web process write as much as it
liked. This middleware sits right after authentication and before anything that reads a
body, and answers from the headers alone:

* a body from someone not signed in is refused (401 for the API, 403 for pages), except on
  the sign-in pages and the language switcher, whose bodies are small;
* a body longer than the limit for its kind of endpoint is refused with 413 and the limit;
* a body of unknown length (``Transfer-Encoding: chunked``) is refused with 411, since its
  size cannot be checked before reading.

The limits: the one-shot multipart upload of a version (``UPLOAD_MAX_BYTES``), the infer
API, saved examples and the Try it tab's forms (``INFER_MAX_REQUEST_BYTES``), a labels file
(4 MiB), a chunk of a chunked upload (twice ``UPLOAD_CHUNK_BYTES``, as its view allows), a
node's build artifact (twice ``UPLOAD_MAX_BYTES``, as its view allows),
and everything else ``REQUEST_MAX_BYTES``. The streamed chunk ``PUT``
(``webapp.edge.stream_upload``) runs this same check before it reads past its first pipe,
and the views that take inference inputs call :func:`require_infer_body_within_cap`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext, gettext_noop

from webapp.accounts.auth import is_api_request
from webapp.errors import HubError, json_error

#: Forms someone not yet signed in may send (a few hundred bytes): signing in, and the
#: sign-in page's language switcher.
PUBLIC_FORMS = ("/login/", "/admin/login/", "/language/")
PUBLIC_FORM_MAX_BYTES = 64 << 10

_ONE_SHOT_UPLOAD = re.compile(r"^/api/v1/models/[^/]+/versions$")
_INFER = re.compile(r"^(/api/v1/models/[^/]+|/v2/models/[^/]+(/versions/[^/]+)?)/infer$")
_CHUNK = re.compile(r"^/api/v1/uploads/[^/]+$")
_EXAMPLES = re.compile(r"^/api/v1/models/[^/]+/examples$")
#: The Try it tab's run and save-example forms carry the same inputs as the infer API.
_TRY_PAGE = re.compile(r"^/models/[^/]+/try/(run|examples)/$")
_LABELS = re.compile(r"^/api/v1/models/[^/]+/labels$")
#: A node sends back the artifact of a build it ran (webapp/registry/build/node_builds.py).
_NODE_ARTIFACT = re.compile(r"^/api/v1/nodes/[^/]+/builds/[0-9a-f]{32}/artifact\.tar$")
LABELS_MAX_BYTES = 4 << 20


def body_limit(path: str) -> tuple[int, str]:
    """The largest body this path accepts, and the setting that sets it."""
    if _ONE_SHOT_UPLOAD.match(path):
        return settings.UPLOAD_MAX_BYTES, "UPLOAD_MAX_BYTES"
    if _INFER.match(path) or _EXAMPLES.match(path) or _TRY_PAGE.match(path):
        return settings.INFER_MAX_REQUEST_BYTES, "INFER_MAX_REQUEST_BYTES"
    # The phrases are marked (gettext_noop) and said in the request's language by refusal().
    if _NODE_ARTIFACT.match(path):
        return 2 * settings.UPLOAD_MAX_BYTES, gettext_noop(
            "UPLOAD_MAX_BYTES (x2, a node's build artifact)"
        )
    if _LABELS.match(path):
        return LABELS_MAX_BYTES, gettext_noop("the labels file's fixed limit")
    if _CHUNK.match(path):
        return settings.UPLOAD_CHUNK_BYTES * 2, "UPLOAD_CHUNK_BYTES (x2)"
    if path in PUBLIC_FORMS:
        return PUBLIC_FORM_MAX_BYTES, gettext_noop("the sign-in form's fixed limit")
    return settings.REQUEST_MAX_BYTES, "REQUEST_MAX_BYTES"


def declared_length(request: HttpRequest) -> int | None:
    """The body's declared length: 0 for none, None when it is unknown (chunked)."""
    meta = request.META
    if "chunked" in meta.get("HTTP_TRANSFER_ENCODING", "").lower():
        return None
    try:
        return max(0, int(meta.get("CONTENT_LENGTH") or 0))
    except ValueError:
        return None


def require_infer_body_within_cap(request: HttpRequest) -> None:
    """Raise 413 ``too_large`` for a body over ``INFER_MAX_REQUEST_BYTES``, from its declared
    length, before reading a byte of it.

    :class:`RequestBodyGuard` refuses such a body first (:func:`body_limit` gives the infer,
    examples and Try it paths this cap); the views that take inference inputs call this too so
    that each is safe on its own.
    """
    cap = settings.INFER_MAX_REQUEST_BYTES
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > cap:
        message = gettext(
            "The request is %(size)s bytes; the limit is %(limit)s (INFER_MAX_REQUEST_BYTES). "
            "Send a smaller image or tensor."
        )
        raise HubError(
            message % {"size": f"{declared:,}", "limit": f"{cap:,}"},
            "too_large",
            413,
        )


def refusal(request: HttpRequest) -> HttpResponse | None:
    """The answer to a body that must not be read, or None when reading it is fine."""
    length = declared_length(request)
    if length == 0:
        return None
    user = getattr(request, "user", None)
    if not (user is not None and user.is_authenticated) and request.path not in PUBLIC_FORMS:
        message = gettext("Sign in before sending data.")
        return _refuse(request, message, "not_authenticated", 401, 403)
    if length is None:
        message = gettext("Send a Content-Length: bodies of unknown length are not accepted.")
        return _refuse(request, message, "length_required", 411)
    limit, setting = body_limit(request.path)
    if length > limit:
        message = gettext(
            "The request body is %(size)s bytes; this endpoint accepts at most %(limit)s bytes "
            "(%(setting)s)."
        )
        response = _refuse(
            request,
            message % {"size": length, "limit": limit, "setting": gettext(setting)},
            "too_large",
            413,
        )
        response["X-Max-Body-Bytes"] = str(limit)
        return response
    return None


def _refuse(
    request: HttpRequest, message: str, code: str, status: int, page_status: int | None = None
) -> HttpResponse:
    if is_api_request(request):
        response: HttpResponse = json_error(message, code, status)
    else:
        response = HttpResponse(message, status=page_status or status, content_type="text/plain")
    # The body stays unread; the server (not the app: hop-by-hop headers are its business)
    # closes the connection rather than read it.
    return response


class RequestBodyGuard:
    """Must sit after the authentication middleware and before CSRF reads ``request.POST``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return refusal(request) or self.get_response(request)
