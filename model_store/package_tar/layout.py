"""What a package tar holds and how its entries look, shared by the writer and the reader.

A package tar is one Triton repository entry for one version (docs/triton.md#package-tar)::

    <model>/                      directory
    <model>/<version>/            directory
    <model>/<version>/<file>...   the packaged files (the artifact, any external data)
    <model>/config.pbtxt          the serving config: name <model>, version_policy [<version>]

Entries are in sorted path order, in the POSIX.1-2001 (pax) format, with every field that
would differ between two builds of the same package fixed: owner 0:0 without names, mode
0644 for files and 0755 for directories, modification time 0. So the same package always
gives the same bytes and the same SHA-256, on any host.
"""

from __future__ import annotations

import tarfile

from model_store.errors import ModelStoreError
from model_store.store import CONFIG_FILE

#: Part of every cache key: a change of the layout below invalidates tars built before it.
FORMAT_VERSION = 1
TAR_FORMAT = tarfile.PAX_FORMAT
#: Fixed, so that the bytes depend on the package only. An extractor that keeps it gives every
#: file the same 1970 time, which Triton reads as "unchanged" when deciding whether a load
#: must re-read a model; :func:`model_store.package_tar.safe_extract` stamps files with the
#: time it writes them instead.
ENTRY_MTIME = 0
ENTRY_FILE_MODE = 0o644
ENTRY_DIR_MODE = 0o755
MEDIA_TYPE = "application/x-tar"

__all__ = [
    "CONFIG_FILE",
    "ENTRY_DIR_MODE",
    "ENTRY_FILE_MODE",
    "ENTRY_MTIME",
    "FORMAT_VERSION",
    "MEDIA_TYPE",
    "TAR_FORMAT",
    "PackageChanged",
    "PackageTarError",
    "PackageTarMismatch",
    "PackageTarTooLarge",
    "UnsafePackageTar",
    "download_name",
    "normalised_entry",
]


class PackageTarError(ModelStoreError):
    """A package tar cannot be built or is not one (wrong layout, not an uncompressed tar)."""

    code = "invalid_package_tar"


class PackageTarMismatch(PackageTarError):
    """The tar's SHA-256 is not the one expected: damaged or altered on the way."""

    code = "sha256_mismatch"


class UnsafePackageTar(PackageTarError):
    """An entry would write outside its place: traversal, absolute name, link or device."""

    code = "unsafe_package_tar"


class PackageChanged(PackageTarError):
    """The package changed while its tar was being written (packaged again): try again."""

    code = "package_changed"
    status = 409


class PackageTarTooLarge(PackageTarError):
    """The tar, or what it would unpack to, is over the caller's limit."""

    code = "package_tar_too_large"


def download_name(model: str, version: int) -> str:
    """The file name a download of the tar gets, e.g. ``resnet-v3.tar``."""
    return f"{model}-v{version}.tar"


def normalised_entry(name: str, *, size: int = 0, directory: bool = False) -> tarfile.TarInfo:
    """A tar header with nothing of the host in it: only the name, type and size vary."""
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE if directory else tarfile.REGTYPE
    info.size = 0 if directory else size
    info.mode = ENTRY_DIR_MODE if directory else ENTRY_FILE_MODE
    info.mtime = ENTRY_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info
