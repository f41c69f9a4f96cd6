"""Resumable uploads (model_store.uploads): round trips, refusals, memory, bundles."""

from __future__ import annotations

import hashlib
import io
import os
import stat
import struct
import threading
import time
import tracemalloc
import warnings
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from model_store.errors import MissingExternalData, ModelStoreError
from model_store.uploads.bundles import check_bundle_model, unpack_bundle
from model_store.uploads.errors import (
    InvalidUpload,
    UploadBusy,
    UploadCorrupt,
    UploadNotFound,
    UploadOffsetMismatch,
    UploadTooLarge,
    human_bytes,
)
from model_store.uploads.records import PIECE_SIZE
from model_store.uploads.upload_store import UploadStore

MiB = 1024 * 1024


@pytest.fixture
def uploads(tmp_path: Path) -> UploadStore:
    return UploadStore(tmp_path / "uploads", max_bytes=256 * MiB)


def send_all(
    uploads: UploadStore, upload_id: str, data: bytes, chunk_sizes: list[int], start: int = 0
) -> int:
    """Sends ``data[start:]`` in chunks of the given sizes (cycled), as a client would."""
    offset, i = start, 0
    while offset < len(data):
        size = min(chunk_sizes[i % len(chunk_sizes)], len(data) - offset)
        offset = uploads.write_chunk(upload_id, offset, io.BytesIO(data[offset:]), size)
        i += 1
    return offset


# Round trips -----------------------------------------------------------------------


def test_create_resume_finish_round_trip_with_uneven_chunks(uploads: UploadStore) -> None:
    data = np.random.default_rng(1).bytes(3 * MiB + 17)
    digest = hashlib.sha256(data).hexdigest()
    up = uploads.create("resnet.onnx", len(data), sha256=digest.upper(), owner="alice")
    assert len(up.id) == 32 and up.received == 0 and up.state == "receiving"
    assert up.sha256 == digest and up.owner == "alice" and not up.is_bundle

    # First part in odd sizes, then the "client" forgets where it was and asks.
    offset = 0
    for size in (1, 999, PIECE_SIZE + 3):
        offset = uploads.write_chunk(up.id, offset, io.BytesIO(data[offset : offset + size]), size)
    resume = uploads.status(up.id).received
    assert resume == 1 + 999 + PIECE_SIZE + 3

    # A chunk whose stream breaks off early keeps what arrived.
    short = io.BytesIO(data[resume : resume + 1000])
    assert uploads.write_chunk(up.id, resume, short, 5000) == resume + 1000
    resume = uploads.status(up.id).received

    assert send_all(uploads, up.id, data, [7, 2 * MiB + 1, 123_457], start=resume) == len(data)
    assert uploads.status(up.id).received == len(data)

    done = uploads.finish(up.id)
    assert done.sha256 == digest and done.size == len(data) and done.filename == "resnet.onnx"
    assert done.path.read_bytes() == data
    assert uploads.status(up.id).complete
    assert uploads.finish(up.id) == done  # idempotent


def test_finish_without_declared_sha256_reports_the_hash(uploads: UploadStore) -> None:
    data = b"\x08\x07" * 500
    up = uploads.create("m.onnx", len(data))
    uploads.write_chunk(up.id, 0, io.BytesIO(data), len(data))
    assert uploads.finish(up.id).sha256 == hashlib.sha256(data).hexdigest()


def test_finish_before_all_bytes_arrived_says_how_many(uploads: UploadStore) -> None:
    up = uploads.create("m.onnx", 100)
    uploads.write_chunk(up.id, 0, io.BytesIO(b"x" * 40), 40)
    with pytest.raises(InvalidUpload, match="40 of 100 bytes"):
        uploads.finish(up.id)


def test_a_complete_upload_takes_no_more_chunks(uploads: UploadStore) -> None:
    up = uploads.create("m.onnx", 4)
    uploads.write_chunk(up.id, 0, io.BytesIO(b"abcd"), 4)
    uploads.finish(up.id)
    with pytest.raises(InvalidUpload, match="already complete"):
        uploads.write_chunk(up.id, 4, io.BytesIO(b""), 0)


