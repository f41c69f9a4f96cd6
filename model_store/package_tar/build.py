"""Building a packaged version's tar once, hashing it while it is written, and reusing it.

The tar is written to ``sources/<model>/<version>/package-tar/<key>.tar`` (beside the package
it is made from, so deleting the version deletes it too) with ``<key>.json`` holding its
SHA-256 and size. ``<key>`` is a fingerprint of everything the bytes depend on: the format
version, the serving config and each packaged file's name, size, modification time and
inode. While the package is unchanged the key is the same and the tar is served as it is;
packaging the version again makes a new key, and the next build removes the old tar.

Large artifacts never sit in memory: files are copied into the tar in 1 MiB pieces and the
SHA-256 is computed from the same pieces. Builds of one version are serialised with
``fcntl.flock``, so two downloads at once build it once.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import io
import json
import os
import secrets
import shutil
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol, cast

from model_store.config import render_pbtxt
from model_store.file_io import CHUNK_SIZE, DIR_MODE, FILE_MODE, atomic_write_text, fsync_dir
from model_store.names import validate_model_name, validate_version
from model_store.package_tar.layout import (
    FORMAT_VERSION,
    TAR_FORMAT,
    PackageChanged,
    download_name,
    normalised_entry,
)
from model_store.serving.packages import package_files, serving_config
from model_store.store import CONFIG_FILE, ModelStore
from model_store.text import say
from model_store.uploads.errors import InsufficientStorage, human_bytes

CACHE_DIR = "package-tar"
_LOCK_FILE = ".lock"
#: Header blocks per entry (a pax header may precede the ustar one), the two zero blocks that
#: end a tar and a record's padding: enough for the free-space check, never the exact size.
_OVERHEAD_PER_ENTRY = 3 * tarfile.BLOCKSIZE
_OVERHEAD = 2 * tarfile.BLOCKSIZE + tarfile.RECORDSIZE


class Writable(Protocol):
    """Where :func:`write_package_tar` writes: tarfile needs ``write`` and ``tell``."""

    def write(self, data: bytes, /) -> int: ...

    def tell(self) -> int: ...


@dataclass(frozen=True)
class PackageTar:
    """A built package tar: where it is, its SHA-256 (hex) and size in bytes."""

    model: str
    version: int
    path: Path
    sha256: str
    size: int

    @property
    def filename(self) -> str:
        """The name a download gets, ``<model>-v<version>.tar``."""
        return download_name(self.model, self.version)


@dataclass(frozen=True)
class _Contents:
    """What the tar of one version is made from, read from the package now."""

    model: str
    version: int
    config: bytes
    files: tuple[Path, ...]
    key: str

    @property
    def payload_bytes(self) -> int:
        return len(self.config) + sum(p.stat().st_size for p in self.files)


def cached_package_tar(store: ModelStore, name: str, version: int) -> PackageTar | None:
    """The tar built for the package as it is now, or None (never builds; cheap).

    Raises:
        NotFound: If the version has no package.
        InvalidConfig: If its packaged config cannot be parsed.
    """
    contents = _contents(store, name, version)
    return _cached(_cache_dir(store, contents), contents)


def package_tar(
    store: ModelStore, name: str, version: int, *, min_free_bytes: int = 0
) -> PackageTar:
    """The tar of a packaged version, built now if the package has none or has changed.

    Args:
        store: The model store.
        name: Model name.
        version: Version number.
        min_free_bytes: Refuse to build when less would stay free on the store's disk.

    Raises:
        NotFound: If the version has no package (config.pbtxt or files).
        InvalidConfig: If its packaged config cannot be parsed.
        InsufficientStorage: If the tar does not fit on the store's disk; nothing is kept.
        PackageChanged: If the package changed while its tar was being written.
    """
    contents = _contents(store, name, version)
    cache = _cache_dir(store, contents)
    found = _cached(cache, contents)
    if found is not None:
        return found
    cache.mkdir(mode=DIR_MODE, exist_ok=True)
    with _build_lock(cache):
        # Another process may have built it while this one waited for the lock.
        contents = _contents(store, name, version)
        found = _cached(cache, contents)
        if found is None:
            found = _build(store, cache, contents, min_free_bytes)
        _remove_other_builds(cache, contents.key)
    return found


def write_package_tar(
    out: Writable, model: str, version: int, config: bytes, files: list[Path]
) -> None:
    """Writes the tar of ``config`` and ``files`` as ``<model>/...`` to ``out``.

    The bytes depend on the arguments and the files' contents only, never on the host, the
    time or the files' owners and modes (see :mod:`model_store.package_tar.layout`).
    """
    model = validate_model_name(model)
    version = validate_version(version)
    entries: list[tuple[str, Path | bytes | None]] = [
        (f"{model}/", None),
        (f"{model}/{version}/", None),
        (f"{model}/{CONFIG_FILE}", config),
    ]
    entries += [(f"{model}/{version}/{path.name}", path) for path in files]
    # tarfile only calls write and tell on fileobj; its stubs ask for a whole binary file.
    fileobj = cast(BinaryIO, out)
    with tarfile.TarFile(
        fileobj=fileobj, mode="w", format=TAR_FORMAT, copybufsize=CHUNK_SIZE
    ) as tar:
        for name, source in sorted(entries, key=lambda entry: entry[0]):
            if source is None:
                tar.addfile(normalised_entry(name.rstrip("/"), directory=True))
            elif isinstance(source, bytes):
                tar.addfile(normalised_entry(name, size=len(source)), io.BytesIO(source))
            else:
                with source.open("rb") as fh:
                    size = os.fstat(fh.fileno()).st_size
                    tar.addfile(normalised_entry(name, size=size), fh)


def _contents(store: ModelStore, name: str, version: int) -> _Contents:
    name = validate_model_name(name)
    version = validate_version(version)
    config = render_pbtxt(serving_config(store, name, version)).encode("utf-8")
    files = tuple(package_files(store, name, version))
    fingerprint = hashlib.sha256(f"package tar format {FORMAT_VERSION}\n".encode())
    fingerprint.update(hashlib.sha256(config).digest())
    for path in files:
        info = path.stat()
        fingerprint.update(
            f"{path.name}\0{info.st_size}\0{info.st_mtime_ns}\0{info.st_ino}\0{info.st_dev}\n".encode()
        )
    return _Contents(name, version, config, files, fingerprint.hexdigest()[:32])


def _cache_dir(store: ModelStore, contents: _Contents) -> Path:
    return store.source_dir(contents.model, contents.version) / CACHE_DIR


def _cached(cache: Path, contents: _Contents) -> PackageTar | None:
    """The finished build for this key: its record is written last, after the tar."""
    try:
        record = json.loads((cache / f"{contents.key}.json").read_text(encoding="utf-8"))
        path = cache / f"{contents.key}.tar"
        size = path.stat().st_size
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("size") != size:
        return None
    sha256 = record.get("sha256")
    if not isinstance(sha256, str) or len(sha256) != 64:
        return None
    return PackageTar(contents.model, contents.version, path, sha256, size)


@contextlib.contextmanager
def _build_lock(cache: Path) -> Iterator[None]:
    with (cache / _LOCK_FILE).open("a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _build(store: ModelStore, cache: Path, contents: _Contents, min_free_bytes: int) -> PackageTar:
    need = contents.payload_bytes + _OVERHEAD_PER_ENTRY * (len(contents.files) + 3) + _OVERHEAD
    _check_free_space(cache, need, min_free_bytes)
    target = cache / f"{contents.key}.tar"
    temporary = cache / f".{contents.key}.{secrets.token_hex(6)}.tmp"
    try:
        with temporary.open("xb") as fh:
            hashing = HashingWriter(fh)
            write_package_tar(
                hashing, contents.model, contents.version, contents.config, list(contents.files)
            )
            fh.flush()
            os.fchmod(fh.fileno(), FILE_MODE)
            os.fsync(fh.fileno())
        if _contents(store, contents.model, contents.version).key != contents.key:
            raise PackageChanged(
                say(
                    "The package of version %(version)s of %(model)s changed "
                    "while its tar was being written. Try the download again.",
                    version=contents.version,
                    model=repr(contents.model),
                )
            )
        temporary.replace(target)
        fsync_dir(cache)
        record = {"sha256": hashing.sha256(), "size": hashing.position, "format": FORMAT_VERSION}
        atomic_write_text(cache / f"{contents.key}.json", json.dumps(record) + "\n")
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise InsufficientStorage(
                say(
                    "The store's disk filled up while the tar of version %(version)s of "
                    "%(model)s was written (%(size)s). Free space on the "
                    "store's disk (or ask an administrator), then try again.",
                    version=contents.version,
                    model=repr(contents.model),
                    size=human_bytes(need),
                )
            ) from None
        raise
    finally:
        temporary.unlink(missing_ok=True)
    return PackageTar(contents.model, contents.version, target, hashing.sha256(), hashing.position)


def _check_free_space(cache: Path, need: int, min_free_bytes: int) -> None:
    free = shutil.disk_usage(cache).free
    if free - need < min_free_bytes:
        raise InsufficientStorage(
            say(
                "The store's disk has %(free)s free; the package tar needs about "
                "%(need)s and %(floor)s must stay free. Free space "
                "on the store's disk (or ask an administrator), then try again.",
                free=human_bytes(free),
                need=human_bytes(need),
                floor=human_bytes(min_free_bytes),
            )
        )


def _remove_other_builds(cache: Path, key: str) -> None:
    """Tars of earlier packages and leftovers of interrupted builds (a reader that still has
    one open keeps reading it: removing a name does not close a file)."""
    keep = {f"{key}.tar", f"{key}.json", _LOCK_FILE}
    for entry in cache.iterdir():
        if entry.name not in keep and entry.is_file():
            entry.unlink(missing_ok=True)


class HashingWriter:
    """A write-only file that hashes and counts what goes through it (tarfile needs tell)."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._digest = hashlib.sha256()
        self.position = 0

    def write(self, data: bytes) -> int:
        self._out.write(data)
        self._digest.update(data)
        self.position += len(data)
        return len(data)

    def tell(self) -> int:
        return self.position

    def sha256(self) -> str:
        return self._digest.hexdigest()
