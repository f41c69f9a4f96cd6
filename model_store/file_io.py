"""Durable file primitives the store is built on, for any file the hub writes.

Flushing directory entries, atomic replacement (temp file + ``os.replace``), hashing,
bounded saving of a stream, hard link or copy, and the guard against paths that leave
their directory. Apart from :mod:`model_store.store` because they act on single files
wherever they are (packages, uploads, node downloads), not on the store's layout.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path

from model_store.errors import UnsafePath
from model_store.text import say

CHUNK_SIZE = 1024 * 1024
# Files Triton can read must be readable by another user (Triton may run in its
# own container); sources are made read-only once stored.
FILE_MODE = 0o644
DIR_MODE = 0o755
READ_ONLY_MODE = 0o444


def fsync_dir(path: Path) -> None:
    """Flushes a directory entry to disk, so a rename inside it survives a crash."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, mode: int = FILE_MODE) -> None:
    """Writes ``data`` to ``path`` so that readers see the old file or the new one, never a mix.

    The temp file lives in the same directory (``os.replace`` is only atomic
    within one filesystem) and its name starts with ``.`` and ends in ``.tmp``
    so that neither Triton nor the GE backend's ``*.onnx`` search picks it up.

    Args:
        path: Destination; its directory must exist.
        data: The complete new content.
        mode: Permission bits of the new file.

    Raises:
        OSError: If writing fails; the temp file is removed and ``path`` is untouched.
    """
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        with tmp.open("xb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str, mode: int = FILE_MODE) -> None:
    """Writes UTF-8 ``text`` to ``path`` atomically; see :func:`atomic_write_bytes`."""
    atomic_write_bytes(path, text.encode("utf-8"), mode)


def sha256_file(path: Path, chunk: int = CHUNK_SIZE) -> str:
    """Returns the hex sha256 of a file, reading it in chunks (constant memory).

    Args:
        path: The file to hash.
        chunk: Bytes read at a time.
    """
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


class StreamTooLarge(ValueError):
    """A stream went past the size its reader allowed; nothing of it was kept."""


def save_stream(read: Callable[[int], bytes], dest: Path, max_bytes: int) -> int:
    """Copies ``read(CHUNK_SIZE)`` until it returns ``b""`` into the new file ``dest``, synced.

    Stops reading past ``max_bytes`` (an HTTP body or answer from another host is bounded
    by its reader, whatever it announced). Returns the size.

    Raises:
        StreamTooLarge: More than ``max_bytes``; ``dest`` is removed.
        OSError: ``dest`` exists or cannot be written; ``dest`` is removed if it was made.
    """
    size = 0
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as out:
            while block := read(CHUNK_SIZE):
                size += len(block)
                if size > max_bytes:
                    raise StreamTooLarge(f"over {max_bytes} bytes")
                out.write(block)
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    return size


def safe_join(base: Path, *parts: str) -> Path:
    """Joins ``parts`` to ``base`` and refuses results that resolve outside ``base``.

    Symlinks are resolved, so a link inside ``base`` that points elsewhere is
    refused too. Use it for paths that come from outside (e.g. a file name in
    an archive or an ONNX external-data location).

    Args:
        base: The directory the result must stay in.
        *parts: Relative path components.

    Returns:
        The resolved path, inside ``base``.

    Raises:
        UnsafePath: If the result is ``base``'s parent, a sibling, an absolute
            path elsewhere, or reached through a symlink that leaves ``base``.
    """
    root = base.resolve()
    if any("\x00" in part for part in parts):
        raise UnsafePath(say("A path contains a NUL character. Use a plain relative path."))
    target = root.joinpath(*parts).resolve()
    if target != root and not target.is_relative_to(root):
        shown = "/".join(parts)
        raise UnsafePath(
            say(
                "The path %(path)s leads outside %(root)s. "
                "Use a relative path without '..' and without symlinks that point elsewhere.",
                path=repr(shown),
                root=repr(root.name),
            )
        )
    return target


def _copy_hashing(src: Path, dst: Path, chunk: int = CHUNK_SIZE) -> str:
    """Copies ``src`` to a new file ``dst`` in chunks, returning the sha256 of the bytes copied."""
    digest = hashlib.sha256()
    with src.open("rb") as fin, dst.open("xb") as fout:
        while block := fin.read(chunk):
            digest.update(block)
            fout.write(block)
        fout.flush()
        os.fsync(fout.fileno())
    return digest.hexdigest()


def link_or_copy(src: Path, dst: Path) -> None:
    """Makes ``dst`` a new name for ``src``'s bytes: a hard link when both are on one
    filesystem (no bytes copied; the data is as durable as ``src`` already is), else a copy
    that is flushed to disk before this returns. ``dst`` must not exist."""
    try:
        os.link(src, dst)
    except OSError:
        _copy_hashing(src, dst)