# Refusals --------------------------------------------------------------------------


def test_offset_mismatch_returns_the_expected_offset(uploads: UploadStore) -> None:
    up = uploads.create("m.onnx", 1000)
    uploads.write_chunk(up.id, 0, io.BytesIO(b"a" * 300), 300)
    for wrong in (0, 200, 301, 1000):
        with pytest.raises(UploadOffsetMismatch) as caught:
            uploads.write_chunk(up.id, wrong, io.BytesIO(b"b" * 10), 10)
        assert caught.value.expected == 300
        assert caught.value.code == "upload_offset"
        assert caught.value.as_dict()["expected_offset"] == "300"
        assert "300" in caught.value.message
    assert uploads.status(up.id).received == 300


def test_writing_past_the_declared_size_is_refused(uploads: UploadStore) -> None:
    up = uploads.create("m.onnx", 100)
    uploads.write_chunk(up.id, 0, io.BytesIO(b"a" * 90), 90)
    with pytest.raises(UploadTooLarge, match="at most 10 more bytes"):
        uploads.write_chunk(up.id, 90, io.BytesIO(b"b" * 11), 11)
    assert uploads.status(up.id).received == 90
    # A stream that returns more than asked for cannot overflow either.
    greedy = type("Greedy", (), {"read": lambda self, n: b"c" * (n + 50)})()
    assert uploads.write_chunk(up.id, 90, greedy, 10) == 100


def test_sha256_mismatch_keeps_nothing(uploads: UploadStore, tmp_path: Path) -> None:
    up = uploads.create("m.onnx", 5, sha256="0" * 64)
    uploads.write_chunk(up.id, 0, io.BytesIO(b"hello"), 5)
    with pytest.raises(UploadCorrupt) as caught:
        uploads.finish(up.id)
    assert caught.value.code == "upload_corrupt"
    assert hashlib.sha256(b"hello").hexdigest() in caught.value.message
    assert list((tmp_path / "uploads").iterdir()) == []
    with pytest.raises(UploadNotFound):
        uploads.status(up.id)


@pytest.mark.parametrize(
    "filename",
    [
        "../x.onnx",
        "a/b.onnx",
        "a\\b.onnx",
        "x.onnx\n",
        "x\x00.onnx",
        "x.exe",
        "model.pt",
        "model.onnx.data",
        "",
        "a" * 295 + ".onnx",
        ".onnx",
        "my model.onnx",
        "..onnx",
    ],
)
def test_hostile_or_unsupported_filenames_are_refused(
    uploads: UploadStore, tmp_path: Path, filename: str
) -> None:
    with pytest.raises(InvalidUpload) as caught:
        uploads.create(filename, 10)
    assert caught.value.code == "invalid_upload"
    assert not (tmp_path / "uploads").exists() or not any((tmp_path / "uploads").iterdir())


def test_folder_names_are_refused_with_a_clear_message(uploads: UploadStore) -> None:
    with pytest.raises(InvalidUpload, match="contains a folder"):
        uploads.create("models/resnet.onnx", 10)


@pytest.mark.parametrize("filename", ["resnet-50_v1.2.onnx", "Bundle.ZIP", "m.zip"])
def test_plain_onnx_and_zip_names_are_accepted(uploads: UploadStore, filename: str) -> None:
    up = uploads.create(filename, 10)
    assert up.filename == filename
    assert up.is_bundle == filename.lower().endswith(".zip")


def test_bad_sizes_and_hashes_are_refused(uploads: UploadStore) -> None:
    with pytest.raises(InvalidUpload, match="empty file"):
        uploads.create("m.onnx", 0)
    with pytest.raises(InvalidUpload, match="empty file"):
        uploads.create("m.onnx", -5)
    with pytest.raises(InvalidUpload):
        uploads.create("m.onnx", True)
    with pytest.raises(UploadTooLarge, match="256 MiB") as caught:
        uploads.create("m.onnx", 256 * MiB + 1)
    assert caught.value.code == "upload_too_large"
    for bad in ("abc", "g" * 64, "0" * 63, "0" * 65, " " + "0" * 63):
        with pytest.raises(InvalidUpload, match="64 hex"):
            uploads.create("m.onnx", 10, sha256=bad)


