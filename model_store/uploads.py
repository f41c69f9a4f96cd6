"""Chunked, resumable uploads streamed to disk, and ``.zip`` model bundles.

An upload lives in its own directory under the store's ``uploads/``::

    uploads/<id>/meta.json    what the client declared (file name, size, sha256), owner, state
    uploads/<id>/data.part    the bytes received so far; its size is the resume point

``<id>`` is 32 lowercase hex characters from :mod:`secrets`; every id that comes
from outside is checked against a strict pattern before a path is built from it.
Chunks are copied from a file-like stream in fixed pieces (:data:`PIECE_SIZE`),
so memory use does not grow with the file. A chunk is accepted only at the
current end of the data (``offset == received``), which makes retries safe: a
client that lost a response asks :meth:`UploadStore.status` and resumes there.

Concurrency: writers of one upload are serialised with ``fcntl.flock`` on its
``data.part``. That works between threads and processes on one host. Several
hosts (web replicas behind a load balancer) must share the same local-semantics
file system for the store root; flock over NFS is not dependable, so route one
upload's requests to one host or use a file system with working ``flock``.

A model may arrive as one ``.onnx`` file or as a ``.zip`` *bundle*: one
``.onnx`` file and the external data files it references. :func:`unpack_bundle`
extracts a bundle defensively (no ``extractall``) and :func:`check_bundle_model`
inspects the result.

Example:
    >>> uploads = UploadStore(store.uploads_dir, max_bytes=4 * 1024**3)
    >>> up = uploads.create("resnet50.onnx", size=102_400_000, owner="alice")
    >>> received = uploads.write_chunk(up.id, 0, request_stream, length=8 * 1024**2)
    >>> done = uploads.finish(up.id)  # once received == size
    >>> store.store_source("resnet50", 1, done.path, filename=done.filename)
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import struct
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from model_store.errors import InvalidFileName, ModelStoreError, UnsafePath
from model_store.names import validate_file_name
from model_store.store import atomic_write_text, fsync_dir, safe_join

if TYPE_CHECKING:
    from model_store.onnx_info import OnnxInfo

#: Bytes copied at a time, from the request stream to disk and from disk to the hash.
PIECE_SIZE = 1024 * 1024
#: After this many bytes of a chunk, :meth:`UploadStore.write_chunk` asks the kernel to start
#: writing them to disk (Linux ``sync_file_range``), so that the ``fsync`` ending the chunk
#: waits for the last piece only, not for all of it: the disk works while the network does.
WRITEBACK_BYTES = 1024 * 1024
#: File types an upload may declare; a ``.zip`` is a bundle (one .onnx + its data files).
ALLOWED_EXTENSIONS = (".onnx", ".zip")
META_FILE = "meta.json"
PART_FILE = "data.part"
STATE_RECEIVING = "receiving"
STATE_COMPLETE = "complete"
#: How long a writer waits for another writer of the same upload before giving up.
DEFAULT_LOCK_TIMEOUT_S = 30.0
#: Members larger than this whose uncompressed/compressed ratio exceeds
#: :data:`MAX_COMPRESSION_RATIO` are treated as a zip bomb. Real weights compress
#: by a few percent; a bomb of zeros by ~1000x.
MAX_COMPRESSION_RATIO = 100
RATIO_CHECK_MIN_BYTES = 1024 * 1024
MAX_OWNER_LENGTH = 150

_ID_PATTERN = re.compile(r"[0-9a-f]{32}")
_SHA256_PATTERN = re.compile(r"[0-9a-fA-F]{64}")
_DRIVE_PATTERN = re.compile(r"[A-Za-z]:")
_DIR_MODE = 0o750
_FILE_MODE = 0o640
_BUNDLE_RULES = "A .zip bundle must hold one .onnx file and its external data files."
#: Central-directory bytes allowed per permitted entry: a 46-byte header, the name and extra
#: fields (zip64 sizes, timestamps). Real bundles need a few hundred; 4 KiB is generous.
CENTRAL_DIRECTORY_BYTES_PER_ENTRY = 4096
# The end records of a zip (APPNOTE.TXT 4.3.14-4.3.16), little-endian.
_EOCD = struct.Struct("<4s4H2LH")  # signature, disks, entries here/total, cd size/offset, comment
_EOCD_SIGNATURE = b"PK\x05\x06"
_ZIP64_LOCATOR = struct.Struct("<4sLQL")  # signature, disk, offset of the ZIP64 EOCD, disks
_ZIP64_LOCATOR_SIGNATURE = b"PK\x06\x07"
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")  # ..., entries here/total, cd size/offset
_ZIP64_EOCD_SIGNATURE = b"PK\x06\x06"
_MAX_ZIP_COMMENT = 0xFFFF


_SYNC_FILE_RANGE_WRITE = 2  # <linux/fs.h>: start writeback of dirty pages, do not wait


def _writeback_starter() -> Callable[[int, int, int], object] | None:
    """``start(fd, offset, count)``: Linux's ``sync_file_range(..., SYNC_FILE_RANGE_WRITE)``.

    None where the C library has no such call (not Linux). Its result is ignored: it is a
    hint, and the ``fsync`` after it is what makes the bytes durable.
    """
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int

    def start(fd: int, offset: int, count: int) -> object:
        return function(fd, offset, count, _SYNC_FILE_RANGE_WRITE)  # releases the GIL

    return start


_start_writeback = _writeback_starter()


# Errors --------------------------------------------------------------------------


class InvalidUpload(ModelStoreError):
    """The upload request or the uploaded bundle is not acceptable (name, size, hash, layout)."""

    code = "invalid_upload"


class UploadNotFound(ModelStoreError):
    """No upload with that id exists (never created, cancelled, or cleaned up)."""

    code = "upload_not_found"


class UploadOffsetMismatch(ModelStoreError):
    """A chunk was sent for an offset other than the current end of the data.

    Attributes:
        expected: The number of bytes received so far: resume from here.
    """

    code = "upload_offset"

    def __init__(self, message: str, expected: int) -> None:
        super().__init__(message)
        self.expected = expected

    def as_dict(self) -> dict[str, str]:
        """The API shape plus ``expected_offset`` (as text, like the other fields)."""
        return {**super().as_dict(), "expected_offset": str(self.expected)}


class UploadTooLarge(ModelStoreError):
    """The file, a chunk, or a bundle's content is larger than allowed or declared."""

    code = "upload_too_large"


