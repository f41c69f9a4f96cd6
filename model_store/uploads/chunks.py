"""Receiving one chunk of an upload: the checks that it may be written, and copying its bytes.

The bytes are copied either with ``O_DIRECT`` (:mod:`.direct_io`) or through the page cache
with early writeback (Linux ``sync_file_range``). Apart from :mod:`.upload_store` because
these are the byte-moving and arithmetic parts of :meth:`.UploadStore.write_chunk`, with no
upload directory, lock or metadata of their own.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from typing import Any, BinaryIO

from model_store.text import say
from model_store.uploads.direct_io import IDLE_FLUSH_S, ChunkWriter
from model_store.uploads.errors import InvalidUpload, UploadOffsetMismatch, UploadTooLarge
from model_store.uploads.records import PIECE_SIZE, STATE_RECEIVING

#: After this many bytes of a chunk, :meth:`.UploadStore.write_chunk` asks the kernel to start
#: writing them to disk (Linux ``sync_file_range``), so that the ``fsync`` ending the chunk
#: waits for the last piece only, not for all of it: the disk works while the network does.
WRITEBACK_BYTES = 1024 * 1024
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


def _write_buffered(fh: BinaryIO, offset: int, stream: BinaryIO, length: int) -> int:
    """:meth:`.UploadStore.write_chunk`'s copy through the page cache: writeback of each
    :data:`WRITEBACK_BYTES` starts as soon as they are written, and whatever arrived is
    flushed (``fsync``) even when the stream ends early or fails."""
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


def _write_direct(fh: BinaryIO, direct_fd: int, offset: int, stream: BinaryIO, length: int) -> int:
    """:meth:`.UploadStore.write_chunk`'s copy with ``O_DIRECT`` (see :mod:`.direct_io`): no
    page-cache copy for the aligned bulk of the chunk; the same result, and the same ``fsync``."""
    try:
        writer = ChunkWriter(fh.fileno(), direct_fd, offset)
    except BaseException:
        os.close(direct_fd)
        raise
    remaining = length
    # A BodyPipe says whether bytes arrive soon: if not, what is buffered lands first.
    wait_readable = getattr(stream, "wait_readable", None)
    try:
        try:
            while remaining:
                if (
                    wait_readable is not None
                    and writer.buffered
                    and not wait_readable(IDLE_FLUSH_S)
                ):
                    writer.flush()
                piece = stream.read(min(PIECE_SIZE, remaining))
                if not piece:
                    break
                if len(piece) > remaining:  # a stream that ignores its argument
                    piece = piece[:remaining]
                writer.write(piece)
                remaining -= len(piece)
        finally:
            # Also after a failed read: the bytes that arrived are kept and flushed.
            try:
                writer.flush()
            finally:
                os.fsync(fh.fileno())
    finally:
        writer.close()
    return offset + length - remaining


def _check_chunk_numbers(offset: object, length: object) -> None:
    for what, value in (("offset", offset), ("length", length)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidUpload(
                say(
                    "The chunk %(field)s must be a whole number >= 0, not %(value)s.",
                    field=what,
                    value=repr(value),
                )
            )


def _check_chunk(
    upload_id: str, meta: dict[str, Any], received: int, offset: int, length: int
) -> None:
    """The chunk must continue a receiving upload at its end and stay within its size."""
    if meta.get("state") != STATE_RECEIVING:
        raise InvalidUpload(
            say("The upload %(upload)s is already complete.", upload=repr(upload_id))
        )
    if offset != received:
        raise UploadOffsetMismatch(
            say(
                "The chunk starts at byte %(offset)s, but %(received)s bytes have been "
                "received. Resume from byte %(received)s.",
                offset=offset,
                received=received,
            ),
            expected=received,
        )
    size = int(meta["size"])
    if offset + length > size:
        raise UploadTooLarge(
            say(
                "The chunk would end at byte %(end)s, past the declared size "
                "of %(size)s bytes. Send at most %(left)s more bytes.",
                end=offset + length,
                size=size,
                left=size - offset,
            )
        )