@pytest.mark.parametrize("upload_id", ["../../etc", "abc", "A" * 32, "0" * 31 + "/", "", "0" * 33])
def test_hostile_ids_are_refused_everywhere(uploads: UploadStore, upload_id: str) -> None:
    calls = [
        lambda: uploads.status(upload_id),
        lambda: uploads.write_chunk(upload_id, 0, io.BytesIO(b"x"), 1),
        lambda: uploads.finish(upload_id),
        lambda: uploads.cancel(upload_id),
    ]
    for call in calls:
        with pytest.raises(UploadNotFound) as caught:
            call()
        assert caught.value.code == "upload_not_found"


def test_unknown_well_formed_id_is_not_found(uploads: UploadStore) -> None:
    with pytest.raises(UploadNotFound):
        uploads.status("0" * 32)


def test_every_error_is_a_model_store_error() -> None:
    errors = [InvalidUpload, UploadNotFound, UploadTooLarge, UploadCorrupt, UploadBusy]
    assert all(issubclass(e, ModelStoreError) for e in [*errors, UploadOffsetMismatch])
    codes = {e.code for e in [*errors, UploadOffsetMismatch]}
    assert codes == {
        "invalid_upload",
        "upload_not_found",
        "upload_too_large",
        "upload_corrupt",
        "upload_busy",
        "upload_offset",
    }


def test_human_bytes() -> None:
    assert human_bytes(512) == "512 bytes"
    assert human_bytes(1536) == "1.5 KiB"
    assert human_bytes(2 * 1024**3) == "2 GiB"


# Memory, concurrency, lifecycle ----------------------------------------------------