class UploadCorrupt(ModelStoreError):
    """The received bytes do not match the declared sha256; nothing was kept."""

    code = "upload_corrupt"


class UploadBusy(ModelStoreError):
    """Another request is still writing to the same upload."""

    code = "upload_busy"


class UploadQuotaExceeded(ModelStoreError):
    """The owner already has as many open uploads, or open bytes, as allowed."""

    code = "upload_quota"


class InsufficientStorage(ModelStoreError):
    """The store's disk would fall under its free-space floor; nothing was written."""

    code = "insufficient_storage"


# Values --------------------------------------------------------------------------


@dataclass(frozen=True)
class Upload:
    """What is known about one upload.

    Attributes:
        id: 32 hex characters.
        filename: The file name the client gave (a plain name ending in .onnx or .zip).
        size: The declared total size in bytes.
        sha256: The declared sha256 (lowercase hex), or None if the client gave none.
        owner: Free text naming who started it (e.g. a user name); used for access checks.
        created: Creation time, seconds since the epoch.
        state: ``"receiving"`` or ``"complete"``.
        received: Bytes on disk so far: the offset of the next chunk.
    """

    id: str
    filename: str
    size: int
    sha256: str | None
    owner: str
    created: float
    state: str
    received: int

    @property
    def is_bundle(self) -> bool:
        """True for a ``.zip`` bundle, False for a single ``.onnx`` file."""
        return self.filename.lower().endswith(".zip")

    @property
    def complete(self) -> bool:
        """True once :meth:`UploadStore.finish` succeeded."""
        return self.state == STATE_COMPLETE

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for the API), with ``is_bundle`` and ``complete`` added."""
        return {**asdict(self), "is_bundle": self.is_bundle, "complete": self.complete}


@dataclass(frozen=True)
class FinishedUpload:
    """A complete, verified upload, ready to be stored.

    Attributes:
        path: The received file. It stays there until the upload is cancelled or
            cleaned up, so pass it to ``ModelStore.store_source`` and then cancel.
        sha256: The sha256 of the received bytes (lowercase hex).
        size: Its size in bytes.
        filename: The name the client gave.
    """

    path: Path
    sha256: str
    size: int
    filename: str


def human_bytes(count: int) -> str:
    """Formats a byte count for people: ``1536`` -> ``"1.5 KiB"``, ``2**31`` -> ``"2 GiB"``."""
    value = float(count)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            if unit == "bytes":
                return f"{count} bytes"
            text = f"{value:.1f}".removesuffix(".0")
            return f"{text} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def _shown(value: object) -> str:
    """A user-supplied value quoted for a message, escaped and cut short."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_upload_id(upload_id: object) -> str:
    """Returns ``upload_id`` if it is 32 lowercase hex characters.

    Raises:
        UploadNotFound: For anything else (``../../etc``, ``abc``, non-strings), so
            a probe learns nothing more than for a well-formed unknown id.
    """
    if not isinstance(upload_id, str) or not _ID_PATTERN.fullmatch(upload_id):
        raise UploadNotFound(
            f"There is no upload {_shown(upload_id)}: upload ids are 32 hex characters."
        )
    return upload_id


def check_upload_filename(filename: object) -> str:
    """Checks the name a client gives for an upload and returns it unchanged.

    Names with folder parts are refused outright (not reduced to their last
    part), and so are names the store could not use as a file name.

    Raises:
        InvalidUpload: If the name is not a plain ``.onnx`` or ``.zip`` file name.
    """
    allowed = " or ".join(ALLOWED_EXTENSIONS)
    if not isinstance(filename, str):
        raise InvalidUpload(f"The file name must be text, not {type(filename).__name__}.")
    if not filename:
        raise InvalidUpload(f"The file name is empty. Upload a {allowed} file.")
    if "/" in filename or "\\" in filename or ".." in filename:
        raise InvalidUpload(
            f"The file name {_shown(filename)} contains a folder or '..'. "
            "Send only the file's own name, e.g. 'model.onnx'."
        )
    if any(not ch.isprintable() for ch in filename):
        raise InvalidUpload(
            f"The file name {_shown(filename)} contains NUL, newline or other control "
            "characters. Rename the file."
        )
    try:
        validate_file_name(filename)
    except InvalidFileName as exc:
        raise InvalidUpload(exc.message) from None
    if not filename.lower().endswith(ALLOWED_EXTENSIONS):
        raise InvalidUpload(
            f"The file {_shown(filename)} is neither an ONNX model nor a bundle. "
            f"Upload a {allowed} file (a .zip holds one .onnx file and its external data)."
        )
    return filename


