"""Tests for model_store.store: layout, atomic writes, staging, sources."""

from __future__ import annotations

import hashlib
import os
import stat
import time
from pathlib import Path

import pytest

from model_store.errors import (
    InvalidFileName,
    InvalidModelName,
    InvalidVersion,
    NotFound,
    StoreConflict,
    UnsafePath,
)
from model_store.file_io import (
    atomic_write_bytes,
    atomic_write_text,
    link_or_copy,
    safe_join,
    sha256_file,
)
from model_store.store import ModelStore


@pytest.fixture
def store(tmp_path: Path) -> ModelStore:
    store = ModelStore(tmp_path / "store")
    store.ensure_layout()
    return store


def _entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# Layout --------------------------------------------------------------------------


def test_ensure_layout_creates_the_four_directories(tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "new")
    store.ensure_layout()
    store.ensure_layout()  # idempotent
    assert _entries(store.root) == ["backends", "repository", "sources", "uploads"]
    assert store.uploads_dir == store.root / "uploads"
    assert store.backends_dir == store.root / "backends"


def test_paths_are_built_from_checked_names(store: ModelStore) -> None:
    assert store.model_dir("mlp") == store.repository_dir / "mlp"
    assert store.config_path("mlp") == store.repository_dir / "mlp" / "config.pbtxt"
    assert store.version_dir("mlp", "3") == store.repository_dir / "mlp" / "3"
    assert store.source_dir("mlp", 3) == store.sources_dir / "mlp" / "3"


@pytest.mark.parametrize("name", ["../x", "a/b", "..", "", "/etc"])
def test_it_refuses_to_build_paths_from_hostile_model_names(store: ModelStore, name: str) -> None:
    for build in (store.model_dir, store.config_path, lambda n: store.version_dir(n, 1)):
        with pytest.raises(InvalidModelName):
            build(name)
    with pytest.raises(InvalidModelName):
        store.source_dir(name, 1)


@pytest.mark.parametrize("version", ["../1", "0", "01", -1, "1/2"])
def test_it_refuses_to_build_paths_from_hostile_versions(
    store: ModelStore, version: object
) -> None:
    with pytest.raises(InvalidVersion):
        store.version_dir("mlp", version)  # type: ignore[arg-type]


def test_new_upload_paths_are_fresh_and_inside_uploads(store: ModelStore) -> None:
    first, second = store.new_upload_path(), store.new_upload_path()
    assert first != second
    assert first.parent == store.uploads_dir
    assert not first.exists()


# Atomic writes -------------------------------------------------------------------


def test_atomic_write_replaces_the_content_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "config.pbtxt"
    target.write_text("old")
    atomic_write_text(target, "new ✓")
    assert target.read_text(encoding="utf-8") == "new ✓"
    assert _entries(tmp_path) == ["config.pbtxt"]