class GeneratedStream:
    """A read()-able stream of ``total`` pseudo-random bytes that never holds them all."""

    def __init__(self, total: int, block: int = 256 * 1024) -> None:
        self._blocks = self._generate(total, block)
        self._pending = b""
        self.digest = hashlib.sha256()

    def _generate(self, total: int, block: int) -> Iterator[bytes]:
        seed = hashlib.sha256(b"seed").digest()
        sent = 0
        while sent < total:
            seed = hashlib.sha256(seed).digest()
            piece = (seed * (block // len(seed) + 1))[: min(block, total - sent)]
            self.digest.update(piece)
            sent += len(piece)
            yield piece

    def read(self, n: int = -1) -> bytes:
        while len(self._pending) < n:
            nxt = next(self._blocks, b"")
            if not nxt:
                break
            self._pending += nxt
        out, self._pending = self._pending[:n], self._pending[n:]
        return out


def test_a_64_mib_upload_uses_constant_memory(uploads: UploadStore) -> None:
    total = 64 * MiB
    stream = GeneratedStream(total)
    up = uploads.create("big.onnx", total)
    tracemalloc.start()
    try:
        received = 0
        while received < total:  # 16 MiB requests, like a client's chunks
            received = uploads.write_chunk(up.id, received, stream, min(16 * MiB, total - received))
        done = uploads.finish(up.id)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert done.size == total and done.sha256 == stream.digest.hexdigest()
    assert peak < 6 * MiB, f"peak Python allocations {peak / MiB:.1f} MiB"


class HeldStream:
    """Yields ``data`` once released: the writer reading it holds the upload's lock until then."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)
        self.reading = threading.Event()  # set once the writer has the lock and reads
        self.release = threading.Event()

    def read(self, n: int = -1) -> bytes:
        self.reading.set()
        assert self.release.wait(10), "the test never released the stream"
        return self._data.read(n)


def test_concurrent_writers_do_not_interleave(uploads: UploadStore) -> None:
    up = uploads.create("m.onnx", 100)
    results: dict[str, object] = {}
    held = HeldStream(b"A" * 50)

    def first() -> None:
        results["first"] = uploads.write_chunk(up.id, 0, held, 50)

    thread = threading.Thread(target=first)
    thread.start()
    assert held.reading.wait(10)  # the first writer holds the lock now
    # The first writer finishes while the second waits for the lock (the delay only bounds
    # how long the first holds it: the second starts while it is held, whatever the timing).
    releaser = threading.Timer(0.05, held.release.set)
    releaser.start()
    with pytest.raises(UploadOffsetMismatch) as caught:
        uploads.write_chunk(up.id, 0, io.BytesIO(b"B" * 50), 50)
    thread.join()
    releaser.join()
    assert results["first"] == 50 and caught.value.expected == 50
    uploads.write_chunk(up.id, 50, io.BytesIO(b"B" * 50), 50)
    assert uploads.finish(up.id).path.read_bytes() == b"A" * 50 + b"B" * 50


def test_a_writer_gives_up_when_another_holds_the_upload_too_long(tmp_path: Path) -> None:
    slow = UploadStore(tmp_path / "uploads", max_bytes=MiB, lock_timeout_s=0.1)
    up = slow.create("m.onnx", 100)
    held = HeldStream(b"A" * 100)
    thread = threading.Thread(target=slow.write_chunk, args=(up.id, 0, held, 100))
    thread.start()
    assert held.reading.wait(10)  # the first writer holds the lock now
    try:
        with pytest.raises(UploadBusy):
            slow.write_chunk(up.id, 0, io.BytesIO(b"B"), 1)
    finally:
        held.release.set()
        thread.join()


def test_cancel_removes_everything(uploads: UploadStore, tmp_path: Path) -> None:
    up = uploads.create("m.onnx", 10)
    uploads.write_chunk(up.id, 0, io.BytesIO(b"12345"), 5)
    uploads.cancel(up.id)
    assert list((tmp_path / "uploads").iterdir()) == []
    with pytest.raises(UploadNotFound):
        uploads.status(up.id)
    with pytest.raises(UploadNotFound):
        uploads.cancel(up.id)


def test_cleanup_stale_removes_only_abandoned_uploads(uploads: UploadStore, tmp_path: Path) -> None:
    old = uploads.create("old.onnx", 10)
    fresh = uploads.create("fresh.onnx", 10)
    unrelated = tmp_path / "uploads" / "0123abcd.upload"  # ModelStore.new_upload_path's files
    unrelated.write_bytes(b"keep")
    past = time.time() - 7200
    for path in (tmp_path / "uploads" / old.id).iterdir():
        os.utime(path, (past, past))
    os.utime(tmp_path / "uploads" / old.id, (past, past))
    os.utime(unrelated, (past, past))

    assert uploads.cleanup_stale(3600) == [old.id]
    assert uploads.list_ids() == [fresh.id]
    assert unrelated.exists()


# Bundles ---------------------------------------------------------------------------


def tiny_model_with_external_data(folder: Path, location: str = "weights.bin") -> Path:
    """Saves y = x + w (w: 256 floats) with w in an external data file beside the model."""
    weights = numpy_helper.from_array(np.arange(256, dtype=np.float32), name="w")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256])],
        initializer=[weights],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.onnx"
    onnx.save_model(
        model,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=location,
        size_threshold=0,
    )
    return path


def make_zip(path: Path, members: dict[str, bytes]) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names on purpose in one test
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in members.items():
                zf.writestr(name, data)
    return path


@pytest.fixture
def model_files(tmp_path: Path) -> dict[str, bytes]:
    onnx_path = tiny_model_with_external_data(tmp_path / "src")
    return {
        "model.onnx": onnx_path.read_bytes(),
        "weights.bin": (onnx_path.parent / "weights.bin").read_bytes(),
    }


def test_a_good_bundle_unpacks_and_passes_inspection(
    tmp_path: Path, model_files: dict[str, bytes]
) -> None:
    bundle = make_zip(tmp_path / "b.zip", model_files)
    dest = tmp_path / "out"
    onnx_path = unpack_bundle(bundle, dest, max_total_bytes=MiB)
    assert onnx_path == (dest / "model.onnx").resolve()
    assert (dest / "weights.bin").read_bytes() == model_files["weights.bin"]
    check = check_bundle_model(onnx_path, dest)
    assert check.info.external_data_files == ["weights.bin"]
    assert check.unused_files == [] and check.warnings == []


def test_a_bundle_in_a_folder_with_an_extra_file_warns(
    tmp_path: Path, model_files: dict[str, bytes]
) -> None:
    members = {f"resnet/{name}": data for name, data in model_files.items()}
    members["resnet/README.txt"] = b"hello"
    bundle = make_zip(tmp_path / "b.zip", members)
    dest = tmp_path / "out"
    onnx_path = unpack_bundle(bundle, dest, max_total_bytes=MiB)
    check = check_bundle_model(onnx_path, dest)
    assert check.unused_files == ["resnet/README.txt"]
    assert "README.txt" in check.warnings[0]


def test_external_data_missing_from_the_bundle_is_reported(
    tmp_path: Path, model_files: dict[str, bytes]
) -> None:
    bundle = make_zip(tmp_path / "b.zip", {"model.onnx": model_files["model.onnx"]})
    onnx_path = unpack_bundle(bundle, tmp_path / "out", max_total_bytes=MiB)
    with pytest.raises(MissingExternalData, match=r"weights\.bin"):
        check_bundle_model(onnx_path)


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ({"model.onnx": b"m", "../evil": b"x"}, "'..'"),
        ({"model.onnx": b"m", "a/../../evil": b"x"}, "'..'"),
        ({"/model.onnx": b"m"}, "absolute"),
        ({"C:/model.onnx": b"m"}, "absolute"),
        ({"model.onnx": b"m", "..\\evil": b"x"}, "backslash"),
        ({"a.onnx": b"m", "b.onnx": b"m"}, "2 .onnx files"),
        ({"weights.bin": b"w"}, "no .onnx file"),
        ({}, "no .onnx file"),
        ({"model.onnx": b"m", "w": b"1", "w/x": b"2"}, "as a file and a folder"),
        ({"model.onnx": b"m", "./w": b"1"}, "empty or '.'"),
    ],
)
def test_hostile_bundles_are_refused(
    tmp_path: Path, members: dict[str, bytes], message: str
) -> None:
    bundle = make_zip(tmp_path / "b.zip", members)
    dest = tmp_path / "out"
    with pytest.raises(InvalidUpload, match=message):
        unpack_bundle(bundle, dest, max_total_bytes=MiB)
    assert list(dest.iterdir()) == []
    assert not (tmp_path / "evil").exists()


def test_duplicate_members_are_refused(tmp_path: Path) -> None:
    bundle = tmp_path / "b.zip"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with zipfile.ZipFile(bundle, "w") as zf:
            zf.writestr("model.onnx", b"first")
            zf.writestr("model.onnx", b"second")
    with pytest.raises(InvalidUpload, match="twice"):
        unpack_bundle(bundle, tmp_path / "out", max_total_bytes=MiB)


def test_symlink_members_are_refused(tmp_path: Path) -> None:
    bundle = tmp_path / "b.zip"
    with zipfile.ZipFile(bundle, "w") as zf:
        zf.writestr("model.onnx", b"m")
        link = zipfile.ZipInfo("weights.bin")
        link.create_system = 3
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/etc/passwd")
    dest = tmp_path / "out"
    with pytest.raises(InvalidUpload, match="symbolic link"):
        unpack_bundle(bundle, dest, max_total_bytes=MiB)
    assert list(dest.iterdir()) == []


def test_a_zip_bomb_is_refused(tmp_path: Path) -> None:
    bundle = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("model.onnx", b"m")
        with zf.open("weights.bin", "w") as member:
            zeros = bytes(MiB)
            for _ in range(32):
                member.write(zeros)
    assert bundle.stat().st_size < 100_000
    with pytest.raises(InvalidUpload, match="zip bomb"):
        unpack_bundle(bundle, tmp_path / "out", max_total_bytes=1024 * MiB)


def test_a_bundle_over_the_size_limit_is_refused(
    tmp_path: Path, model_files: dict[str, bytes]
) -> None:
    bundle = make_zip(tmp_path / "b.zip", model_files)
    with pytest.raises(UploadTooLarge):
        unpack_bundle(bundle, tmp_path / "out", max_total_bytes=500)


def test_too_many_files_are_refused(tmp_path: Path) -> None:
    members = {"model.onnx": b"m", **{f"w{i}.bin": b"w" for i in range(5)}}
    bundle = make_zip(tmp_path / "b.zip", members)
    with pytest.raises(InvalidUpload, match="more than 4 files"):
        unpack_bundle(bundle, tmp_path / "out", max_total_bytes=MiB, max_files=4)


def test_a_non_zip_renamed_to_zip_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "model.zip"
    fake.write_bytes(b"\x08\x07this is an onnx file, not a zip")
    with pytest.raises(InvalidUpload, match=r"must hold one \.onnx file"):
        unpack_bundle(fake, tmp_path / "out", max_total_bytes=MiB)


def test_a_truncated_zip_is_refused(tmp_path: Path, model_files: dict[str, bytes]) -> None:
    bundle = make_zip(tmp_path / "b.zip", model_files)
    data = bundle.read_bytes()
    bundle.write_bytes(data[: len(data) // 2])
    with pytest.raises(InvalidUpload):
        unpack_bundle(bundle, tmp_path / "out", max_total_bytes=MiB)


def test_upload_then_unpack_a_bundle(
    uploads: UploadStore, tmp_path: Path, model_files: dict[str, bytes]
) -> None:
    data = make_zip(tmp_path / "b.zip", model_files).read_bytes()
    up = uploads.create("bundle.zip", len(data), sha256=hashlib.sha256(data).hexdigest())
    send_all(uploads, up.id, data, [100])
    done = uploads.finish(up.id)
    onnx_path = unpack_bundle(done.path, tmp_path / "out", max_total_bytes=MiB)
    assert check_bundle_model(onnx_path).info.outputs[0].name == "y"


# Central directory limits: refused from the end records, before zipfile parses anything -----


_EOCD = struct.Struct("<4s4H2LH")


def forbid_zipfile_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any later ``zipfile.ZipFile(...)`` fails the test: the archive must be refused unread."""

    def no_parse(*args: object, **kwargs: object) -> None:
        pytest.fail("zipfile.ZipFile was asked to parse an archive that should be refused first")

    monkeypatch.setattr(zipfile, "ZipFile", no_parse)


def declaring(data: bytes, entries: int | None = None, cd_size: int | None = None) -> bytes:
    """The archive with its End Of Central Directory record rewritten to declare other numbers."""
    at = data.rindex(b"PK\x05\x06")
    sig, disk, cd_disk, this_disk, total, size, offset, comment = _EOCD.unpack_from(data, at)
    eocd = _EOCD.pack(
        sig,
        disk,
        cd_disk,
        this_disk if entries is None else entries,
        total if entries is None else entries,
        size if cd_size is None else cd_size,
        offset,
        comment,
    )
    return data[:at] + eocd + data[at + _EOCD.size :]


def as_zip64(data: bytes, entries: int | None = None, cd_size: int | None = None) -> bytes:
    """The archive ended by ZIP64 records (declaring ``entries``/``cd_size`` if given)."""
    at = data.rindex(b"PK\x05\x06")
    _sig, _disk, _cd_disk, _this, total, size, offset, _comment = _EOCD.unpack_from(data, at)
    count = total if entries is None else entries
    zip64 = struct.pack(
        "<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, cd_size or size, offset
    )
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, at, 1)
    eocd = _EOCD.pack(b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    return data[:at] + zip64 + locator + eocd


def test_many_tiny_entries_are_refused_before_zipfile_parses_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    members = {"model.onnx": b"m", **{f"w{i}.bin": b"" for i in range(500)}}
    bundle = make_zip(tmp_path / "b.zip", members)
    forbid_zipfile_parsing(monkeypatch)
    dest = tmp_path / "out"
    with pytest.raises(InvalidUpload, match="declares 501 entries: more than 64 files and folders"):
        unpack_bundle(bundle, dest, max_total_bytes=MiB)
    assert list(dest.iterdir()) == []


def test_folder_entries_count_toward_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    members = {"model.onnx": b"m", **{f"d{i}/": b"" for i in range(4)}}
    bundle = make_zip(tmp_path / "b.zip", members)
    forbid_zipfile_parsing(monkeypatch)
    with pytest.raises(InvalidUpload, match="declares 5 entries: more than 4 files and folders"):
        unpack_bundle(bundle, tmp_path / "out", max_total_bytes=MiB, max_files=4)


def test_an_end_record_that_under_declares_still_meets_the_limit(tmp_path: Path) -> None:
    # The declared count says 1, the directory holds 5 (folders included): zipfile walks the
    # directory by its size, not by the count, so the members are counted again.
    members = {"model.onnx": b"m", **{f"d{i}/": b"" for i in range(4)}}
    bundle = make_zip(tmp_path / "b.zip", members)
    bundle.write_bytes(declaring(bundle.read_bytes(), entries=1))
    with pytest.raises(InvalidUpload, match="more than 4 files and folders"):
        unpack_bundle(bundle, tmp_path / "out", max_total_bytes=MiB, max_files=4)


@pytest.mark.parametrize("craft", [declaring, as_zip64], ids=["eocd", "zip64"])
def test_an_end_record_declaring_a_huge_count_is_refused_unparsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_files: dict[str, bytes], craft: Any
) -> None:
    bundle = make_zip(tmp_path / "b.zip", model_files)
    huge = 65_000 if craft is declaring else 10**12
    bundle.write_bytes(craft(bundle.read_bytes(), entries=huge))
    forbid_zipfile_parsing(monkeypatch)
    with pytest.raises(InvalidUpload, match=f"declares {huge} entries"):
        unpack_bundle(bundle, tmp_path / "out", max_total_bytes=MiB)


@pytest.mark.parametrize("craft", [declaring, as_zip64], ids=["eocd", "zip64"])
def test_an_end_record_declaring_a_huge_directory_is_refused_unparsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_files: dict[str, bytes], craft: Any
) -> None:
    bundle = make_zip(tmp_path / "b.zip", model_files)
    bundle.write_bytes(craft(bundle.read_bytes(), cd_size=2**31))
    forbid_zipfile_parsing(monkeypatch)
    with pytest.raises(InvalidUpload, match="central directory is 2 GiB"):
        unpack_bundle(bundle, tmp_path / "out", max_total_bytes=MiB)


