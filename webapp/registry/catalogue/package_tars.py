"""A packaged version as a tar with its SHA-256, for the API's download and the version page.

The tar itself (format, cache, safe unpacking) is ``model_store.package_tar``; this module
decides when a version has one (its status is ``ready``), builds it on the first download in
a bounded slow-request place (it reads and writes the whole package once), and answers it with
the headers that carry the hash.
"""

from __future__ import annotations

import base64

from django.conf import settings
from django.http import FileResponse, HttpResponse
from django.http.response import HttpResponseBase
from django.utils.translation import gettext

from model_store.errors import ModelStoreError, NotFound
from model_store.package_tar import MEDIA_TYPE, PackageTar, cached_package_tar, package_tar
from webapp import slow_requests
from webapp.errors import HubError
from webapp.registry.catalogue.models import Version
from webapp.registry.catalogue.storage import get_store
from webapp.text import localize

#: How long a first build may hold its slow-request place before the count forgets it (a
#: crashed process's place); several GiB are written in well under this.
BUILD_LONGEST_S = 1800
#: Pieces the download is sent in (Django's default of 4 KiB is slow for GiB files).
SEND_BLOCK_BYTES = 1024 * 1024


def tar_of(version: Version, user_key: str) -> PackageTar:
    """The version's package tar, built now if it has none yet or its package changed.

    Raises:
        HubError: 409 ``not_packaged`` while the version is not packaged (yet), 404
            ``package_missing`` when its package is gone from the store, 429/503 when the
            build finds no slow-request place.
        ModelStoreError: 507 ``insufficient_storage`` when the tar does not fit on the disk.
    """
    name, number = version.model.name, version.number
    if version.status != Version.Status.READY:
        raise HubError(
            gettext(
                "Version %(number)s of %(model)s is %(status)s, not "
                "packaged: its tar exists once its compile job has packaged it."
            )
            % {"number": number, "model": name, "status": version.get_status_display().lower()},
            "not_packaged",
            409,
        )
    store = get_store()
    try:
        found = cached_package_tar(store, name, number)
        if found is not None:
            return found
        with slow_requests.slow_request(user_key, longest_s=BUILD_LONGEST_S):
            return package_tar(store, name, number, min_free_bytes=settings.STORE_MIN_FREE_BYTES)
    except NotFound as exc:
        raise HubError(localize(exc.message), "package_missing", 404) from None


def cached_tar_of(version: Version) -> PackageTar | None:
    """The tar already built for the version as it is now, or None (never builds)."""
    if version.status != Version.Status.READY:
        return None
    try:
        return cached_package_tar(get_store(), version.model.name, version.number)
    except ModelStoreError:
        return None


def digest_headers(tar: PackageTar) -> dict[str, str]:
    """The SHA-256 three ways: plain hex, RFC 9530's ``Repr-Digest`` and a strong ETag."""
    raw = bytes.fromhex(tar.sha256)
    return {
        "X-Content-SHA256": tar.sha256,
        "Repr-Digest": f"sha-256=:{base64.b64encode(raw).decode('ascii')}:",
        "ETag": f'"sha256-{tar.sha256}"',
    }


def tar_response(tar: PackageTar, *, head: bool = False) -> HttpResponseBase:
    """The tar as an attachment (streamed from disk), or only its headers for ``HEAD``."""
    response: HttpResponseBase
    if head:
        response = HttpResponse(content_type=MEDIA_TYPE)
        response["Content-Disposition"] = f'attachment; filename="{tar.filename}"'
        response["Content-Length"] = str(tar.size)
    else:
        try:
            opened = tar.path.open("rb")
        except FileNotFoundError:  # a newer build of a repackaged version replaced it
            raise HubError(
                gettext("The package changed while it was being sent. Try the download again."),
                "package_changed",
                409,
            ) from None
        file = FileResponse(
            opened, as_attachment=True, filename=tar.filename, content_type=MEDIA_TYPE
        )
        file.block_size = SEND_BLOCK_BYTES
        response = file
    for header, value in digest_headers(tar).items():
        response[header] = value
    return response
