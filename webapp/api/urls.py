"""``/api/v1/``: every path is declared on a router in this package (see ``webapp.api.app``)."""

from webapp.api import (
    app,
    canary,
    capture,
    diagnostics,
    me,
    memory,
    metrics,
    nodes,
    serving,
    tokens,
    tryit,
    tuning,
    versions,
    views,
)

app.add_routers(
    views.router,
    diagnostics.router,
    versions.router,
    memory.router,
    metrics.router,
    serving.router,
    canary.router,
    capture.router,
    tryit.router,
    tokens.router,
    me.router,
    nodes.router,
    tuning.router,
)

urlpatterns = app.urlpatterns()
