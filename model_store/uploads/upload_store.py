"""The resumable upload store: create, receive chunks, finish, cancel, clean up.

:class:`UploadStore` keeps one directory per upload under the store's ``uploads/``, copies
each chunk from the request stream in fixed pieces (memory does not grow with the file),
accepts a chunk only at the current end of the data so that retries are safe, serialises
writers of one upload with ``fcntl.flock`` on its ``data.part``, and enforces the size,
per-owner quota and free-space limits. The checks on a chunk and the copying of its bytes
are in :mod:`.chunks`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from model_store.errors import ModelStoreError
from model_store.file_io import atomic_write_text, fsync_dir
from model_store.text import Said, say
from model_store.uploads.chunks import (
    _check_chunk,
    _check_chunk_numbers,
    _write_buffered,
    _write_direct,
)
from model_store.uploads.direct_io import DIRECT_MIN_BYTES, open_direct, sha256_direct
from model_store.uploads.errors import (
    InsufficientStorage,
    InvalidUpload,
    UploadBusy,
    UploadCorrupt,
    UploadNotFound,
    UploadQuotaExceeded,
    UploadTooLarge,
    human_bytes,
    quoted,
)
from model_store.uploads.records import (
    DIR_MODE,
    FILE_MODE,
    ID_PATTERN,
    MAX_OWNER_LENGTH,
    META_FILE,
    PART_FILE,
    PIECE_SIZE,
    STATE_COMPLETE,
    STATE_RECEIVING,
    FinishedUpload,
    Upload,
    check_upload_filename,
    check_upload_id,
)

#: How long a writer waits for another writer of the same upload before giving up.
DEFAULT_LOCK_TIMEOUT_S = 30.0
_SHA256_PATTERN = re.compile(r"[0-9a-fA-F]{64}")


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
        direct_io: bool = True,
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
        #: Chunks written with ``O_DIRECT`` where the file system allows (:mod:`.direct_io`).
        self.direct_io = direct_io

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
                say(
                    "There is no upload %(upload)s (it finished, was cancelled or "
                    "expired). Start the upload again.",
                    upload=repr(upload_dir.name),
                )
            ) from None
        if not isinstance(meta, dict):
            raise UploadNotFound(
                say(
                    "The upload %(upload)s is damaged. Start it again.",
                    upload=repr(upload_dir.name),
                )
            )
        return meta

    @staticmethod
    def _write_meta(upload_dir: Path, meta: dict[str, Any]) -> None:
        atomic_write_text(upload_dir / META_FILE, json.dumps(meta, indent=1), mode=FILE_MODE)

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
                say(
                    "There is no upload %(upload)s (it was cancelled or expired). "
                    "Start the upload again.",
                    upload=repr(upload_id),
                )
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
                    say(
                        "Another request is still writing to upload %(upload)s. "
                        "Wait for it to finish, then ask for the upload's status and resume.",
                        upload=repr(upload_id),
                    )
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
            raise InvalidUpload(
                say(
                    "The file size must be a whole number of bytes, not %(size)s.",
                    size=repr(size),
                )
            )
        if size <= 0:
            raise InvalidUpload(
                say(
                    "The file %(name)s is an empty file (size %(size)s). Choose the model file.",
                    name=repr(filename),
                    size=size,
                )
            )
        if size > self.max_bytes:
            raise UploadTooLarge(
                say(
                    "The file %(name)s is %(size)s; the limit is %(limit)s. Upload a smaller "
                    "model, or ask an administrator to raise the limit.",
                    name=repr(filename),
                    size=human_bytes(size),
                    limit=human_bytes(self.max_bytes),
                )
            )
        if sha256 is not None:
            if not isinstance(sha256, str) or not _SHA256_PATTERN.fullmatch(sha256):
                raise InvalidUpload(
                    say(
                        "The sha256 %(sha256)s is not 64 hex characters. "
                        "Send the output of 'sha256sum', or no sha256 at all.",
                        sha256=quoted(sha256),
                    )
                )
            sha256 = sha256.lower()
        if not isinstance(owner, str) or len(owner) > MAX_OWNER_LENGTH or not owner.isprintable():
            raise InvalidUpload(
                say("The upload owner must be printable text of 150 characters or less.")
            )
        self.uploads_dir.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        self._check_quota(owner, size)
        self._check_free_space(size, say("the file %(name)s", name=repr(filename)))
        while True:
            upload_id = secrets.token_hex(16)
            upload_dir = self.uploads_dir / upload_id
            try:
                upload_dir.mkdir(mode=DIR_MODE)
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
            fd = os.open(upload_dir / PART_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
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
                say(
                    "There is no upload %(upload)s (it was cancelled or expired). "
                    "Start the upload again.",
                    upload=repr(upload_id),
                )
            ) from None
        return self._upload(upload_id, meta, received)

    def write_chunk(self, upload_id: str, offset: int, stream: BinaryIO, length: int) -> int:
        """Appends ``length`` bytes read from ``stream`` at ``offset`` and returns the new total.

        The bytes are copied in :data:`PIECE_SIZE` pieces (constant memory) and
        flushed to disk (``fsync``) before returning. Where the file system allows (Linux),
        chunks of :data:`~.direct_io.DIRECT_MIN_BYTES` or more are written with ``O_DIRECT``
        from a reused buffer, without a copy into the page cache (:mod:`.direct_io`), and a
        stream with ``wait_readable(timeout)`` (``BodyPipe``) has what is buffered written
        whenever bytes stop coming for :data:`~.direct_io.IDLE_FLUSH_S`. Otherwise writeback of
        each :data:`~.chunks.WRITEBACK_BYTES` starts as soon as they are written, so the final
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
        with self._locked_part(upload_id) as (upload_dir, fh, meta):
            received = os.fstat(fh.fileno()).st_size
            _check_chunk(upload_id, meta, received, offset, length)
            # The disk may have filled since the upload started: refuse before a byte lands.
            self._check_free_space(length, say("this chunk"))
            direct_fd = None
            if self.direct_io and length >= DIRECT_MIN_BYTES:
                direct_fd = open_direct(upload_dir / PART_FILE)
            if direct_fd is not None:
                return _write_direct(fh, direct_fd, offset, stream, length)
            return _write_buffered(fh, offset, stream, length)

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
                    say(
                        "The upload has %(received)s of %(size)s bytes. "
                        "Send the rest from byte %(received)s, then finish it.",
                        received=received,
                        size=size,
                    )
                )
            if meta.get("state") == STATE_COMPLETE and meta.get("received_sha256"):
                return FinishedUpload(part, str(meta["received_sha256"]), size, meta["filename"])
            actual = sha256_direct(part) if self.direct_io else None
            if actual is None:
                fh.seek(0)
                digest = hashlib.sha256()
                while block := fh.read(PIECE_SIZE):
                    digest.update(block)
                actual = digest.hexdigest()
            declared = meta.get("sha256")
            if declared and declared != actual:
                self._remove_dir(upload_dir)
                raise UploadCorrupt(
                    say(
                        "The file %(name)s arrived damaged: its sha256 is %(actual)s, "
                        "not the declared %(declared)s. Nothing was kept; upload it again.",
                        name=repr(meta["filename"]),
                        actual=actual,
                        declared=declared,
                    )
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
            raise UploadNotFound(
                say("There is no upload %(upload)s; nothing to cancel.", upload=repr(upload_id))
            )
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
                say(
                    "You have %(count)s uploads open; the limit is %(limit)s. Finish or cancel "
                    "one first (abandoned uploads are removed after a while).",
                    count=count,
                    limit=self.max_open_per_owner,
                )
            )
        limit = self.max_open_bytes_per_owner
        if limit is not None and declared + size > limit:
            raise UploadQuotaExceeded(
                say(
                    "Your open uploads would hold %(total)s; the limit is %(limit)s. "
                    "Finish or cancel an upload first.",
                    total=human_bytes(declared + size),
                    limit=human_bytes(limit),
                )
            )

    def _check_free_space(self, incoming: int, what: Said) -> None:
        if self.min_free_bytes <= 0:
            return
        free = shutil.disk_usage(self.uploads_dir).free
        if free - incoming < self.min_free_bytes:
            raise InsufficientStorage(
                say(
                    "The store's disk has %(free)s free; %(what)s needs %(incoming)s and "
                    "%(floor)s must stay free. Ask an administrator to free space on the "
                    "store's disk.",
                    free=human_bytes(free),
                    what=what,
                    incoming=human_bytes(incoming),
                    floor=human_bytes(self.min_free_bytes),
                )
            )

    def list_ids(self) -> list[str]:
        """The ids of all uploads present, sorted (other entries in the directory are ignored)."""
        if not self.uploads_dir.is_dir():
            return []
        return sorted(
            p.name
            for p in self.uploads_dir.iterdir()
            if ID_PATTERN.fullmatch(p.name) and p.is_dir() and not p.is_symlink()
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