def test_atomic_write_makes_the_file_readable_by_others(tmp_path: Path) -> None:
    target = tmp_path / "config.pbtxt"
    atomic_write_bytes(target, b"x")
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_a_failed_atomic_write_keeps_the_old_file_and_removes_the_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "config.pbtxt"
    target.write_text("old")

    def broken_replace(src: object, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_bytes(target, b"new")
    assert target.read_text() == "old"
    assert _entries(tmp_path) == ["config.pbtxt"]


def test_atomic_write_temp_files_are_invisible_to_triton_and_the_ge_onnx_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    real_replace = os.replace

    def spy(src: str, dst: str) -> None:
        seen.append(Path(src).name)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    atomic_write_bytes(tmp_path / "model.onnx", b"x")
    assert seen[0].startswith(".")
    assert seen[0].endswith(".tmp")


def test_sha256_file_matches_hashlib_across_chunk_boundaries(tmp_path: Path) -> None:
    data = os.urandom(10_000)
    path = tmp_path / "blob"
    path.write_bytes(data)
    assert sha256_file(path, chunk=1000) == hashlib.sha256(data).hexdigest()
    assert sha256_file(path, chunk=4096) == hashlib.sha256(data).hexdigest()


# safe_join -----------------------------------------------------------------------


def test_safe_join_accepts_paths_inside_the_base(tmp_path: Path) -> None:
    assert safe_join(tmp_path, "a", "b.bin") == tmp_path.resolve() / "a" / "b.bin"
    assert safe_join(tmp_path, "a/../b") == tmp_path.resolve() / "b"


@pytest.mark.parametrize(
    "parts", [("..",), ("../x",), ("a", "..", ".."), ("/etc/passwd",), ("a\x00",)]
)
def test_safe_join_refuses_paths_that_leave_the_base(
    tmp_path: Path, parts: tuple[str, ...]
) -> None:
    with pytest.raises(UnsafePath):
        safe_join(tmp_path / "base", *parts)


def test_safe_join_refuses_symlinks_that_point_outside(tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    (tmp_path / "secret").write_text("s")
    (base / "link").symlink_to(tmp_path / "secret")
    with pytest.raises(UnsafePath, match="symlinks"):
        safe_join(base, "link")


# Staging versions ----------------------------------------------------------------


def test_a_staged_version_appears_under_its_number_on_success(store: ModelStore) -> None:
    with store.stage_version("mlp", 1) as staging:
        assert staging.parent == store.model_dir("mlp")
        assert staging.name.startswith(".staging-")
        (staging / "model.onnx").write_bytes(b"onnx")
        assert not store.version_dir("mlp", 1).exists()
    assert (store.version_dir("mlp", 1) / "model.onnx").read_bytes() == b"onnx"
    assert _entries(store.model_dir("mlp")) == ["1"]


def test_a_failed_staging_leaves_nothing_behind(store: ModelStore) -> None:
    with (
        pytest.raises(RuntimeError, match="compile failed"),
        store.stage_version("mlp", 2) as staging,
    ):
        (staging / "model.onnx").write_bytes(b"half")
        raise RuntimeError("compile failed")
    assert _entries(store.model_dir("mlp")) == []
    assert store.list_versions("mlp") == []


def test_staging_refuses_an_existing_version_before_work_starts(store: ModelStore) -> None:
    store.version_dir("mlp", 1).mkdir(parents=True)
    with pytest.raises(StoreConflict, match="already exists"), store.stage_version("mlp", 1):
        pytest.fail("the body must not run")


def test_staging_refuses_a_version_that_appeared_meanwhile_and_keeps_it(store: ModelStore) -> None:
    with pytest.raises(StoreConflict), store.stage_version("mlp", 1) as staging:
        (staging / "model.onnx").write_bytes(b"mine")
        other = store.version_dir("mlp", 1)
        other.mkdir()  # empty: os.rename alone would silently replace it
    assert _entries(store.model_dir("mlp")) == ["1"]
    assert _entries(store.version_dir("mlp", 1)) == []


def test_list_versions_returns_only_directories_triton_would_load(store: ModelStore) -> None:
    model_dir = store.model_dir("mlp")
    for name in ["10", "2", "1", "03", "0", ".staging-abc", "warmup", "٣"]:
        (model_dir / name).mkdir(parents=True)
    (model_dir / "7").write_text("a file, not a version")
    (model_dir / "config.pbtxt").write_text("")
    assert store.list_versions("mlp") == [1, 2, 10]


def test_list_versions_of_a_model_without_a_directory_is_empty(store: ModelStore) -> None:
    assert store.list_versions("unpublished") == []


def test_remove_version_deletes_it_whole(store: ModelStore) -> None:
    with store.stage_version("mlp", 1) as staging:
        (staging / "model.onnx").write_bytes(b"x")
    store.remove_version("mlp", 1)
    assert _entries(store.model_dir("mlp")) == []
    with pytest.raises(NotFound):
        store.remove_version("mlp", 1)


def test_remove_stale_staging_cleans_leftovers_in_repository_and_sources(store: ModelStore) -> None:
    model_dir = store.model_dir("mlp")
    (model_dir / "1").mkdir(parents=True)
    (model_dir / ".staging-dead").mkdir()
    (model_dir / ".staging-dead" / "model.onnx").write_bytes(b"x")
    (model_dir / ".removing-old").mkdir()
    (model_dir / ".config.pbtxt.abc.tmp").write_text("partial")
    (model_dir / "config.pbtxt").write_text("")
    (store.sources_dir / "mlp" / ".staging-dead").mkdir(parents=True)
    removed = store.remove_stale_staging("mlp")
    assert {p.name for p in removed} == {".staging-dead", ".removing-old", ".config.pbtxt.abc.tmp"}
    assert len(removed) == 4
    assert _entries(model_dir) == ["1", "config.pbtxt"]
    assert _entries(store.sources_dir / "mlp") == []


def test_remove_stale_staging_spares_recent_work_when_asked(store: ModelStore) -> None:
    fresh = store.model_dir("mlp") / ".staging-live"
    fresh.mkdir(parents=True)
    old = store.model_dir("mlp") / ".staging-old"
    old.mkdir()
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    assert store.remove_stale_staging("mlp", older_than=600) == [old]
    assert fresh.exists()


def test_remove_stale_staging_of_an_unknown_model_removes_nothing(store: ModelStore) -> None:
    assert store.remove_stale_staging("nothing-here") == []


def test_write_config_creates_the_model_directory_and_replaces_the_file(store: ModelStore) -> None:
    path = store.write_config("mlp", 'name: "mlp"\n')
    store.write_config("mlp", 'name: "mlp"\nmax_batch_size: 8\n')
    assert path == store.config_path("mlp")
    assert path.read_text() == 'name: "mlp"\nmax_batch_size: 8\n'
    assert _entries(store.model_dir("mlp")) == ["config.pbtxt"]


# Sources -------------------------------------------------------------------------


def _upload(store: ModelStore, data: bytes) -> Path:
    path = store.new_upload_path()
    path.write_bytes(data)
    return path


def test_store_source_copies_hashes_and_makes_the_file_read_only(store: ModelStore) -> None:
    data = os.urandom(3 * 1024 * 1024 + 7)
    upload = _upload(store, data)
    digest = store.store_source("mlp", 1, upload)
    stored = store.source_dir("mlp", 1) / "model.onnx"
    assert digest == hashlib.sha256(data).hexdigest()
    assert stored.read_bytes() == data
    assert stat.S_IMODE(stored.stat().st_mode) == 0o444
    sidecar = store.source_dir("mlp", 1) / "model.onnx.sha256"
    assert sidecar.read_text() == f"{digest}  model.onnx\n"
    assert upload.exists()
    assert _entries(store.sources_dir / "mlp") == ["1"]


def test_store_source_can_move_the_upload(store: ModelStore) -> None:
    upload = _upload(store, b"onnx")
    store.store_source("mlp", 2, upload, filename="model.om", move=True)
    assert not upload.exists()
    assert (store.source_dir("mlp", 2) / "model.om").read_bytes() == b"onnx"


def test_store_source_never_overwrites_a_stored_version(store: ModelStore) -> None:
    store.store_source("mlp", 1, _upload(store, b"first"))
    with pytest.raises(StoreConflict, match="already exists"):
        store.store_source("mlp", 1, _upload(store, b"second"))
    assert (store.source_dir("mlp", 1) / "model.onnx").read_bytes() == b"first"


def test_share_source_links_the_files_but_not_the_package(store: ModelStore) -> None:
    store.store_source("mlp", 1, _upload(store, b"onnx bytes"))
    (store.package_dir("mlp", 1) / "1").mkdir(parents=True)
    store.share_source("mlp", 1, 2)
    shared = store.source_dir("mlp", 2)
    assert sorted(p.name for p in shared.iterdir()) == ["model.onnx", "model.onnx.sha256"]
    assert (shared / "model.onnx").read_bytes() == b"onnx bytes"
    assert (shared / "model.onnx").stat().st_ino == (
        store.source_dir("mlp", 1) / "model.onnx"
    ).stat().st_ino
    assert not os.access(shared / "model.onnx", os.W_OK) or os.geteuid() == 0
    assert stat.S_IMODE((shared / "model.onnx").stat().st_mode) & 0o222 == 0
    with pytest.raises(StoreConflict, match="already exists"):
        store.share_source("mlp", 1, 2)
    with pytest.raises(NotFound, match="no stored source"):
        store.share_source("mlp", 7, 8)
    assert not store.source_dir("mlp", 8).exists()


def test_store_source_refuses_a_missing_upload(store: ModelStore) -> None:
    with pytest.raises(NotFound, match="Upload it again"):
        store.store_source("mlp", 1, store.uploads_dir / "gone.upload")


def test_store_source_refuses_unsafe_file_names(store: ModelStore) -> None:
    with pytest.raises(InvalidFileName):
        store.store_source("mlp", 1, _upload(store, b"x"), filename="../evil.onnx")
    assert not (store.sources_dir / "evil.onnx").exists()


def test_a_failed_store_source_leaves_no_version_and_no_staging(
    store: ModelStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_rename(src: object, dst: object) -> None:
        raise OSError("I/O error")

    monkeypatch.setattr(os, "rename", broken_rename)
    with pytest.raises(OSError, match="I/O error"):
        store.store_source("mlp", 1, _upload(store, b"x"))
    assert _entries(store.sources_dir / "mlp") == []


# Packaging ---------------------------------------------------------------------------------


def _built(tmp_path: Path) -> dict[str, Path]:
    work = tmp_path / "work"
    work.mkdir()
    (work / "model.onnx").write_bytes(b"graph")
    (work / "weights.bin").write_bytes(b"w" * 1000)
    return {"model.onnx": work / "model.onnx", "weights.bin": work / "weights.bin"}


def test_package_version_lays_out_the_package_and_installs_side_by_side(
    store: ModelStore, tmp_path: Path
) -> None:
    files = _built(tmp_path)
    package = store.package_version("m", 3, files=files, config_text="name: 'm'", install=True)

    assert package == store.package_dir("m", 3)
    assert _entries(package) == ["3", "config.pbtxt"]
    assert _entries(package / "3") == ["model.onnx", "weights.bin"]
    assert (package / "config.pbtxt").read_text() == "name: 'm'"
    assert _entries(store.version_dir("m", 3)) == ["model.onnx", "weights.bin"]
    # Hard links: the package costs no second copy of the weights.
    assert (package / "3" / "weights.bin").stat().st_ino == files["weights.bin"].stat().st_ino
    # The model's config.pbtxt is written when a version serves, not when it is packaged.
    assert not store.config_path("m").exists()


def test_package_version_without_install_leaves_the_repository_alone(
    store: ModelStore, tmp_path: Path
) -> None:
    store.package_version("m", 1, files=_built(tmp_path), config_text="x", install=False)

    assert store.package_dir("m", 1).is_dir()
    assert not store.model_dir("m").exists()


@pytest.mark.parametrize("filename", ["../x", "a/b", "", ".."])
def test_package_version_refuses_file_names_that_are_paths(
    store: ModelStore, tmp_path: Path, filename: str
) -> None:
    with pytest.raises(InvalidFileName):
        store.package_version(
            "m", 1, files={filename: _built(tmp_path)["model.onnx"]}, config_text="x", install=True
        )
    assert not store.source_dir("m", 1).exists()
    assert not store.model_dir("m").exists()


def test_package_version_refuses_to_replace_a_package(store: ModelStore, tmp_path: Path) -> None:
    files = _built(tmp_path)
    store.package_version("m", 1, files=files, config_text="first", install=False)

    with pytest.raises(StoreConflict):
        store.package_version("m", 1, files=files, config_text="second", install=False)
    assert (store.package_dir("m", 1) / "config.pbtxt").read_text() == "first"


def test_link_or_copy_copies_across_filesystems(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def cross_device(src: object, dst: object) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", cross_device)
    (tmp_path / "a").write_bytes(b"data")

    link_or_copy(tmp_path / "a", tmp_path / "b")

    assert (tmp_path / "b").read_bytes() == b"data"
    assert (tmp_path / "b").stat().st_ino != (tmp_path / "a").stat().st_ino


def test_work_dirs_are_fresh_and_removable(store: ModelStore) -> None:
    build = store.fresh_work_dir("a" * 32, "build")
    (build / "left.txt").write_text("from a previous try")

    assert _entries(store.fresh_work_dir("a" * 32, "build")) == []
    store.remove_work_dir("a" * 32)
    assert not store.work_dir("a" * 32).exists()
    with pytest.raises(InvalidFileName):
        store.fresh_work_dir("a" * 32, "..")
