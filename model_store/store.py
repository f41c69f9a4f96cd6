"""The on-disk model store: uploads, immutable sources and the Triton repository.

Layout under the root (Triton's rules for ``repository/``: docs/triton.md#repository-layout)::

    uploads/      incoming files, streamed to disk
    sources/      <model>/<version>/<file>, read-only once stored, with a .sha256 beside it
    repository/   what Triton reads: <model>/config.pbtxt and <model>/<version>/<artifact>
    backends/     the backend directory handed to the embedded Triton
    work/         <job id>/: a job's scratch directory, removed when the job ends
    logs/         <job id>.log: a job's full log, kept as long as the job

Every path is built from names that passed :mod:`model_store.names`, and
everything Triton can see is written atomically (temp file + ``os.replace``,
staging directory + rename), so Triton never reads a half-written file.
The file primitives for that live in :mod:`model_store.file_io`, staging directories and
the debris they can leave in :mod:`model_store.staging`; this module holds the layout.

Example:
    >>> store = ModelStore(Path("/var/lib/hub")); store.ensure_layout()
    >>> with store.stage_version("resnet", 3) as staging:
    ...     shutil.copyfile(optimised_onnx, staging / "model.onnx")
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from model_store.errors import NotFound, StoreConflict, UnsafePath
from model_store.file_io import (
    DIR_MODE,
    READ_ONLY_MODE,
    _copy_hashing,
    atomic_write_text,
    fsync_dir,
    link_or_copy,
)
from model_store.names import validate_file_name, validate_model_name, validate_version
from model_store.staging import (
    REMOVING_PREFIX,
    _is_leftover,
    _new_staging_dir,
    _publish_dir,
    _remove_entry,
)
from model_store.text import say

CONFIG_FILE = "config.pbtxt"


class ModelStore:
    """The store rooted at one directory; all disk access of the hub goes through it.

    Args:
        root: The store's root directory (``MODEL_STORE_ROOT``); resolved once here.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()

    # Layout --------------------------------------------------------------------

    @property
    def uploads_dir(self) -> Path:
        """Incoming files, streamed to disk while they arrive."""
        return self.root / "uploads"

    @property
    def sources_dir(self) -> Path:
        """Immutable originals, by model and version."""
        return self.root / "sources"

    @property
    def repository_dir(self) -> Path:
        """Exactly what Triton reads (``--model-repository``)."""
        return self.root / "repository"

    @property
    def backends_dir(self) -> Path:
        """The backend directory handed to the embedded Triton (``--backend-directory``)."""
        return self.root / "backends"

    def ensure_layout(self) -> None:
        """Creates the root and its four subdirectories if they are missing."""
        for directory in (
            self.uploads_dir,
            self.sources_dir,
            self.repository_dir,
            self.backends_dir,
        ):
            directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)

    def model_dir(self, name: str) -> Path:
        """Returns ``repository/<name>`` after checking the name."""
        return self.repository_dir / validate_model_name(name)

    def config_path(self, name: str) -> Path:
        """Returns ``repository/<name>/config.pbtxt`` after checking the name."""
        return self.model_dir(name) / CONFIG_FILE

    def version_dir(self, name: str, version: int | str) -> Path:
        """Returns ``repository/<name>/<version>`` after checking both."""
        return self.model_dir(name) / str(validate_version(version))

    def source_dir(self, name: str, version: int | str) -> Path:
        """Returns ``sources/<name>/<version>`` after checking both."""
        return self.sources_dir / validate_model_name(name) / str(validate_version(version))

    def new_upload_path(self) -> Path:
        """Returns a fresh, unused path under ``uploads/`` for an incoming file."""
        self.uploads_dir.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        return self.uploads_dir / f"{secrets.token_hex(16)}.upload"

    # Repository ----------------------------------------------------------------

    @contextlib.contextmanager
    def stage_version(self, name: str, version: int | str) -> Iterator[Path]:
        """Yields an empty staging directory that becomes ``<name>/<version>`` on success.

        The staging directory sits inside the model directory (same
        filesystem, so the final rename is atomic) under a name Triton
        ignores. On a clean exit its contents are flushed, it is renamed to
        the version number and the model directory is flushed; on an
        exception it is removed and the exception propagates.

        Args:
            name: Model name.
            version: Version number to create.

        Yields:
            The staging directory to fill.

        Raises:
            StoreConflict: If the version already exists (before or after staging).
        """
        target = self.version_dir(name, version)
        what = say(
            "Version %(version)s of model %(model)s",
            version=target.name,
            model=repr(target.parent.name),
        )
        if target.exists():
            raise StoreConflict(
                say("%(what)s already exists. Pick a new version number.", what=what)
            )
        staging = _new_staging_dir(target.parent)
        try:
            yield staging
            _publish_dir(staging, target, what)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def package_dir(self, name: str, version: int | str) -> Path:
        """``sources/<name>/<version>/package``: a packaged version kept beside its source.

        Every target's packaged version (its Triton version directory and config) lives here;
        targets whose versions sit side by side in the repository are also installed there,
        while ``npu_ge`` versions are swapped into the repository only when they serve.
        """
        return self.source_dir(name, version) / "package"

    @contextlib.contextmanager
    def stage_package(self, name: str, version: int | str) -> Iterator[Path]:
        """Yields an empty staging directory that becomes :meth:`package_dir` on success."""
        target = self.package_dir(name, version)
        what = say(
            "The package of version %(version)s of model %(model)s",
            version=version,
            model=repr(name),
        )
        if target.exists():
            raise StoreConflict(say("%(what)s already exists.", what=what))
        staging = _new_staging_dir(target.parent)
        try:
            yield staging
            _publish_dir(staging, target, what)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def package_version(
        self,
        name: str,
        version: int,
        *,
        files: Mapping[str, Path],
        config_text: str,
        install: bool,
    ) -> Path:
        """Lays out a built version as Triton reads it, and returns its package directory.

        The package (:meth:`package_dir`) gets ``<version>/<file>`` for each of ``files``
        (name in the version directory -> the built file) and ``config.pbtxt``. With
        ``install`` (targets whose versions sit side by side) the files also become the
        repository's ``<name>/<version>``; the model's config.pbtxt there is written when a
        version serves, not here. Both appear whole or not at all (staged, flushed, renamed);
        files are hard-linked where the filesystem allows, so a package costs no second copy.

        Raises:
            StoreConflict: If the package or the repository version exists already.
        """
        for filename in files:
            validate_file_name(filename)
        with self.stage_package(name, version) as staging:
            (staging / str(version)).mkdir(mode=DIR_MODE)
            for filename, src in files.items():
                link_or_copy(src, staging / str(version) / filename)
            atomic_write_text(staging / "config.pbtxt", config_text)
        if install:
            with self.stage_version(name, version) as staging:
                for filename, src in files.items():
                    link_or_copy(src, staging / filename)
        return self.package_dir(name, version)

    def work_dir(self, job_id: str) -> Path:
        """A job's scratch directory, on the store's filesystem so results can be renamed in."""
        return self.root / "work" / _check_job_id(job_id)

    def fresh_work_dir(self, job_id: str, *parts: str) -> Path:
        """An empty ``work/<job id>/<parts...>`` (whatever a previous try left there is gone)."""
        path = self.work_dir(job_id).joinpath(*(validate_file_name(p) for p in parts))
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(mode=DIR_MODE, parents=True)
        return path

    def remove_work_dir(self, job_id: str) -> None:
        """Deletes a job's scratch directory (a no-op when it is gone already)."""
        shutil.rmtree(self.work_dir(job_id), ignore_errors=True)

    def remove_source(self, name: str, version: int | str) -> None:
        """Deletes ``sources/<name>/<version>``: the upload, its package and notes."""
        shutil.rmtree(self.source_dir(name, version), ignore_errors=True)

    def job_log_path(self, job_id: str) -> Path:
        """``logs/<job id>.log``: every line a job logged (its database rows are capped).

        Outside the work directory, which goes when the job ends; the log stays with the job.
        """
        return self.root / "logs" / f"{_check_job_id(job_id)}.log"

    def write_config(self, name: str, text: str) -> Path:
        """Writes ``repository/<name>/config.pbtxt`` atomically (creating the model directory).

        Args:
            name: Model name.
            text: The whole config, e.g. from :func:`model_store.config.render_pbtxt`.

        Returns:
            The path written.
        """
        path = self.config_path(name)
        path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        atomic_write_text(path, text)
        return path

    def list_versions(self, name: str) -> list[int]:
        """Returns the version numbers present in the repository for ``name``, ascending.

        Only directories Triton would load count (plain integers without
        leading zeros); staging directories and files are skipped. A model
        without a directory yet has no versions.
        """
        model_dir = self.model_dir(name)
        if not model_dir.is_dir():
            return []
        return sorted(int(p.name) for p in model_dir.iterdir() if _is_version_dir(p))

    def remove_version(self, name: str, version: int | str) -> None:
        """Removes a version directory from the repository in one visible step.

        It is first renamed to a hidden name (atomic, so Triton sees the
        version vanish whole), then deleted.

        Raises:
            NotFound: If the version is not in the repository.
        """
        target = self.version_dir(name, version)
        if not target.is_dir():
            raise NotFound(
                say(
                    "Version %(version)s of model %(model)s is not in the repository.",
                    version=target.name,
                    model=repr(name),
                )
            )
        doomed = target.parent / f"{REMOVING_PREFIX}{secrets.token_hex(8)}"
        target.rename(doomed)
        fsync_dir(target.parent)
        shutil.rmtree(doomed)

    def remove_stale_staging(self, name: str, older_than: float = 0.0) -> list[Path]:
        """Deletes leftovers of interrupted writes for one model, in repository and sources.

        Leftovers are staging directories, half-removed versions and temp
        files from :func:`~model_store.file_io.atomic_write_bytes`. Call it with the model's lock
        held, or pass ``older_than`` so that work in progress is spared.

        Args:
            name: Model name.
            older_than: Only remove entries last modified at least this many seconds ago.

        Returns:
            The paths removed.
        """
        cutoff = time.time() - older_than
        removed: list[Path] = []
        parents = (self.model_dir(name), self.sources_dir / validate_model_name(name))
        for parent in parents:
            if not parent.is_dir():
                continue
            for entry in sorted(parent.iterdir()):
                if _is_leftover(entry) and entry.lstat().st_mtime <= cutoff:
                    _remove_entry(entry)
                    removed.append(entry)
        return removed

    # Sources -------------------------------------------------------------------

    def store_source(
        self,
        name: str,
        version: int | str,
        src_path: Path,
        filename: str = "model.onnx",
        move: bool = False,
    ) -> str:
        """Copies an uploaded file into ``sources/<name>/<version>/<filename>``.

        The copy is hashed while it is written (constant memory), made
        read-only, and a ``<filename>.sha256`` line in ``sha256sum`` format is
        written beside it. The version directory appears in one rename, and a
        stored version is never overwritten.

        Args:
            name: Model name.
            version: Version number.
            src_path: The uploaded file (e.g. from :meth:`new_upload_path`).
            filename: Name of the stored file.
            move: Delete ``src_path`` after a successful copy.

        Returns:
            The sha256 of the stored file, as hex.

        Raises:
            StoreConflict: If that source version already exists.
            NotFound: If ``src_path`` is not a file.
        """
        filename = validate_file_name(filename)
        src = Path(src_path)
        target = self.source_dir(name, version)
        what = say(
            "Source version %(version)s of model %(model)s",
            version=target.name,
            model=repr(target.parent.name),
        )
        if not src.is_file():
            raise NotFound(
                say("The uploaded file %(name)s is gone. Upload it again.", name=repr(src.name))
            )
        if target.exists():
            raise StoreConflict(
                say("%(what)s already exists. Pick a new version number.", what=what)
            )
        staging = _new_staging_dir(target.parent)
        try:
            digest = _copy_hashing(src, staging / filename)
            (staging / f"{filename}.sha256").write_text(f"{digest}  {filename}\n")
            for path in staging.iterdir():
                path.chmod(READ_ONLY_MODE)
            _publish_dir(staging, target, what)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        if move:
            src.unlink()
        return digest

    def share_source(self, name: str, version: int | str, new_version: int | str) -> None:
        """Gives ``new_version`` the source of ``version`` (a config revision): its files
        hard-linked where the filesystem allows (sources are read-only, so sharing the bytes
        is safe), copied otherwise, without the package. Appears in one rename.

        Raises:
            StoreConflict: If ``new_version``'s source exists already.
            NotFound: If ``version`` has no source.
        """
        src = self.source_dir(name, version)
        target = self.source_dir(name, new_version)
        what = say(
            "Source version %(version)s of model %(model)s",
            version=target.name,
            model=repr(target.parent.name),
        )
        if not src.is_dir():
            raise NotFound(
                say(
                    "Version %(version)s of %(model)s has no stored source any more.",
                    version=version,
                    model=repr(name),
                )
            )
        if target.exists():
            raise StoreConflict(
                say("%(what)s already exists. Pick a new version number.", what=what)
            )
        staging = _new_staging_dir(target.parent)
        try:
            for path in src.iterdir():
                if path.is_file() and not path.is_symlink():
                    link_or_copy(path, staging / path.name)
                    (staging / path.name).chmod(READ_ONLY_MODE)
            _publish_dir(staging, target, what)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _check_job_id(job_id: str) -> str:
    """Returns ``job_id`` if it is safe as one path component (letters and digits)."""
    if not job_id.isalnum() or len(job_id) > 64:
        raise UnsafePath(say("%(job)s is not a job id.", job=repr(job_id)))
    return job_id


def _is_version_dir(path: Path) -> bool:
    """Tells whether Triton would treat ``path`` as a version directory."""
    text = path.name
    return text.isascii() and text.isdigit() and not text.startswith("0") and path.is_dir()
