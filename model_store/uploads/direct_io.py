"""Writing a chunk to ``data.part`` with ``O_DIRECT``: straight from memory to the disk.

Why: a buffered ``write()`` copies every byte into the page cache, and that copy is most of
what an upload costs the web process. On the development VM (a Firecracker guest), copying
1 GiB into newly allocated page-cache pages took 0.5 to 4 CPU seconds depending on the guest's
memory state (pages given back to the host fault in again on first touch), while ``O_DIRECT``
writes of 4 MiB from one reused buffer took 1 GiB to disk in 0.3-0.45 s with under 0.1 CPU s.
The chunk's ``fsync`` still follows, so an acknowledged chunk is as durable as before.

``O_DIRECT`` needs the buffer's address, the file offset and the length aligned to the
device's block size: :class:`ChunkWriter` gathers the body's pieces into a page-aligned buffer
(one of a few kept and reused, :data:`DIRECT_BUFFER_BYTES` each) and writes it whole; the
bytes before the first aligned offset (a chunk that starts mid-block) and the unaligned tail go
through the ordinary file descriptor. Where ``O_DIRECT`` is not available (not Linux, a file
system that refuses it), :func:`open_direct` returns None and the caller writes as before; a
direct write refused with ``EINVAL`` is redone through the ordinary descriptor and direct
writes stop for that chunk.
"""

from __future__ import annotations

import errno
import hashlib
import mmap
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

#: Alignment of offsets and lengths for direct writes: 4096 covers 512-byte and 4 KiB
#: logical blocks (an mmap buffer is page-aligned, which covers its address).
ALIGN = 4096
#: Size of one direct write and of each reused buffer. Large enough that the per-write cost
#: is small next to the transfer, small enough to keep memory flat (one buffer per chunk
#: being written).
DIRECT_BUFFER_BYTES = 4 << 20
#: A writer whose stream has had nothing new for this long hands what it holds to the kernel,
#: so that a client that stalls (or a process that is killed meanwhile) loses no more than the
#: last moments' bytes of an unfinished chunk, as with ordinary writes.
IDLE_FLUSH_S = 0.02
#: Chunks shorter than this are written the ordinary way (not worth a second descriptor).
DIRECT_MIN_BYTES = 1 << 20
#: Idle buffers kept for reuse: a new mapping costs a page fault per page on first touch,
#: which is what this module avoids.
IDLE_BUFFERS = 4

_O_DIRECT: int | None = getattr(os, "O_DIRECT", None)


def open_direct(path: Path) -> int | None:
    """A write-only ``O_DIRECT`` descriptor of ``path``, or None where that is not possible."""
    if _O_DIRECT is None:
        return None
    try:
        return os.open(path, os.O_WRONLY | _O_DIRECT)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
            return None  # e.g. a file system without direct I/O
        raise


class _Buffers:
    """Page-aligned buffers, reused: taken by a writer for one chunk, then given back."""

    def __init__(self) -> None:
        self._idle: list[tuple[mmap.mmap, memoryview]] = []
        self._lock = threading.Lock()

    def take(self) -> tuple[mmap.mmap, memoryview]:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        buffer = mmap.mmap(-1, DIRECT_BUFFER_BYTES)  # anonymous: page-aligned, zeroed
        return buffer, memoryview(buffer)

    def give(self, buffer: tuple[mmap.mmap, memoryview]) -> None:
        with self._lock:
            if len(self._idle) < IDLE_BUFFERS:
                self._idle.append(buffer)
                return
        view, mapping = buffer[1], buffer[0]
        view.release()
        mapping.close()


_buffers = _Buffers()


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    while data:
        written = os.pwrite(fd, data, offset)
        data = data[written:]
        offset += written


