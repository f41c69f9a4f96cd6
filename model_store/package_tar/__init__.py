"""A packaged version as one deterministic tar with its SHA-256, and its safe inverse.

The tar is how a packaged version leaves the hub: people download it to hand to another
Triton (``GET /api/v1/models/{name}/versions/{n}/package.tar``) and nodes fetch it the same
way (docs/nodes.md). The format is in docs/triton.md#package-tar.

The submodules, from the bottom up (each imports only those above it):

* :mod:`~model_store.package_tar.layout`: the entries, their fixed fields and the errors;
* :mod:`~model_store.package_tar.build`: building the tar of a package once, hashing it as it
  is written, and reusing it while the package is unchanged;
* :mod:`~model_store.package_tar.extract`: :func:`safe_extract`, which checks a received tar
  (SHA-256, names, entry types, sizes, layout, config) before it writes anything.

Example::

    tar = package_tar(store, "resnet", 3)          # built once, then reused
    send(tar.path, tar.sha256)
    ...
    unpacked = safe_extract(received, staging, sha256)   # on the other host
    unpacked.model_dir.rename(repository / unpacked.model)
"""

from __future__ import annotations

from model_store.package_tar.build import (
    CACHE_DIR,
    PackageTar,
    cached_package_tar,
    package_tar,
    write_package_tar,
)
from model_store.package_tar.extract import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_ENTRIES,
    ExtractedPackage,
    safe_extract,
)
from model_store.package_tar.layout import (
    MEDIA_TYPE,
    PackageChanged,
    PackageTarError,
    PackageTarMismatch,
    PackageTarTooLarge,
    UnsafePackageTar,
    download_name,
)

__all__ = [
    "CACHE_DIR",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_ENTRIES",
    "MEDIA_TYPE",
    "ExtractedPackage",
    "PackageChanged",
    "PackageTar",
    "PackageTarError",
    "PackageTarMismatch",
    "PackageTarTooLarge",
    "UnsafePackageTar",
    "cached_package_tar",
    "download_name",
    "package_tar",
    "safe_extract",
    "write_package_tar",
]