def test_a_real_oversized_central_directory_is_refused_unparsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Few entries, but two names of 20,000 characters: 39 KiB of directory for 3 entries.
    members = {"model.onnx": b"m", **{f"{i}{'x' * 20_000}": b"" for i in range(2)}}
    bundle = make_zip(tmp_path / "b.zip", members)
    forbid_zipfile_parsing(monkeypatch)
    with pytest.raises(
        InvalidUpload, match=r"central directory is 39\.2 KiB, more than the 16 KiB"
    ):
        unpack_bundle(bundle, tmp_path / "out", max_total_bytes=MiB, max_files=4)


def test_an_honest_zip64_bundle_still_unpacks(
    tmp_path: Path, model_files: dict[str, bytes]
) -> None:
    bundle = make_zip(tmp_path / "b.zip", model_files)
    bundle.write_bytes(as_zip64(bundle.read_bytes()))
    onnx_path = unpack_bundle(bundle, tmp_path / "out", max_total_bytes=MiB)
    assert check_bundle_model(onnx_path).info.external_data_files == ["weights.bin"]


def test_a_bundle_with_a_comment_is_read_from_its_real_end_record(
    tmp_path: Path, model_files: dict[str, bytes]
) -> None:
    bundle = tmp_path / "b.zip"
    with zipfile.ZipFile(bundle, "w") as zf:
        for name, data in model_files.items():
            zf.writestr(name, data)
        zf.comment = b"made by hand " * 100
    onnx_path = unpack_bundle(bundle, tmp_path / "out", max_total_bytes=MiB, max_files=2)
    assert onnx_path.name == "model.onnx"