class ChunkWriter:
    """Writes a chunk's bytes from ``offset`` on: whole aligned buffers through ``direct_fd``,
    the rest through ``fd`` (the same file, opened without ``O_DIRECT``).

    :meth:`write` each piece as it arrives; :meth:`flush` at the end (also after a failure:
    what arrived is kept), then :meth:`close` once. ``landed`` is the offset up to which bytes
    have been handed to the kernel.
    """

    def __init__(self, fd: int, direct_fd: int, offset: int) -> None:
        self._fd = fd
        self._direct_fd: int | None = direct_fd
        self.landed = offset  # the file offset of the buffer's first byte
        self._filled = 0
        self._buffer: tuple[mmap.mmap, memoryview] | None = _buffers.take()

    def write(self, piece: bytes | memoryview) -> None:
        data = memoryview(piece).cast("B")
        head = -self.landed % ALIGN
        if head and not self._filled:
            # The chunk starts mid-block: up to the next aligned offset the ordinary way.
            head_part = data[:head]
            _pwrite_all(self._fd, head_part, self.landed)
            self.landed += len(head_part)
            data = data[len(head_part) :]
        assert self._buffer is not None
        view = self._buffer[1]
        while data:
            room = DIRECT_BUFFER_BYTES - self._filled
            taken = min(room, len(data))
            view[self._filled : self._filled + taken] = data[:taken]
            self._filled += taken
            data = data[taken:]
            if self._filled == DIRECT_BUFFER_BYTES:
                self._write_buffer(DIRECT_BUFFER_BYTES)

    @property
    def buffered(self) -> int:
        """Bytes received but not yet handed to the kernel."""
        return self._filled

    def flush(self) -> None:
        """Hands everything buffered to the kernel (the aligned part directly)."""
        if not self._filled:
            return
        aligned = self._filled - self._filled % ALIGN
        if aligned:
            self._write_buffer(aligned)
        if self._filled:
            assert self._buffer is not None
            _pwrite_all(self._fd, self._buffer[1][: self._filled], self.landed)
            self.landed += self._filled
            self._filled = 0

    def close(self) -> None:
        """Gives the buffer back and closes the direct descriptor."""
        if self._buffer is not None:
            _buffers.give(self._buffer)
            self._buffer = None
        if self._direct_fd is not None:
            os.close(self._direct_fd)
            self._direct_fd = None

    def _write_buffer(self, count: int) -> None:
        """Writes the buffer's first ``count`` bytes (a multiple of :data:`ALIGN`) at
        ``landed`` and moves what is left to its start."""
        assert self._buffer is not None
        view = self._buffer[1]
        done = 0
        if self._direct_fd is not None:
            try:
                done = os.pwrite(self._direct_fd, view[:count], self.landed)
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                # Alignment this device does not accept: the ordinary way from now on.
                os.close(self._direct_fd)
                self._direct_fd = None
        if done < count:  # refused, or a short direct write (e.g. the disk filled up)
            _pwrite_all(self._fd, view[done:count], self.landed + done)
        self.landed += count
        left = self._filled - count
        if left:
            view[:left] = view[count : self._filled]
        self._filled = left


def sha256_direct(path: Path) -> str | None:
    """The sha256 of ``path``, read with ``O_DIRECT``; None where that is not possible.

    Chunks written with ``O_DIRECT`` are not in the page cache, so hashing the finished upload
    with ordinary reads would fill the page cache with it first: the very cost the direct
    writes avoid (1.5-2.5 CPU s per GiB measured on the development VM, against 0.6 s this
    way, the hash itself). The next block is read in a second thread while one is hashed
    (``hashlib`` and ``preadv`` both release the GIL), so it takes about as long as hashing.
    """
    if _O_DIRECT is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | _O_DIRECT)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
            return None
        raise
    buffers = [_buffers.take(), _buffers.take()]
    reader = ThreadPoolExecutor(1, thread_name_prefix="upload-hash-read")
    try:
        size = os.fstat(fd).st_size
        digest = hashlib.sha256()
        offset = 0
        turn = 0
        pending = reader.submit(os.preadv, fd, [buffers[0][1]], 0)
        while True:
            try:
                count = pending.result()
            except OSError as exc:
                if exc.errno == errno.EINVAL:  # alignment the device does not accept
                    return None
                raise
            view = buffers[turn][1]
            offset += count
            more = count == DIRECT_BUFFER_BYTES and offset < size
            if more:  # read the next block while this one is hashed
                turn ^= 1
                pending = reader.submit(os.preadv, fd, [buffers[turn][1]], offset)
            digest.update(view[:count])
            if not more:
                if offset != size:  # a short read before the end: should not happen
                    return None  # (the caller reads the ordinary way)
                return digest.hexdigest()
    finally:
        reader.shutdown(wait=True)
        for buffer in buffers:
            _buffers.give(buffer)
        os.close(fd)
