"""The admin page for adopting an existing Triton repository (``/server/adopt/``).

GET with ``path`` scans and shows the dry run; POST either shows the dry run again with the
admin's choices (ticked models, hub names for clashes) or, with ``adopt``, records the
adoption and sends the copying to the workers (views enqueue, workers work). PATH is a path
on the hub's hosts: the worker that copies must see it too.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import cast

from django.contrib import messages
from django.contrib.auth.models import User
from django.http import HttpResponse, QueryDict
from django.shortcuts import redirect, render

from model_store.adopt import COPYING_ACTIONS
from webapp import slow_requests
from webapp.accounts.roles import Role, require_role
from webapp.errors import HubError, show_error
from webapp.http import HubRequest
from webapp.registry.catalogue.adopt import DryRun, dry_run, start_adoption

MAX_PATH_LENGTH = 4096
#: A scan hashes every file of the repository: seconds for a few models, longer for large
#: weights. It holds a web thread meanwhile, so it counts as a slow request (webapp.slow_requests).
SCAN_LONGEST_S = 300.0


def adopt_page(request: HubRequest) -> HttpResponse:
    require_role(request.user, Role.ADMIN)
    data = request.POST if request.method == "POST" else request.GET
    path = data.get("path", "").strip()
    if len(path) > MAX_PATH_LENGTH:
        messages.error(request, "That path is too long.")
        path = ""
    chosen, renames = _choices(data) if request.method == "POST" else (None, {})
    if request.method == "POST" and "adopt" in data:
        try:
            admin = cast(User, request.user)  # require_role above: a signed-in admin
            with _scanning(request):
                _, created = start_adoption(path=path, user=admin, chosen=chosen, renames=renames)
        except HubError as exc:
            show_error(request, exc)
        else:
            if created:
                messages.success(request, f"Adopting {len(created)} version(s): the jobs below "
                                 "copy them into the store.")  # fmt: skip
                return redirect("jobs")
            messages.info(request, "Nothing to adopt: everything chosen is in the hub already.")
    result: DryRun | None = None
    if path:
        try:
            with _scanning(request):
                result = dry_run(path, chosen=chosen, renames=renames)
        except HubError as exc:
            show_error(request, exc)
    context = {
        "nav": "server",
        "path": path,
        "result": result,
        "rows": result.rows() if result else [],
        "copying": COPYING_ACTIONS,
        "will_copy": sum(len(p.versions) for p in result.plan.copying()) if result else 0,
    }
    return render(request, "adopt/adopt.html", context)


def _scanning(request: HubRequest) -> AbstractContextManager[None]:
    return slow_requests.slow_request(str(request.user.pk), longest_s=SCAN_LONGEST_S)


def _choices(data: QueryDict) -> tuple[list[str], dict[str, str]]:
    """Ticked folders and the hub names typed for them (a name differing from the folder's)."""
    chosen = data.getlist("chosen")
    renames = {}
    for directory in chosen:
        name = data.get(f"name-{directory}", "").strip()
        if name and name != directory:
            renames[directory] = name
    return chosen, renames
