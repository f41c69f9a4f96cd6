"""Node tokens: an API token with the scope ``node:<name>``, for one node's worker.

A node holds no database credentials (docs/nodes.md): it reports its host and fetches packaged
versions over the API with this token, and may do nothing else. The token middleware
(``webapp.accounts.auth``) asks :func:`refusal` on every request a node token makes: it may
``POST`` its own reports, ``GET``/``HEAD`` a version's ``package.tar`` and fetch the source
and send the artifact of a build it runs (its own node's URLs only); anything else, pages
included, is a 403 ``node_token_scope``. Node tokens belong to one service account
(:data:`SERVICE_USER`, viewer, no password: nobody signs in as it); the scope says which node.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.http import HttpRequest
from django.urls import Resolver404, resolve
from django.utils import timezone
from django.utils.translation import gettext

from webapp.accounts.models import ApiToken
from webapp.accounts.roles import Role, grant, role_of

PREFIX = "node:"
SERVICE_USER = "hub-nodes"
REFUSED_CODE = "node_token_scope"

#: What a node token may call: URL name -> methods (the URL must also name its node).
ALLOWED = {
    "api-node-reports": frozenset({"POST"}),
    "api-version-package-tar": frozenset({"GET", "HEAD"}),
    "api-node-build-source": frozenset({"GET"}),
    "api-node-build-artifact": frozenset({"PUT"}),
}


def scope_for(node: str) -> str:
    return PREFIX + node


def node_of(scope: str) -> str | None:
    """The node a token's scope names, or None for a person's token."""
    return scope[len(PREFIX) :] if scope.startswith(PREFIX) else None


def refusal(node: str, request: HttpRequest) -> str | None:
    """Why the token of ``node`` may not make ``request``, or None when it may.

    A path that does not exist is let through to its 404, and an allowed path with a method
    it does not serve to its 405 (those paths serve only :data:`ALLOWED`'s methods; a test
    holds them to it): neither reaches anything.
    """
    try:
        match = resolve(request.path_info)
    except Resolver404:
        return None
    if match.url_name not in ALLOWED:
        message = gettext(
            "This is the node token of %(node)s: it may only post that node's reports, "
            "fetch packaged versions (package.tar) and the builds it runs."
        )
        return message % {"node": repr(node)}
    other = match.kwargs.get("name")
    if match.url_name.startswith("api-node-") and other != node:
        message = gettext("This is the node token of %(node)s; it cannot act for node %(other)s.")
        return message % {"node": repr(node), "other": repr(other)}
    return None


def service_user() -> object:
    """The account node tokens belong to (made on first use, viewer, no password)."""
    user, created = get_user_model().objects.get_or_create(username=SERVICE_USER)
    if created:
        user.set_unusable_password()
        user.save()
    if role_of(user) is Role.NONE:
        grant(user, Role.VIEWER)
    return user


def issue(node: str) -> str:
    """A new token for ``node``; returns its key (shown once)."""
    _, key = ApiToken.issue(service_user(), f"node {node}", scope=scope_for(node))  # type: ignore[arg-type]
    return key


def live_tokens(node: str) -> list[ApiToken]:
    return list(ApiToken.objects.live().filter(scope=scope_for(node)))


def revoke(node: str) -> int:
    """Refuse every token of ``node`` from the next request on; how many were live."""
    return ApiToken.objects.live().filter(scope=scope_for(node)).update(revoked=timezone.now())
