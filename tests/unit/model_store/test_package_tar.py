"""The package tar: the same package always gives the same bytes, the tar is built once and
reused while the package is unchanged, and ``safe_extract`` refuses hostile tars before it
writes anything."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import stat
import tarfile
import time
from pathlib import Path

import pytest

from model_store.config import ModelConfig, TensorSpec, parse_pbtxt, render_pbtxt
from model_store.errors import NotFound
from model_store.package_tar import (
    CACHE_DIR,
    PackageTarError,
    PackageTarMismatch,
    PackageTarTooLarge,
    UnsafePackageTar,
    cached_package_tar,
    package_tar,
    safe_extract,
)
from model_store.store import ModelStore
from model_store.uploads import InsufficientStorage

WEIGHTS = bytes(range(256)) * 5000  # 1.28 MB: more than one copy piece


def _config(name: str = "mlp") -> str:
    cfg = ModelConfig(
        name=name,
        backend="onnxruntime",
        max_batch_size=8,
        inputs=[TensorSpec("x", "TYPE_FP32", [4])],
        outputs=[TensorSpec("y", "TYPE_FP32", [3])],
    )
    return render_pbtxt(cfg)


def _packaged(root: Path, version: int = 2, weights: bytes = WEIGHTS) -> ModelStore:
    """A store holding version ``version`` of "mlp", packaged as the pipeline does."""
    store = ModelStore(root)
    store.ensure_layout()
    built = root.parent / f"{root.name}-built"
    built.mkdir(exist_ok=True)
    (built / "model.onnx").write_bytes(b"graph")
    (built / "model.onnx.data").write_bytes(weights)
    files = {"model.onnx": built / "model.onnx", "model.onnx.data": built / "model.onnx.data"}
    store.package_version("mlp", version, files=files, config_text=_config(), install=False)
    return store


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- building


def test_the_tar_is_a_triton_repository_entry_pinned_to_its_version(tmp_path: Path) -> None:
    tar = package_tar(_packaged(tmp_path / "store"), "mlp", 2)

    assert tar.filename == "mlp-v2.tar"
    assert tar.size == tar.path.stat().st_size and tar.sha256 == _sha256(tar.path)
    with tarfile.open(tar.path) as archive:
        members = archive.getmembers()
        assert [m.name for m in members] == [
            "mlp", "mlp/2", "mlp/2/model.onnx", "mlp/2/model.onnx.data", "mlp/config.pbtxt",
        ]  # fmt: skip
        assert [m.isdir() for m in members] == [True, True, False, False, False]
        for member in members:
            assert (member.mtime, member.uid, member.gid, member.uname, member.gname) == (
                0, 0, 0, "", ""
            )  # fmt: skip
            assert member.mode == (0o755 if member.isdir() else 0o644)
        data = archive.extractfile("mlp/2/model.onnx.data")
        assert data is not None and data.read() == WEIGHTS
        config_file = archive.extractfile("mlp/config.pbtxt")
        assert config_file is not None
        config = parse_pbtxt(config_file.read().decode())
    assert config.name == "mlp" and config.version_policy_specific == [2]


def test_the_same_package_gives_the_same_bytes_on_another_store_at_another_time(
    tmp_path: Path,
) -> None:
    first = package_tar(_packaged(tmp_path / "a"), "mlp", 2)
    later = _packaged(tmp_path / "b")
    for path in (later.package_dir("mlp", 2) / "2").iterdir():
        os.utime(path, (time.time() + 3600, time.time() + 3600))  # other times, other inodes
    second = package_tar(later, "mlp", 2)

    assert second.sha256 == first.sha256
    assert second.path.read_bytes() == first.path.read_bytes()


def test_other_weights_give_another_hash(tmp_path: Path) -> None:
    first = package_tar(_packaged(tmp_path / "a"), "mlp", 2)
    other = package_tar(_packaged(tmp_path / "b", weights=WEIGHTS[::-1]), "mlp", 2)
    assert other.sha256 != first.sha256


def test_the_tar_is_built_once_and_reused_while_the_package_is_unchanged(tmp_path: Path) -> None:
    store = _packaged(tmp_path / "store")
    assert cached_package_tar(store, "mlp", 2) is None  # never built by asking

    built = package_tar(store, "mlp", 2)
    stamp = built.path.stat()
    again = package_tar(store, "mlp", 2)

    assert again == built == cached_package_tar(store, "mlp", 2)
    assert (again.path.stat().st_ino, again.path.stat().st_mtime_ns) == (
        stamp.st_ino, stamp.st_mtime_ns,
    )  # fmt: skip
    cache = store.source_dir("mlp", 2) / CACHE_DIR
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith(".")) == sorted(
        [built.path.name, built.path.with_suffix(".json").name]
    )


def test_packaging_again_builds_a_new_tar_and_removes_the_old_one(tmp_path: Path) -> None:
    store = _packaged(tmp_path / "store")
    old = package_tar(store, "mlp", 2)
    shutil.rmtree(store.package_dir("mlp", 2))  # what a retried package step does
    other = tmp_path / "other.data"
    other.write_bytes(b"new weights")
    store.package_version(
        "mlp", 2, files={"model.onnx.data": other}, config_text=_config(), install=False
    )

    assert cached_package_tar(store, "mlp", 2) is None
    new = package_tar(store, "mlp", 2)
    assert new.sha256 != old.sha256 and new.path != old.path
    assert not old.path.exists()


def test_deleting_the_version_deletes_its_tar(tmp_path: Path) -> None:
    store = _packaged(tmp_path / "store")
    tar = package_tar(store, "mlp", 2)
    store.remove_source("mlp", 2)
    assert not tar.path.exists()


def test_a_version_without_a_package_is_not_found(tmp_path: Path) -> None:
    store = _packaged(tmp_path / "store")
    with pytest.raises(NotFound, match=r"no packaged config\.pbtxt"):
        package_tar(store, "mlp", 3)
    with pytest.raises(NotFound):
        cached_package_tar(store, "mlp", 3)


def test_a_tar_that_would_not_fit_on_the_disk_is_refused_and_nothing_is_kept(
    tmp_path: Path,
) -> None:
    store = _packaged(tmp_path / "store")
    free = shutil.disk_usage(tmp_path).free
    with pytest.raises(InsufficientStorage, match="must stay free") as info:
        package_tar(store, "mlp", 2, min_free_bytes=free)
    assert info.value.code == "insufficient_storage"
    cache = store.source_dir("mlp", 2) / CACHE_DIR
    assert [p.name for p in cache.iterdir()] == [".lock"]


# --------------------------------------------------------------------------- unpacking


def test_safe_extract_gives_back_the_package_with_fresh_file_times(tmp_path: Path) -> None:
    store = _packaged(tmp_path / "store")
    tar = package_tar(store, "mlp", 2)
    before = time.time() - 1

    unpacked = safe_extract(tar.path, tmp_path / "staging", tar.sha256.upper())

    assert (unpacked.model, unpacked.version) == ("mlp", 2)
    assert unpacked.model_dir == tmp_path / "staging" / "mlp"
    assert unpacked.files == ["model.onnx", "model.onnx.data"]
    assert (unpacked.model_dir / "2" / "model.onnx.data").read_bytes() == WEIGHTS
    assert unpacked.config.version_policy_specific == [2]
    for path in (unpacked.model_dir / "config.pbtxt", unpacked.model_dir / "2" / "model.onnx"):
        info = path.stat()
        # Triton decides whether a load re-reads a model from its files' times.
        assert info.st_mtime >= before
        assert stat.S_IMODE(info.st_mode) == 0o644


def _entry(name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE) -> tuple:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data)
    return info, data


PINNED = 'name: "mlp"\nversion_policy { specific { versions: 1 } }'
CONFIG = _config().replace('name: "mlp"', PINNED)
GOOD = [("mlp/config.pbtxt", CONFIG.encode()), ("mlp/1/model.onnx", b"graph")]


def _tar(path: Path, entries: list[tuple]) -> str:
    """Writes a tar of ``(TarInfo, data)`` or ``(name, data)`` entries byte by byte (so that a
    header may lie about its size, which tarfile would not write); returns its SHA-256."""
    with path.open("wb") as out:
        for entry in entries:
            info, data = entry if isinstance(entry[0], tarfile.TarInfo) else _entry(*entry)
            out.write(info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape"))
            out.write(data + b"\0" * (-len(data) % tarfile.BLOCKSIZE))
        out.write(b"\0" * (2 * tarfile.BLOCKSIZE))
    return _sha256(path)


def _link(name: str, target: str, kind: bytes) -> tuple:
    info, _ = _entry(name, kind=kind)
    info.linkname = target
    return info, b""


def _pax_path(name: str, claimed: str) -> tuple:
    info, data = _entry(name, b"evil")
    info.pax_headers = {"path": claimed}
    return info, data


def _declared(name: str, size: int) -> tuple:
    info, _ = _entry(name)
    info.size = size
    return info, b"x" * 10


def _plus(*extra: tuple) -> list[tuple]:
    """The good entries and ``extra`` after them."""
    return [*GOOD, *extra]


UNSAFE = UnsafePackageTar
HOSTILE: dict[str, tuple[list[tuple], type[Exception]]] = {
    "a parent-directory name": (_plus(("../evil", b"x")), UNSAFE),
    "a name climbing out of the model": (_plus(("mlp/../../evil", b"x")), UNSAFE),
    "an absolute name": (_plus(("/tmp/evil", b"x")), UNSAFE),
    "a pax header renaming an entry outside": (
        _plus(_pax_path("mlp/1/ok.bin", "../../evil")),
        UNSAFE,
    ),
    "a symbolic link": (_plus(_link("mlp/1/link", "/etc/passwd", tarfile.SYMTYPE)), UNSAFE),
    "a hard link": (_plus(_link("mlp/1/hard", "/etc/passwd", tarfile.LNKTYPE)), UNSAFE),
    "a character device": (_plus(_entry("mlp/1/null", kind=tarfile.CHRTYPE)), UNSAFE),
    "a block device": (_plus(_entry("mlp/1/sda", kind=tarfile.BLKTYPE)), UNSAFE),
    "a FIFO": (_plus(_entry("mlp/1/pipe", kind=tarfile.FIFOTYPE)), UNSAFE),
    "a contiguous file": (_plus(_entry("mlp/1/c", b"x", kind=tarfile.CONTTYPE)), UNSAFE),
    "a '.' part": (_plus(("mlp/./1/x", b"x")), UNSAFE),
    "a backslash": (_plus(("mlp/1/..\\..\\evil", b"x")), UNSAFE),
    "two models": (_plus(("other/1/model.onnx", b"x")), PackageTarError),
    "two versions": (_plus(("mlp/2/model.onnx", b"x")), PackageTarError),
    "a directory inside the version": (_plus(("mlp/1/sub/x.bin", b"x")), PackageTarError),
    "a file beside config.pbtxt": (_plus(("mlp/notes.txt", b"x")), PackageTarError),
    "a file named twice": (_plus(("mlp/1/model.onnx", b"other")), PackageTarError),
    "no config.pbtxt": (GOOD[1:], PackageTarError),
    "no version at all": (GOOD[:1], PackageTarError),
    "a version without files": ([GOOD[0], _entry("mlp/1", kind=tarfile.DIRTYPE)], PackageTarError),
    "a config naming another model": (
        [("mlp/config.pbtxt", CONFIG.replace('"mlp"', '"other"').encode()), GOOD[1]],
        PackageTarError,
    ),
    "a config that does not pin the version": (
        [("mlp/config.pbtxt", _config().encode()), GOOD[1]],
        PackageTarError,
    ),
    "a config that is not a config": (
        [("mlp/config.pbtxt", b"name: {{{"), GOOD[1]],
        PackageTarError,
    ),
    "a bad model name": (
        [("m l p/config.pbtxt", CONFIG.encode()), ("m l p/1/model.onnx", b"g")],
        PackageTarError,
    ),
    "a version with a leading zero": ([GOOD[0], ("mlp/01/model.onnx", b"g")], PackageTarError),
    "a declared size past the limit": (
        _plus(_declared("mlp/1/big.bin", 10**12)),
        PackageTarTooLarge,
    ),
    # The tar ends inside the last file: its header promises 4096 bytes, 10 follow.
    "a declared size past the data": (_plus(_declared("mlp/1/short.bin", 4096)), PackageTarError),
}


@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
def test_a_hostile_tar_is_refused_before_anything_is_written(tmp_path: Path, case: str) -> None:
    entries, error = HOSTILE[case]
    sha = _tar(tmp_path / "hostile.tar", entries)
    staging = tmp_path / "staging"

    with pytest.raises(error) as info:
        safe_extract(tmp_path / "hostile.tar", staging, sha, max_bytes=10**9)

    assert info.value.message  # a sentence, for the log of whoever sent it
    assert not staging.exists() or not any(staging.iterdir())
    assert not (tmp_path / "evil").exists()


def test_the_good_hand_made_tar_is_accepted(tmp_path: Path) -> None:
    sha = _tar(tmp_path / "good.tar", GOOD)
    unpacked = safe_extract(tmp_path / "good.tar", tmp_path / "staging", sha)
    assert (unpacked.model_dir / "1" / "model.onnx").read_bytes() == b"graph"


def test_an_ensemble_has_an_empty_version_directory(tmp_path: Path) -> None:
    config = 'name: "pipe"\nplatform: "ensemble"\nversion_policy { specific { versions: 1 } }'
    entries = [_entry("pipe/1", kind=tarfile.DIRTYPE), ("pipe/config.pbtxt", config.encode())]
    sha = _tar(tmp_path / "ensemble.tar", entries)
    unpacked = safe_extract(tmp_path / "ensemble.tar", tmp_path / "staging", sha)
    assert unpacked.files == [] and (unpacked.model_dir / "1").is_dir()


def test_a_wrong_sha256_is_refused(tmp_path: Path) -> None:
    sha = _tar(tmp_path / "good.tar", GOOD)
    wrong = sha[:-1] + ("0" if sha[-1] != "0" else "1")
    with pytest.raises(PackageTarMismatch, match="damaged or altered") as info:
        safe_extract(tmp_path / "good.tar", tmp_path / "staging", wrong)
    assert info.value.code == "sha256_mismatch"
    with pytest.raises(PackageTarError, match="64 hexadecimal"):
        safe_extract(tmp_path / "good.tar", tmp_path / "staging", "not-a-hash")
    assert not (tmp_path / "staging").exists()


def test_a_compressed_tar_is_refused(tmp_path: Path) -> None:
    _tar(tmp_path / "good.tar", GOOD)
    (tmp_path / "good.tar.gz").write_bytes(gzip.compress((tmp_path / "good.tar").read_bytes()))
    sha = _sha256(tmp_path / "good.tar.gz")
    with pytest.raises(PackageTarError, match="not an uncompressed tar"):
        safe_extract(tmp_path / "good.tar.gz", tmp_path / "staging", sha)


def test_a_tar_over_the_size_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    sha = _tar(tmp_path / "good.tar", GOOD)
    with pytest.raises(PackageTarTooLarge, match="the limit is"):
        safe_extract(tmp_path / "good.tar", tmp_path / "staging", sha, max_bytes=1024)


def test_too_many_entries_are_refused(tmp_path: Path) -> None:
    entries = GOOD + [(f"mlp/1/f{i}", b"") for i in range(20)]
    sha = _tar(tmp_path / "many.tar", entries)
    with pytest.raises(PackageTarTooLarge, match="more than 10 entries"):
        safe_extract(tmp_path / "many.tar", tmp_path / "staging", sha, max_entries=10)


def test_a_staging_directory_that_is_not_empty_is_refused(tmp_path: Path) -> None:
    sha = _tar(tmp_path / "good.tar", GOOD)
    staging = tmp_path / "staging"
    staging.mkdir()
    (staging / "mlp").symlink_to(tmp_path)  # a planted link would redirect the writes
    with pytest.raises(PackageTarError, match="not empty"):
        safe_extract(tmp_path / "good.tar", staging, sha)
    assert not (tmp_path / "1").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(PackageTarError, match="is a file"):
        safe_extract(tmp_path / "good.tar", tmp_path / "file", sha)
