"""``{% package_tar_of version as tar %}``: the version's built package tar, or None.

The version page shows the tar's SHA-256 once a download has built it; rendering the page
never builds one (that reads and writes the whole package).
"""

from __future__ import annotations

from django import template

from model_store.package_tar import PackageTar
from webapp.registry.catalogue import package_tars
from webapp.registry.catalogue.models import Version

register = template.Library()


@register.simple_tag
def package_tar_of(version: Version) -> PackageTar | None:
    return package_tars.cached_tar_of(version)
