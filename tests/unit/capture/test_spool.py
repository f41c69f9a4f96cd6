"""The spool between the web process and the worker: whole files only, bounded, each taken
by one worker, and a file that is not one of ours refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from model_store.capture.files import DiskFull
from model_store.capture.spool import Spool, SpoolFull, read


def test_a_request_goes_in_whole_and_is_taken_once(tmp_path: Path) -> None:
    spool = Spool(tmp_path, min_free=0)
    spool.put({"model": "m", "version": 1}, [b"request", b"", b"answer"])
    (found,) = spool.oldest(10)
    taken = spool.claim(found)
    assert taken is not None and spool.claim(found) is None  # a second worker gets nothing
    assert spool.oldest(10) == []
    facts, parts = read(taken)
    assert facts == {"model": "m", "version": 1}
    assert parts == [b"request", b"", b"answer"]
    assert not list(tmp_path.glob(".*.tmp"))


def test_bounded_in_files_and_by_the_disk(tmp_path: Path) -> None:
    spool = Spool(tmp_path, min_free=0, max_files=2)
    spool.put({}, [b"a"])
    spool.put({}, [b"b"])
    with pytest.raises(SpoolFull):
        spool.put({}, [b"c"])
    with pytest.raises(DiskFull):
        Spool(tmp_path / "other", min_free=1 << 62).put({}, [b"x"])
    assert not (tmp_path / "other").exists() or not list((tmp_path / "other").iterdir())


@pytest.mark.parametrize("data", [b"", b"\x00\x00\x00\x05{bad}", b'\x00\x00\x00\x0c{"parts":[9]}x'])
def test_what_is_not_a_spool_file_is_refused(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "x.cap"
    path.write_bytes(data)
    with pytest.raises(ValueError):
        read(path)
