"""Chunks written with ``O_DIRECT`` (``model_store.uploads.direct_io``), on the real file system.

What the direct path must keep from the ordinary one: every byte in place whatever the
chunk's offset and the stream's piece sizes, what arrived kept when the stream ends early or
fails, bytes landing while a client stalls (so a killed process keeps them, as before), and
the same sha256 at ``finish``. Skipped where the temp dir's file system refuses ``O_DIRECT``.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import random
import time
from pathlib import Path

import pytest

from model_store.uploads import direct_io, upload_store
from model_store.uploads.direct_io import ALIGN, DIRECT_BUFFER_BYTES, sha256_direct
from model_store.uploads.upload_store import UploadStore
from tests.fixtures.loops import run_in_own_loop

MiB = 1 << 20


@pytest.fixture
def store(tmp_path: Path) -> UploadStore:
    probe = tmp_path / "probe"
    probe.write_bytes(b"")
    fd = direct_io.open_direct(probe)
    if fd is None:
        pytest.skip("this file system does not take O_DIRECT")
    os.close(fd)
    return UploadStore(tmp_path / "uploads", max_bytes=256 * MiB)


@pytest.fixture
def direct_opens(monkeypatch) -> list[bool]:
    """Whether each chunk took the direct path (the real open, recorded)."""
    opened: list[bool] = []
    real = upload_store.open_direct

    def recording(path: Path) -> int | None:
        fd = real(path)
        opened.append(fd is not None)
        return fd

    monkeypatch.setattr(upload_store, "open_direct", recording)
    return opened


class Pieces:
    """A stream that returns at most ``sizes``-sized pieces in turn (as a socket would), and
    raises ``fail_with`` after ``fail_after`` bytes."""

    def __init__(
        self, data: bytes, sizes: list[int], fail_after: int | None = None, fail_with=None
    ) -> None:
        self.data, self.sizes, self.at, self.turn = data, sizes, 0, 0
        self.fail_after, self.fail_with = fail_after, fail_with

    def read(self, size: int = -1) -> bytes:
        if self.fail_after is not None and self.at >= self.fail_after:
            raise self.fail_with
        most = self.sizes[self.turn % len(self.sizes)]
        self.turn += 1
        if self.fail_after is not None:
            most = min(most, self.fail_after - self.at)
        piece = self.data[self.at : self.at + min(size, most)]
        self.at += len(piece)
        return piece


def part_bytes(store: UploadStore, upload_id: str) -> bytes:
    return (store.uploads_dir / upload_id / "data.part").read_bytes()


def test_uneven_chunks_and_pieces_arrive_intact(store, direct_opens) -> None:
    data = os.urandom(3 * DIRECT_BUFFER_BYTES + 12_345)
    upload = store.create("m.onnx", size=len(data))
    # Chunk edges mid-block and pieces of odd sizes: heads, buffers and tails all happen.
    edges = [0, MiB + 7, MiB + 7 + 5 * MiB + 4095, 9 * MiB, len(data)]
    rng = random.Random(5)
    sizes = [rng.randrange(1, 300_000) for _ in range(50)]
    for start, end in itertools.pairwise(edges):
        stream = Pieces(data[start:end], sizes)
        assert store.write_chunk(upload.id, start, stream, end - start) == end
    assert direct_opens == [True] * 4
    assert part_bytes(store, upload.id) == data
    assert store.finish(upload.id).sha256 == hashlib.sha256(data).hexdigest()


def test_a_short_stream_keeps_and_reports_what_arrived(store, direct_opens) -> None:
    data = os.urandom(8 * MiB)
    upload = store.create("m.onnx", size=len(data))
    arrived = 5 * MiB + 777  # the stream ends here, mid-block and mid-buffer
    stream = Pieces(data[:arrived], [256 * 1024])
    assert store.write_chunk(upload.id, 0, stream, len(data)) == arrived
    assert direct_opens == [True]
    assert store.status(upload.id).received == arrived
    assert part_bytes(store, upload.id) == data[:arrived]
    # The rest from there (an unaligned offset), then the whole file hashes right.
    assert store.write_chunk(upload.id, arrived, Pieces(data[arrived:], [MiB]), len(data) - arrived)
    assert store.finish(upload.id).sha256 == hashlib.sha256(data).hexdigest()


def test_a_failing_stream_keeps_what_arrived_before_the_error(store, direct_opens) -> None:
    data = os.urandom(6 * MiB)
    upload = store.create("m.onnx", size=len(data))
    broken = ConnectionResetError("the client went away")
    stream = Pieces(data, [100_000], fail_after=4 * MiB + 3, fail_with=broken)
    with pytest.raises(ConnectionResetError):
        store.write_chunk(upload.id, 0, stream, len(data))
    assert direct_opens == [True]
    assert store.status(upload.id).received == 4 * MiB + 3
    assert part_bytes(store, upload.id) == data[: 4 * MiB + 3]


def test_bytes_land_while_the_client_stalls(store, direct_opens) -> None:
    """A client that pauses mid-chunk: what it sent reaches the kernel meanwhile (a process
    killed now would keep it), not only once the buffer fills or the chunk ends."""
    from webapp.edge.stream_upload import BodyPipe

    data = os.urandom(8 * MiB)
    upload = store.create("m.onnx", size=len(data))
    part = store.uploads_dir / upload.id / "data.part"
    sent_first = 3 * MiB + 5  # less than one direct buffer, and not aligned

    async def scenario() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        pipe = BodyPipe(loop)
        writing = loop.run_in_executor(None, store.write_chunk, upload.id, 0, pipe, len(data))
        for at in range(0, sent_first, 256 * 1024):
            assert await pipe.put(data[at : min(at + 256 * 1024, sent_first)])
        deadline = time.monotonic() + 5
        while part.stat().st_size < sent_first and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        landed_while_stalled = part.stat().st_size
        assert not writing.done()
        assert await pipe.put(data[sent_first:])
        pipe.close()
        return landed_while_stalled, await writing

    with_stall, received = run_in_own_loop(scenario)
    assert with_stall == sent_first
    assert received == len(data)
    assert direct_opens == [True]
    assert part.read_bytes() == data


def test_small_chunks_are_written_the_ordinary_way(store, direct_opens) -> None:
    data = os.urandom(direct_io.DIRECT_MIN_BYTES - 1)
    upload = store.create("m.onnx", size=len(data))
    assert store.write_chunk(upload.id, 0, Pieces(data, [65_536]), len(data)) == len(data)
    assert direct_opens == []
    assert part_bytes(store, upload.id) == data


@pytest.mark.parametrize(
    "size",
    [
        0,
        1,
        ALIGN,
        ALIGN + 1,
        DIRECT_BUFFER_BYTES,
        DIRECT_BUFFER_BYTES + 1,
        2 * DIRECT_BUFFER_BYTES + 4097,
    ],
)
def test_the_direct_hash_is_the_sha256(store, tmp_path: Path, size: int) -> None:
    path = tmp_path / "f.bin"
    data = os.urandom(size)
    path.write_bytes(data)
    assert sha256_direct(path) == hashlib.sha256(data).hexdigest()


def test_a_store_without_direct_io_writes_the_same_bytes(tmp_path: Path, direct_opens) -> None:
    plain = UploadStore(tmp_path / "uploads", max_bytes=64 * MiB, direct_io=False)
    data = os.urandom(5 * MiB + 3)
    upload = plain.create("m.onnx", size=len(data))
    assert plain.write_chunk(upload.id, 0, Pieces(data, [300_000]), len(data)) == len(data)
    assert direct_opens == []
    assert plain.finish(upload.id).sha256 == hashlib.sha256(data).hexdigest()
