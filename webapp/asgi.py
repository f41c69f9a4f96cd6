"""The ASGI application's old address, kept for deploy scripts that name ``webapp.asgi``.

The entry point lives in ``webapp.edge.asgi`` with the rest of what answers before Django's
request cycle; this module only re-exports it.
"""

from webapp.edge.asgi import application

__all__ = ["application"]
