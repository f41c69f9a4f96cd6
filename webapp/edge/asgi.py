"""ASGI entry point: HTTP through Django, websockets through Channels (``/ws/live/``).

Chunk uploads (``PUT /api/v1/uploads/<id>``) are streamed to the store by
``webapp.edge.stream_upload`` in front of Django, which would otherwise read each whole body
into a temporary file before the view runs.

Authenticated inference on Triton's own protocol (``POST /v2/models/.../infer``) is checked and
passed to Triton in the event loop by ``webapp.edge.gateway_fast``, with no database query once its
token and model are known.

Every other HTTP request runs through Django's WSGI handler on a fixed pool of threads
(a2wsgi). Django's ASGI handler would hop between the event loop and a new thread several
times per request (our middleware and views are synchronous), and give each request a new
thread and so a new database connection: measured on the development VM, a trivial API call
took 8 ms that way. On a fixed pool each thread keeps its connection (CONN_MAX_AGE) and a
request costs one hand-off to a thread and back.
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
django_wsgi_app = get_wsgi_application()

from a2wsgi import WSGIMiddleware  # noqa: E402
from django.conf import settings  # noqa: E402

# Django's handler returns an HttpResponse, which iterates as bytes: a valid WSGI app, though
# its annotation says otherwise.
django_http_app = WSGIMiddleware(
    django_wsgi_app,  # type: ignore[arg-type]
    workers=settings.WEB_THREADS,
)

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up first)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from webapp.edge.gateway_fast import V2FastPath  # noqa: E402
from webapp.edge.stream_upload import (  # noqa: E402
    StreamingUploads,
    tune_malloc,
    tune_socket_reads,
)
from webapp.fast_path_reads import READS  # noqa: E402
from webapp.routing import websocket_urlpatterns  # noqa: E402

tune_malloc()  # large request bodies without a page fault per piece (see its docstring)
tune_socket_reads()  # 1 MiB per socket read: a quarter of the per-piece work (docstring)

# /v2 inference is checked and passed to Triton in the event loop (webapp/edge/gateway_fast.py).
v2_fast_path = V2FastPath(StreamingUploads(django_http_app), READS)

application = ProtocolTypeRouter(
    {
        "http": v2_fast_path,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