# The store -----------------------------------------------------------------------


class UploadStore:
    """Resumable uploads under one directory (usually ``ModelStore.uploads_dir``).

    Args:
        uploads_dir: Where upload directories are created; made on first use.
        max_bytes: The largest file a client may declare.
        lock_timeout_s: How long :meth:`write_chunk` and :meth:`finish` wait for
            another writer of the same upload before raising :class:`UploadBusy`.
    """

    def __init__(
        self,
        uploads_dir: Path,
        max_bytes: int,
        lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
        *,
        max_open_per_owner: int | None = None,
        max_open_bytes_per_owner: int | None = None,
        min_free_bytes: int = 0,
    ) -> None:
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        self.uploads_dir = Path(uploads_dir)
        self.max_bytes = max_bytes
        self.lock_timeout_s = lock_timeout_s
        #: Quotas on one owner's open uploads (None: no limit).
        self.max_open_per_owner = max_open_per_owner
        self.max_open_bytes_per_owner = max_open_bytes_per_owner
        #: Bytes that must stay free on the store's disk after every upload and chunk.
        self.min_free_bytes = min_free_bytes

    # Paths and metadata ------------------------------------------------------------

    def _dir(self, upload_id: str) -> Path:
        """``uploads/<id>`` for a checked id (it may not exist)."""
        return self.uploads_dir / check_upload_id(upload_id)

    def _read_meta(self, upload_dir: Path) -> dict[str, Any]:
        """Loads ``meta.json``; a missing or unreadable one means the upload is gone."""
        try:
            meta = json.loads((upload_dir / META_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise UploadNotFound(
                f"There is no upload {upload_dir.name!r} (it finished, was cancelled or "
                "expired). Start the upload again."
            ) from None
        if not isinstance(meta, dict):
            raise UploadNotFound(f"The upload {upload_dir.name!r} is damaged. Start it again.")
        return meta

    @staticmethod
    def _write_meta(upload_dir: Path, meta: dict[str, Any]) -> None:
        atomic_write_text(upload_dir / META_FILE, json.dumps(meta, indent=1), mode=_FILE_MODE)

    @staticmethod
    def _upload(upload_id: str, meta: dict[str, Any], received: int) -> Upload:
        return Upload(
            id=upload_id,
            filename=str(meta["filename"]),
            size=int(meta["size"]),
            sha256=meta.get("sha256"),
            owner=str(meta.get("owner", "")),
            created=float(meta["created"]),
            state=str(meta["state"]),
            received=received,
        )

    @contextlib.contextmanager
    def _locked_part(self, upload_id: str) -> Iterator[tuple[Path, BinaryIO, dict[str, Any]]]:
        """Opens ``data.part`` with an exclusive flock and yields it with fresh metadata.

        The metadata is read after the lock is taken, so a writer never acts on a
        state that another writer changed meanwhile.
        """
        upload_dir = self._dir(upload_id)
        self._read_meta(upload_dir)  # a clear "not found" before touching the part file
        try:
            fh = (upload_dir / PART_FILE).open("r+b")
        except FileNotFoundError:
            raise UploadNotFound(
                f"There is no upload {upload_id!r} (it was cancelled or expired). "
                "Start the upload again."
            ) from None
        with fh:
            self._lock(fh, upload_id)
            try:
                yield upload_dir, fh, self._read_meta(upload_dir)
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def _lock(self, fh: BinaryIO, upload_id: str) -> None:
        """Takes an exclusive flock on ``fh``, waiting up to ``lock_timeout_s``."""
        deadline = time.monotonic() + self.lock_timeout_s
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
            if time.monotonic() >= deadline:
                raise UploadBusy(
                    f"Another request is still writing to upload {upload_id!r}. "
                    "Wait for it to finish, then ask for the upload's status and resume."
                )
            time.sleep(0.05)

    # Public API --------------------------------------------------------------------

    def create(
        self, filename: str, size: int, sha256: str | None = None, owner: str = ""
    ) -> Upload:
        """Starts a new upload and returns it (``received`` is 0).

        Args:
            filename: The file's own name, ending in ``.onnx`` or ``.zip``.
            size: The total size the client will send, in bytes.
            sha256: The file's sha256 as 64 hex characters, checked by :meth:`finish`.
            owner: Who starts it (stored as given; the caller decides access).

        Raises:
            InvalidUpload: Bad file name, size or sha256.
            UploadTooLarge: ``size`` is over the limit.
        """
        filename = check_upload_filename(filename)
        if isinstance(size, bool) or not isinstance(size, int):
            raise InvalidUpload(f"The file size must be a whole number of bytes, not {size!r}.")
        if size <= 0:
            raise InvalidUpload(
                f"The file {filename!r} is an empty file (size {size}). Choose the model file."
            )
        if size > self.max_bytes:
            raise UploadTooLarge(
                f"The file {filename!r} is {human_bytes(size)}; the limit is "
                f"{human_bytes(self.max_bytes)}. Upload a smaller model, or ask an "
                "administrator to raise the limit."
            )
        if sha256 is not None:
            if not isinstance(sha256, str) or not _SHA256_PATTERN.fullmatch(sha256):
                raise InvalidUpload(
                    f"The sha256 {_shown(sha256)} is not 64 hex characters. "
                    "Send the output of 'sha256sum', or no sha256 at all."
                )
            sha256 = sha256.lower()
        if not isinstance(owner, str) or len(owner) > MAX_OWNER_LENGTH or not owner.isprintable():
            raise InvalidUpload(
                "The upload owner must be printable text of 150 characters or less."
            )
        self.uploads_dir.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
        self._check_quota(owner, size)
        self._check_free_space(size, f"the file {filename!r}")
        while True:
            upload_id = secrets.token_hex(16)
            upload_dir = self.uploads_dir / upload_id
            try:
                upload_dir.mkdir(mode=_DIR_MODE)
                break
            except FileExistsError:  # pragma: no cover - 128 random bits
                continue
        meta = {
            "filename": filename,
            "size": size,
            "sha256": sha256,
            "owner": owner,
            "created": time.time(),
            "state": STATE_RECEIVING,
        }
        try:
            fd = os.open(upload_dir / PART_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _FILE_MODE)
            os.close(fd)
            self._write_meta(upload_dir, meta)
            fsync_dir(self.uploads_dir)
        except BaseException:
            shutil.rmtree(upload_dir, ignore_errors=True)
            raise
        return self._upload(upload_id, meta, 0)

    def status(self, upload_id: str) -> Upload:
        """Returns the upload's declared facts and how many bytes arrived (the resume point).

        Raises:
            UploadNotFound: Unknown or malformed id.
        """
        upload_dir = self._dir(upload_id)
        meta = self._read_meta(upload_dir)
        try:
            received = (upload_dir / PART_FILE).stat().st_size
        except FileNotFoundError:
            raise UploadNotFound(
                f"There is no upload {upload_id!r} (it was cancelled or expired). "
                "Start the upload again."
            ) from None
        return self._upload(upload_id, meta, received)

    def write_chunk(self, upload_id: str, offset: int, stream: BinaryIO, length: int) -> int:
        """Appends ``length`` bytes read from ``stream`` at ``offset`` and returns the new total.

        The bytes are copied in :data:`PIECE_SIZE` pieces (constant memory) and
        flushed to disk (``fsync``) before returning; on Linux, writeback of each
        :data:`WRITEBACK_BYTES` starts as soon as they are written, so the final
        ``fsync`` is short. If the stream ends early or
        fails, the bytes that did arrive are kept and flushed, so the client can
        resume from :meth:`status`; with a short stream the returned total is less
        than ``offset + length``.

        Args:
            upload_id: The upload's id.
            offset: Where this chunk starts; must equal the bytes received so far.
            stream: Any object with ``read(n)`` (a request body, a file).
            length: How many bytes to take from ``stream``.

        Returns:
            The number of bytes received after this chunk.

        Raises:
            UploadNotFound: Unknown or malformed id.
            UploadOffsetMismatch: ``offset`` is not the current end; ``.expected`` is.
            UploadTooLarge: The chunk would go past the declared size.
            InvalidUpload: Negative values, or the upload is already complete.
            UploadBusy: Another writer held the upload for longer than the lock timeout.
        """
        _check_chunk_numbers(offset, length)
        with self._locked_part(upload_id) as (_dir, fh, meta):
            received = os.fstat(fh.fileno()).st_size
            _check_chunk(upload_id, meta, received, offset, length)
            # The disk may have filled since the upload started: refuse before a byte lands.
            self._check_free_space(length, "this chunk")
            fh.seek(offset)
            remaining = length
            unsynced = offset  # the first byte not yet handed to the kernel's writeback
            try:
                while remaining:
                    piece = stream.read(min(PIECE_SIZE, remaining))
                    if not piece:
                        break
                    if len(piece) > remaining:  # a stream that ignores its argument
                        piece = piece[:remaining]
                    fh.write(piece)
                    remaining -= len(piece)
                    end = offset + length - remaining
                    if end - unsynced >= WRITEBACK_BYTES and _start_writeback is not None:
                        fh.flush()
                        _start_writeback(fh.fileno(), unsynced, end - unsynced)
                        unsynced = end
            finally:
                fh.flush()
                os.fsync(fh.fileno())
            return offset + length - remaining

    def check_chunk(self, upload_id: str, offset: int, length: int) -> Upload:
        """Refuses a chunk that :meth:`write_chunk` would refuse, before its bytes are read.

        The same checks and errors as :meth:`write_chunk`, on the upload's state now and
        without the lock: a server that streams the request body can answer a wrong offset
        or an oversized chunk at once, instead of receiving megabytes it will not keep.
        :meth:`write_chunk` checks again under the lock, so a race with another writer is
        still caught.

        Returns:
            The upload (as :meth:`status`).

        Raises:
            UploadNotFound, UploadOffsetMismatch, UploadTooLarge, InvalidUpload: As
            :meth:`write_chunk`.
        """
        _check_chunk_numbers(offset, length)
        upload = self.status(upload_id)
        meta = {"state": upload.state, "size": upload.size}
        _check_chunk(upload_id, meta, upload.received, offset, length)
        return upload

    def finish(self, upload_id: str) -> FinishedUpload:
        """Verifies a fully received upload and marks it complete.

        The sha256 is computed by reading the file in pieces. If the client
        declared one and it differs, the upload is deleted. Calling it again on
        a complete upload returns the same result.

        Raises:
            UploadNotFound: Unknown or malformed id.
            InvalidUpload: Not all bytes have arrived yet (the message says how many).
            UploadCorrupt: The sha256 differs from the declared one; nothing is kept.
        """
        with self._locked_part(upload_id) as (upload_dir, fh, meta):
            part = upload_dir / PART_FILE
            size = int(meta["size"])
            received = os.fstat(fh.fileno()).st_size
            if received != size:
                raise InvalidUpload(
                    f"The upload has {received} of {size} bytes. "
                    f"Send the rest from byte {received}, then finish it."
                )
            if meta.get("state") == STATE_COMPLETE and meta.get("received_sha256"):
                return FinishedUpload(part, str(meta["received_sha256"]), size, meta["filename"])
            fh.seek(0)
            digest = hashlib.sha256()
            while block := fh.read(PIECE_SIZE):
                digest.update(block)
            actual = digest.hexdigest()
            declared = meta.get("sha256")
            if declared and declared != actual:
                self._remove_dir(upload_dir)
                raise UploadCorrupt(
                    f"The file {meta['filename']!r} arrived damaged: its sha256 is {actual}, "
                    f"not the declared {declared}. Nothing was kept; upload it again."
                )
            meta.update(state=STATE_COMPLETE, received_sha256=actual, completed=time.time())
            self._write_meta(upload_dir, meta)
            return FinishedUpload(part, actual, size, str(meta["filename"]))

    def cancel(self, upload_id: str) -> None:
        """Deletes the upload and everything received for it.

        Raises:
            UploadNotFound: Unknown or malformed id.
        """
        upload_dir = self._dir(upload_id)
        if not upload_dir.is_dir():
            raise UploadNotFound(f"There is no upload {upload_id!r}; nothing to cancel.")
        self._remove_dir(upload_dir)

    def open_uploads(self, owner: str) -> tuple[int, int]:
        """How many uploads ``owner`` has open, and the bytes they declared in all."""
        count = declared = 0
        for upload_id in self.list_ids():
            try:
                meta = self._read_meta(self.uploads_dir / upload_id)
            except ModelStoreError:
                continue  # a half-created or removed upload: not the owner's to count
            if meta.get("owner") == owner:
                count += 1
                declared += int(meta.get("size") or 0)
        return count, declared

    def _check_quota(self, owner: str, size: int) -> None:
        if self.max_open_per_owner is None and self.max_open_bytes_per_owner is None:
            return
        count, declared = self.open_uploads(owner)
        if self.max_open_per_owner is not None and count >= self.max_open_per_owner:
            raise UploadQuotaExceeded(
                f"You have {count} uploads open; the limit is {self.max_open_per_owner}. "
                "Finish or cancel one first (abandoned uploads are removed after a while)."
            )
        limit = self.max_open_bytes_per_owner
        if limit is not None and declared + size > limit:
            raise UploadQuotaExceeded(
                f"Your open uploads would hold {human_bytes(declared + size)}; the limit is "
                f"{human_bytes(limit)}. Finish or cancel an upload first."
            )

    def _check_free_space(self, incoming: int, what: str) -> None:
        if self.min_free_bytes <= 0:
            return
        free = shutil.disk_usage(self.uploads_dir).free
        if free - incoming < self.min_free_bytes:
            raise InsufficientStorage(
                f"The store's disk has {human_bytes(free)} free; {what} needs "
                f"{human_bytes(incoming)} and {human_bytes(self.min_free_bytes)} must stay free. "
                "Ask an administrator to free space on the store's disk."
            )

    def list_ids(self) -> list[str]:
        """The ids of all uploads present, sorted (other entries in the directory are ignored)."""
        if not self.uploads_dir.is_dir():
            return []
        return sorted(
            p.name
            for p in self.uploads_dir.iterdir()
            if _ID_PATTERN.fullmatch(p.name) and p.is_dir() and not p.is_symlink()
        )

    def cleanup_stale(self, older_than_s: float) -> list[str]:
        """Removes uploads untouched for at least ``older_than_s`` seconds.

        "Touched" is the newest modification time of the upload's directory,
        metadata and data, so an upload that is still receiving chunks is kept.
        An upload that a writer holds locked right now is skipped too. Complete
        uploads that nobody stored are removed the same way. Entries in
        ``uploads/`` that are not upload directories are left alone.

        Returns:
            The ids removed.
        """
        cutoff = time.time() - older_than_s
        removed: list[str] = []
        for upload_id in self.list_ids():
            upload_dir = self.uploads_dir / upload_id
            try:
                newest = max(
                    p.stat().st_mtime
                    for p in (upload_dir, upload_dir / META_FILE, upload_dir / PART_FILE)
                    if p.exists()
                )
            except (OSError, ValueError):
                continue
            if newest > cutoff or self._in_use(upload_dir):
                continue
            self._remove_dir(upload_dir)
            removed.append(upload_id)
        return removed

    @staticmethod
    def _in_use(upload_dir: Path) -> bool:
        """True if a writer holds the upload's lock at this moment."""
        try:
            with (upload_dir / PART_FILE).open("rb") as fh:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    return True
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        except FileNotFoundError:
            return False
        return False

    def _remove_dir(self, upload_dir: Path) -> None:
        """Removes an upload directory: first renamed away (one step), then deleted."""
        doomed = self.uploads_dir / f".removing-{upload_dir.name}-{secrets.token_hex(4)}"
        try:
            upload_dir.rename(doomed)
        except FileNotFoundError:
            return
        shutil.rmtree(doomed, ignore_errors=True)


def _check_chunk_numbers(offset: object, length: object) -> None:
    for what, value in (("offset", offset), ("length", length)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidUpload(f"The chunk {what} must be a whole number >= 0, not {value!r}.")


def _check_chunk(
    upload_id: str, meta: dict[str, Any], received: int, offset: int, length: int
) -> None:
    """The chunk must continue a receiving upload at its end and stay within its size."""
    if meta.get("state") != STATE_RECEIVING:
        raise InvalidUpload(f"The upload {upload_id!r} is already complete.")
    if offset != received:
        raise UploadOffsetMismatch(
            f"The chunk starts at byte {offset}, but {received} bytes have been "
            f"received. Resume from byte {received}.",
            expected=received,
        )
    size = int(meta["size"])
    if offset + length > size:
        raise UploadTooLarge(
            f"The chunk would end at byte {offset + length}, past the declared size "
            f"of {size} bytes. Send at most {size - offset} more bytes."
        )


# Bundles -------------------------------------------------------------------------


def _member_parts(name: str) -> tuple[str, ...]:
    """Splits a zip member name into safe relative parts, or refuses it.

    Raises:
        InvalidUpload: Absolute names, drive letters, backslashes, ``..``,
            empty or ``.`` parts, and control characters.
    """
    shown = _shown(name)
    if not name or "\\" in name or any(not ch.isprintable() for ch in name):
        raise InvalidUpload(
            f"The bundle member {shown} has a backslash, control characters or no name. "
            f"{_BUNDLE_RULES}"
        )
    if name.startswith("/") or _DRIVE_PATTERN.match(name):
        raise InvalidUpload(f"The bundle member {shown} is an absolute path. {_BUNDLE_RULES}")
    parts = tuple(name.removesuffix("/").split("/"))
    if any(part == ".." for part in parts):
        raise InvalidUpload(f"The bundle member {shown} climbs out with '..'. {_BUNDLE_RULES}")
    if any(part in ("", ".") for part in parts):
        raise InvalidUpload(f"The bundle member {shown} has an empty or '.' part. {_BUNDLE_RULES}")
    return parts


def _check_member_type(info: zipfile.ZipInfo) -> None:
    """Refuses symlinks, devices and the like (Unix mode in the high 16 bits of external_attr)."""
    mode = info.external_attr >> 16
    kind = stat.S_IFMT(mode)
    if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
        what = "a symbolic link" if kind == stat.S_IFLNK else "not a regular file"
        raise InvalidUpload(
            f"The bundle member {_shown(info.filename)} is {what}. Put the real files in the "
            f"zip. {_BUNDLE_RULES}"
        )
    if info.flag_bits & 0x1:
        raise InvalidUpload(
            f"The bundle member {_shown(info.filename)} is encrypted. Zip it without a password."
        )


def _plan_bundle(
    members: list[zipfile.ZipInfo], max_total_bytes: int, max_files: int
) -> list[tuple[zipfile.ZipInfo, tuple[str, ...]]]:
    """Checks every member and returns the files to extract with their relative parts."""
    files: list[tuple[zipfile.ZipInfo, tuple[str, ...]]] = []
    seen: set[tuple[str, ...]] = set()
    total = 0
    for info in members:
        parts = _member_parts(info.filename)
        _check_member_type(info)
        if parts in seen:
            raise InvalidUpload(f"The bundle holds {_shown(info.filename)} twice. {_BUNDLE_RULES}")
        seen.add(parts)
        if len(seen) > max_files:  # folders count too: each one costs an entry to parse
            raise InvalidUpload(
                f"The bundle holds more than {max_files} files and folders. {_BUNDLE_RULES}"
            )
        if info.is_dir():
            continue
        files.append((info, parts))
        total += info.file_size
        if total > max_total_bytes:
            raise UploadTooLarge(
                f"The bundle unpacks to more than {human_bytes(max_total_bytes)}, the limit. "
                "Upload a smaller model."
            )
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > RATIO_CHECK_MIN_BYTES and ratio > MAX_COMPRESSION_RATIO:
            raise InvalidUpload(
                f"The bundle member {_shown(info.filename)} expands from "
                f"{human_bytes(info.compress_size)} to {human_bytes(info.file_size)}, which "
                "looks like a zip bomb. Zip the real model files."
            )
    onnx_files = [parts for _info, parts in files if parts[-1].lower().endswith(".onnx")]
    if len(onnx_files) != 1:
        found = "no .onnx file" if not onnx_files else f"{len(onnx_files)} .onnx files"
        raise InvalidUpload(f"The bundle holds {found}. {_BUNDLE_RULES}")
    prefixes = {parts[:i] for _info, parts in files for i in range(1, len(parts))}
    clash = prefixes & {parts for _info, parts in files}
    if clash:
        shown = "/".join(sorted(clash)[0])
        raise InvalidUpload(f"The bundle uses {shown!r} as a file and a folder. {_BUNDLE_RULES}")
    return files


def _find_end_record(fh: BinaryIO, file_size: int) -> int:
    """The offset of the End Of Central Directory record, found the way ``zipfile`` finds it.

    First at the very end (an archive without a comment), else the last signature within the
    longest possible comment: the same search, so that both read the same record.

    Raises:
        InvalidUpload: There is no such record, so the file is not a zip.
    """
    at = file_size - _EOCD.size
    if at >= 0:
        fh.seek(at)
        record = fh.read(_EOCD.size)
        if record.startswith(_EOCD_SIGNATURE) and record.endswith(b"\0\0"):
            return at
    start = max(file_size - _MAX_ZIP_COMMENT - _EOCD.size, 0)
    fh.seek(start)
    tail = fh.read()
    found = tail.rfind(_EOCD_SIGNATURE)
    if found < 0 or len(tail) - found < _EOCD.size:
        raise InvalidUpload(f"The bundle is not a valid .zip file. {_BUNDLE_RULES}")
    return start + found


def _zip64_declared(fh: BinaryIO, end_at: int) -> tuple[int, int] | None:
    """(entries, central directory bytes) from the ZIP64 end record; None if there is none.

    ``zipfile`` reads that record right before its locator; the locator also names its offset.
    Both places are read and the larger numbers kept, so that no zip reader can be shown a
    larger directory than the one checked here.
    """
    if end_at < _ZIP64_LOCATOR.size:
        return None
    fh.seek(end_at - _ZIP64_LOCATOR.size)
    signature, _disk, record_at, _disks = _ZIP64_LOCATOR.unpack(fh.read(_ZIP64_LOCATOR.size))
    if signature != _ZIP64_LOCATOR_SIGNATURE:
        return None
    declared: list[tuple[int, int]] = []
    for at in {end_at - _ZIP64_LOCATOR.size - _ZIP64_EOCD.size, record_at}:
        if not 0 <= at <= end_at:  # the record comes before the locator, never after the end
            continue
        fh.seek(at)
        record = fh.read(_ZIP64_EOCD.size)
        if len(record) == _ZIP64_EOCD.size and record.startswith(_ZIP64_EOCD_SIGNATURE):
            fields = _ZIP64_EOCD.unpack(record)
            declared.append((max(fields[6], fields[7]), fields[8]))
    if not declared:
        return None
    return max(entries for entries, _size in declared), max(size for _entries, size in declared)


def _declared_directory(zip_path: Path) -> tuple[int, int]:
    """(entries, bytes) that a zip's end records declare for its central directory.

    Reads at most the last 64 KiB of the file (the end record and a possible comment).
    """
    try:
        with zip_path.open("rb") as fh:
            end_at = _find_end_record(fh, fh.seek(0, os.SEEK_END))
            fh.seek(end_at)
            fields = _EOCD.unpack(fh.read(_EOCD.size))
            zip64 = _zip64_declared(fh, end_at)
    except OSError:
        raise InvalidUpload(f"The bundle is not a valid .zip file. {_BUNDLE_RULES}") from None
    # As in zipfile, a ZIP64 record replaces the 16/32-bit fields (which then hold 0xFFFF...).
    return zip64 if zip64 is not None else (max(fields[3], fields[4]), fields[5])


def _check_declared_directory(zip_path: Path, max_files: int) -> None:
    """Refuses a zip whose end records declare too many entries or too large a directory.

    This runs before ``zipfile`` reads the central directory, which it loads whole into
    memory and turns into one object per entry: a huge one costs memory and time. zipfile
    walks the directory by its size, not by the declared count, so both are checked; the
    members are counted again once parsed, in case the count was a lie.

    Raises:
        InvalidUpload: Not a zip, more than ``max_files`` entries (files and folders), or
            more than :data:`CENTRAL_DIRECTORY_BYTES_PER_ENTRY` bytes per allowed entry.
    """
    entries, size = _declared_directory(zip_path)
    if entries > max_files:
        raise InvalidUpload(
            f"The bundle declares {entries} entries: more than {max_files} files and folders, "
            f"the limit. {_BUNDLE_RULES}"
        )
    limit = max_files * CENTRAL_DIRECTORY_BYTES_PER_ENTRY
    if size > limit:
        raise InvalidUpload(
            f"The bundle's central directory is {human_bytes(size)}, more than the "
            f"{human_bytes(limit)} that {max_files} files and folders need. {_BUNDLE_RULES}"
        )


def _extract_member(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, budget: int
) -> int:
    """Streams one member to a new file ``target``; returns the bytes written.

    Never writes more than the member declares or than ``budget`` allows
    (zipfile also stops at the declared size and checks the CRC).
    """
    target.parent.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
    written = 0
    limit = min(info.file_size, budget)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, _FILE_MODE)
    with archive.open(info) as src, os.fdopen(fd, "wb") as dst:
        while block := src.read(PIECE_SIZE):
            written += len(block)
            if written > limit:
                raise UploadTooLarge(
                    f"The bundle member {_shown(info.filename)} is larger than it declares "
                    "or than the limit. Zip the real model files."
                )
            dst.write(block)
        dst.flush()
        os.fsync(dst.fileno())
    return written


def unpack_bundle(
    zip_path: Path, dest_dir: Path, max_total_bytes: int, max_files: int = 64
) -> Path:
    """Extracts a ``.zip`` bundle (one ``.onnx`` plus its external data) into ``dest_dir``.

    Every member is checked before anything is written: names must be relative
    without ``..``, backslashes or drive letters; no symlinks or other special
    files; no duplicates; exactly one ``.onnx``; at most ``max_files`` entries
    (files and folders), and a central directory no larger than they need, both
    checked from the end records before ``zipfile`` parses the directory; at most
    ``max_total_bytes`` uncompressed, and no member with a zip-bomb compression
    ratio. Members are then streamed out one by one (never ``extractall``), each
    path confirmed inside ``dest_dir``. Folders inside the zip are kept. On any
    error ``dest_dir`` is left empty.

    Next, run :func:`check_bundle_model` on the returned path: it checks that
    the external data the model references is inside the bundle.

    Args:
        zip_path: The uploaded zip file.
        dest_dir: An empty or not yet existing directory to extract into.
        max_total_bytes: Limit on the sum of the members' uncompressed sizes.
        max_files: Limit on the number of entries, files and folders together.

    Returns:
        The path of the extracted ``.onnx`` file.

    Raises:
        InvalidUpload: Not a zip, or a layout or member that is not allowed.
        UploadTooLarge: The content is larger than ``max_total_bytes``.
    """
    dest = Path(dest_dir)
    dest.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise ValueError(f"{dest} must be empty")
    _check_declared_directory(Path(zip_path), max_files)
    try:
        archive = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        raise InvalidUpload(f"The bundle is not a valid .zip file. {_BUNDLE_RULES}") from None
    try:
        with archive:
            plan = _plan_bundle(archive.infolist(), max_total_bytes, max_files)
            budget = max_total_bytes
            onnx_path: Path | None = None
            for info, parts in plan:
                target = safe_join(dest, *parts)
                budget -= _extract_member(archive, info, target, budget)
                if parts[-1].lower().endswith(".onnx"):
                    onnx_path = target
    except (zipfile.BadZipFile, EOFError, NotImplementedError, RuntimeError) as exc:
        _empty_dir(dest)
        raise InvalidUpload(f"The bundle cannot be unpacked ({exc}). {_BUNDLE_RULES}") from None
    except UnsafePath as exc:
        _empty_dir(dest)
        raise InvalidUpload(f"{exc.message} {_BUNDLE_RULES}") from None
    except BaseException:
        _empty_dir(dest)
        raise
    assert onnx_path is not None  # _plan_bundle guarantees exactly one
    return onnx_path


def _empty_dir(directory: Path) -> None:
    """Removes everything inside ``directory`` (not the directory itself)."""
    for entry in directory.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


@dataclass
class BundleCheck:
    """What :func:`check_bundle_model` found.

    Attributes:
        info: The model's description from ``inspect_onnx``.
        unused_files: Bundle files (relative to the bundle root) that the model
            does not reference; harmless, but they will not be stored with it.
        warnings: Plain-words notes for the user, one per unused file.
    """

    info: OnnxInfo
    unused_files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def check_bundle_model(onnx_path: Path, bundle_dir: Path | None = None) -> BundleCheck:
    """Inspects an unpacked bundle's model and lists files in the bundle it does not use.

    ``inspect_onnx`` does the safety work: every external data location must be a
    file inside the model's folder and long enough for the bytes it claims.

    Args:
        onnx_path: The ``.onnx`` returned by :func:`unpack_bundle`.
        bundle_dir: The bundle's root (``dest_dir``); defaults to the model's folder.

    Returns:
        The inspection and the unused files, with warnings to show.

    Raises:
        InvalidModel: The .onnx is not a readable model.
        UnsafeExternalData: External data points outside the model's folder.
        MissingExternalData: External data the model needs is not in the bundle.
    """
    from model_store.onnx_info import inspect_onnx  # onnx is heavy; only load it when needed

    onnx_path = Path(onnx_path)
    root = Path(bundle_dir) if bundle_dir is not None else onnx_path.parent
    info = inspect_onnx(onnx_path)
    used = {onnx_path.resolve()}
    used.update((onnx_path.parent / location).resolve() for location in info.external_data_files)
    unused = sorted(
        path.relative_to(root).as_posix()
        for path in root.rglob("*")
        if path.is_file() and path.resolve() not in used
    )
    warnings = [
        f"The bundle file {name!r} is not used by the model and will not be stored."
        for name in unused
    ]
    return BundleCheck(info=info, unused_files=unused, warnings=warnings)
