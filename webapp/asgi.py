"""ASGI entry point: HTTP through Django, websockets through Channels (``/ws/live/``).

Chunk uploads (``PUT /api/v1/uploads/<id>``) are streamed to the store by
``webapp.api.stream_upload`` in front of Django, which would otherwise read each whole body
into a temporary file before the view runs; every other request reaches Django unchanged.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up first)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from webapp.api.stream_upload import StreamingUploads, tune_malloc  # noqa: E402
from webapp.routing import websocket_urlpatterns  # noqa: E402

tune_malloc()  # large request bodies without a page fault per piece (see its docstring)

application = ProtocolTypeRouter(
    {
        "http": StreamingUploads(django_asgi_app),
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
