"""A tar of a few loose files, for moving a build's input and output between the hub and a node.

A compile that must run on a node (it needs CANN or an NPU the hub's workers lack) takes the
validated source model there and brings the artifact back, over HTTP, without a shared file
system (docs/nodes.md#host-bound-builds). Each side sends the files as one uncompressed tar
with its SHA-256 and the other side unpacks it with :func:`extract_files`, trusting nothing:

* the SHA-256 must be the one announced, the size and entry count under the limits;
* entries are plain files (and the directories above them): no links, devices or FIFOs;
* every name is relative, and each of its parts a plain file name (no ``..``, no ``/``
  tricks, the store's file-name rules);
* files are created new, never through a link, in a directory that did not exist before.

The entries are written in sorted order with the package tar's fixed headers, so the same
files give the same bytes.
"""

from __future__ import annotations

import os
import shutil
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from model_store.errors import ModelStoreError
from model_store.file_io import DIR_MODE, FILE_MODE, fsync_dir
from model_store.names import validate_file_name
from model_store.package_tar.build import HashingWriter
from model_store.package_tar.extract import checked_tar, copy_entry
from model_store.package_tar.layout import (
    TAR_FORMAT,
    PackageTarError,
    PackageTarTooLarge,
    UnsafePackageTar,
    normalised_entry,
)
from model_store.text import say

#: Largest files tar taken by default: a model with its external data.
DEFAULT_MAX_BYTES = 64 * 1024**3
DEFAULT_MAX_ENTRIES = 1_000
#: Deepest name taken (ONNX external data may sit in a folder beside the model).
MAX_DEPTH = 4


@dataclass(frozen=True)
class FilesTar:
    """A written tar: where, how big, its SHA-256."""

    path: Path
    size: int
    sha256: str


def write_files(files: Mapping[str, Path], dest: Path) -> FilesTar:
    """Writes ``{name: path}`` into the new tar ``dest``; names as :func:`extract_files` takes.

    Raises:
        UnsafePackageTar: A name that the other side would refuse.
        OSError: A file cannot be read, or ``dest`` exists.
    """
    names = sorted(files)
    for name in names:
        _parts(name)
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as raw:
            writer = HashingWriter(raw)
            with tarfile.open(fileobj=writer, mode="w:", format=TAR_FORMAT) as tar:  # type: ignore[call-overload]
                for name in names:
                    path = files[name]
                    with path.open("rb") as fh:
                        size = os.fstat(fh.fileno()).st_size
                        tar.addfile(normalised_entry(name, size=size), fh)
            raw.flush()
            os.fsync(raw.fileno())
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    return FilesTar(dest, writer.position, writer.sha256())


def extract_files(
    tar_path: Path,
    dest: Path,
    expected_sha256: str,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_entries: int = DEFAULT_MAX_ENTRIES,
) -> list[str]:
    """Checks the tar and unpacks its files into the new directory ``dest``; their names.

    Raises:
        PackageTarMismatch: The SHA-256 is not ``expected_sha256``.
        PackageTarTooLarge: Over ``max_bytes`` (the tar or its files) or ``max_entries``.
        UnsafePackageTar: A link, device or other special entry, or a name that climbs out.
        PackageTarError: Not an uncompressed tar, or it is empty.
    """
    with checked_tar(tar_path, expected_sha256, max_bytes) as tar:
        return _write(tar, _checked_members(tar, max_bytes, max_entries), dest)


def _checked_members(
    tar: tarfile.TarFile, max_bytes: int, max_entries: int
) -> list[tuple[tarfile.TarInfo, list[str]]]:
    files: list[tuple[tarfile.TarInfo, list[str]]] = []
    total = 0
    seen: set[str] = set()
    for count, member in enumerate(tar, start=1):
        if count > max_entries:
            raise PackageTarTooLarge(
                say("The tar has more than %(max_entries)s entries.", max_entries=max_entries)
            )
        parts = _parts(member.name)
        if member.isdir():
            continue  # directories are made for the files that need them
        if not member.isreg():
            raise UnsafePackageTar(
                say("%(name)s is not a plain file.", name=repr(member.name[:200]))
            )
        key = "/".join(parts)
        if key in seen:
            raise UnsafePackageTar(say("%(name)s is in the tar twice.", name=repr(key)))
        seen.add(key)
        total += member.size
        if total > max_bytes:
            raise PackageTarTooLarge(
                say(
                    "The tar's files add up to more than %(max_bytes)s bytes.",
                    max_bytes=max_bytes,
                )
            )
        files.append((member, parts))
    if not files:
        raise PackageTarError(say("The tar holds no files."))
    return files


def _parts(name: str) -> list[str]:
    path = PurePosixPath(name)
    if path.is_absolute() or not name or "\\" in name:
        raise UnsafePackageTar(say("%(name)s is not a relative name.", name=repr(name[:200])))
    parts = [p for p in path.parts if p != "."]
    if not parts or len(parts) > MAX_DEPTH:
        raise UnsafePackageTar(say("%(name)s is empty or too deep.", name=repr(name[:200])))
    try:
        for part in parts:
            validate_file_name(part)
    except ModelStoreError as exc:
        raise UnsafePackageTar(
            say("%(name)s: %(problem)s", name=repr(name[:200]), problem=exc.message)
        ) from None
    return parts


def _write(
    tar: tarfile.TarFile, members: list[tuple[tarfile.TarInfo, list[str]]], dest: Path
) -> list[str]:
    dest.mkdir(mode=DIR_MODE)  # new: nothing in it was put there by anyone else
    try:
        for member, parts in members:
            folder = dest
            for part in parts[:-1]:
                folder = folder / part
                if not folder.is_dir():
                    folder.mkdir(mode=DIR_MODE)
            copy_entry(tar, member, folder / parts[-1])
        fsync_dir(dest)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return sorted("/".join(parts) for _, parts in members)
