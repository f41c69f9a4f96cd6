"""Unpacking a package tar that came from elsewhere, trusting nothing in it.

:func:`safe_extract` is the inverse of :func:`~model_store.package_tar.build.package_tar` for
a host that received the tar (a node, or a person handing it to another Triton). In order:

1. the file's SHA-256 must be the expected one (hashed from the same open file that is then
   read, so swapping the file in between changes nothing) and its size under the limit;
2. it must be an uncompressed tar (no decompression bombs) of at most ``max_entries``
   entries, each a plain file or directory (no links, devices, FIFOs or sparse files) whose
   name is relative, without ``..``, and fits the layout of
   :mod:`~model_store.package_tar.layout` (one model, one version, its files, config.pbtxt);
3. config.pbtxt must parse and name that model and pin that version;
4. only then is anything written: the files are created new (never through a symlink) in an
   empty staging directory, copied in pieces, flushed, and given the time of writing (not the
   tar's fixed one, so that Triton sees the files as new).

On any refusal or failure nothing is left in the staging directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from model_store.config import ModelConfig, parse_pbtxt
from model_store.errors import InvalidConfig, ModelStoreError
from model_store.file_io import CHUNK_SIZE, DIR_MODE, FILE_MODE, fsync_dir, safe_join
from model_store.names import validate_file_name, validate_model_name, validate_version
from model_store.package_tar.layout import (
    CONFIG_FILE,
    PackageTarError,
    PackageTarMismatch,
    PackageTarTooLarge,
    UnsafePackageTar,
)
from model_store.text import say
from model_store.uploads.errors import human_bytes

#: Defaults for :func:`safe_extract`'s limits: an OM or ONNX with its external data is a few
#: GiB and a few hundred files at most.
DEFAULT_MAX_BYTES = 64 * 1024**3
DEFAULT_MAX_ENTRIES = 10_000
#: A config.pbtxt is a few KiB; this is generous and keeps its parse cheap.
MAX_CONFIG_BYTES = 4 * 1024 * 1024
_SHA256 = re.compile(r"[0-9a-f]{64}")
_FILE_TYPES = (tarfile.REGTYPE, tarfile.AREGTYPE)
_KIND = {
    tarfile.SYMTYPE: say("a symbolic link"),
    tarfile.LNKTYPE: say("a hard link"),
    tarfile.CHRTYPE: say("a character device"),
    tarfile.BLKTYPE: say("a block device"),
    tarfile.FIFOTYPE: say("a FIFO"),
    tarfile.CONTTYPE: say("a contiguous file"),
    tarfile.GNUTYPE_SPARSE: say("a sparse file"),
}


@dataclass(frozen=True)
class ExtractedPackage:
    """What :func:`safe_extract` wrote: ``model_dir`` is ``<dest>/<model>``, complete."""

    model: str
    version: int
    model_dir: Path
    files: list[str]
    config: ModelConfig = field(repr=False)


@dataclass
class _Plan:
    """The checked entries, before anything is written."""

    model: str | None = None
    version: int | None = None
    config: tarfile.TarInfo | None = None
    files: dict[str, tarfile.TarInfo] = field(default_factory=dict)
    total: int = 0


def safe_extract(
    tar_path: Path,
    dest: Path,
    expected_sha256: str,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_entries: int = DEFAULT_MAX_ENTRIES,
) -> ExtractedPackage:
    """Checks a package tar and unpacks it into ``dest`` as ``<model>/...``.

    Args:
        tar_path: The tar file received.
        dest: An empty (or not yet existing) staging directory, on the file system of the
            repository the model directory will be renamed into.
        expected_sha256: The SHA-256 the sender published, as hex.
        max_bytes: Largest tar, and largest total of the files it unpacks to.
        max_entries: Most entries the tar may hold.

    Returns:
        The model, version, the unpacked ``<dest>/<model>`` and its parsed config.

    Raises:
        PackageTarMismatch: The file's SHA-256 is not ``expected_sha256``.
        PackageTarTooLarge: The tar or its contents are over ``max_bytes``, or it has more
            than ``max_entries`` entries.
        UnsafePackageTar: An entry is a link, a device or another special file, or its name
            is absolute or climbs out with ``..``.
        PackageTarError: Not an uncompressed tar, or not the package layout (another
            model, a second version, a missing or unparsable config.pbtxt, ...).
    """
    with checked_tar(tar_path, expected_sha256, max_bytes) as tar:
        plan = _plan(tar, max_bytes, max_entries)
        config = _checked_config(tar, plan)
        return _write(tar, plan, config, Path(dest))


@contextlib.contextmanager
def checked_tar(tar_path: Path, expected_sha256: str, max_bytes: int) -> Iterator[tarfile.TarFile]:
    """The tar at ``tar_path`` opened for reading once its size and SHA-256 are checked.

    The hash is taken from the same open file that is then read, so swapping the file in
    between changes nothing.

    Raises:
        PackageTarMismatch, PackageTarTooLarge, PackageTarError: As :func:`safe_extract`.
    """
    expected = expected_sha256.strip().lower()
    if not _SHA256.fullmatch(expected):
        raise PackageTarError(say("The expected SHA-256 must be 64 hexadecimal digits."))
    with Path(tar_path).open("rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > max_bytes:
            raise PackageTarTooLarge(
                say(
                    "The tar is %(size)s; the limit is %(limit)s.",
                    size=human_bytes(size),
                    limit=human_bytes(max_bytes),
                )
            )
        actual = _sha256_of(fh)
        if actual != expected:
            raise PackageTarMismatch(
                say(
                    "The tar's SHA-256 is %(actual)s, not the expected %(expected)s: it was "
                    "damaged or altered on the way.",
                    actual=actual,
                    expected=expected,
                )
            )
        fh.seek(0)
        try:
            with tarfile.open(fileobj=fh, mode="r:") as tar:
                yield tar
        except tarfile.TarError as exc:
            raise PackageTarError(
                say(
                    "The file is not an uncompressed tar, or it is truncated (%(error)s).",
                    error=str(exc),
                )
            ) from None


def _sha256_of(fh: BinaryIO) -> str:
    digest = hashlib.sha256()
    while block := fh.read(CHUNK_SIZE):
        digest.update(block)
    return digest.hexdigest()


def _plan(tar: tarfile.TarFile, max_bytes: int, max_entries: int) -> _Plan:
    plan = _Plan()
    # Headers are read one by one, so a tar of a million entries stops at the limit.
    for count, member in enumerate(tar, start=1):
        if count > max_entries:
            raise PackageTarTooLarge(
                say("The tar has more than %(max_entries)s entries.", max_entries=max_entries)
            )
        _add(plan, member, max_bytes)
    if plan.model is None or plan.version is None or plan.config is None:
        raise PackageTarError(
            say(
                "The tar is not a package: it must hold <model>/config.pbtxt and "
                "<model>/<version>/ with the version's files."
            )
        )
    return plan


def _add(plan: _Plan, member: tarfile.TarInfo, max_bytes: int) -> None:
    """Checks one entry and records it in ``plan``."""
    parts = _name_parts(member.name)
    directory = member.type == tarfile.DIRTYPE
    if not directory and member.type not in _FILE_TYPES:
        kind = _KIND.get(member.type) or say("an entry of type %(type)s", type=repr(member.type))
        raise UnsafePackageTar(
            say(
                "The tar entry %(name)s is %(kind)s; a package holds only plain files and "
                "directories.",
                name=repr(member.name),
                kind=kind,
            )
        )
    if member.size < 0 or (not directory and member.size > max_bytes - plan.total):
        raise PackageTarTooLarge(
            say(
                "The tar's files add up to more than %(limit)s (at %(name)s).",
                limit=human_bytes(max_bytes),
                name=repr(member.name),
            )
        )
    try:
        _place(plan, parts, member, directory)
    except ModelStoreError as exc:
        if isinstance(exc, PackageTarError):
            raise
        raise PackageTarError(
            say(
                "The tar entry %(name)s is not part of a package: %(problem)s",
                name=repr(member.name),
                problem=exc.message,
            )
        ) from None
    plan.total += 0 if directory else member.size


def _name_parts(name: str) -> list[str]:
    """Splits an entry name, refusing absolute names, ``..`` and anything odd."""
    if not name or name.startswith("/") or "\\" in name or "\0" in name:
        raise UnsafePackageTar(
            say(
                "The tar entry %(name)s has an absolute or unusual name; a package uses "
                "<model>/... names only.",
                name=repr(name),
            )
        )
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise UnsafePackageTar(
            say(
                "The tar entry %(name)s contains an empty, '.' or '..' part; a package uses "
                "<model>/... names only.",
                name=repr(name),
            )
        )
    return parts


def _place(plan: _Plan, parts: list[str], member: tarfile.TarInfo, directory: bool) -> None:
    model = validate_model_name(parts[0])
    if plan.model is None:
        plan.model = model
    elif plan.model != model:
        raise PackageTarError(
            say(
                "The tar holds two models, %(first)s and %(second)s; a package holds one.",
                first=repr(plan.model),
                second=repr(model),
            )
        )
    if len(parts) == 1 and directory:
        return
    if len(parts) == 2 and parts[1] == CONFIG_FILE and not directory:
        if plan.config is not None:
            raise PackageTarError(say("The tar holds %(name)s twice.", name=repr(member.name)))
        plan.config = member
        return
    if len(parts) not in (2, 3) or (len(parts) == 2) != directory:
        raise PackageTarError(
            say(
                "The tar entry %(name)s is not <model>/config.pbtxt, "
                "<model>/<version>/ or <model>/<version>/<file>.",
                name=repr(member.name),
            )
        )
    version = validate_version(parts[1])
    if plan.version is None:
        plan.version = version
    elif plan.version != version:
        raise PackageTarError(
            say(
                "The tar holds versions %(first)s and %(second)s; a package holds one.",
                first=plan.version,
                second=version,
            )
        )
    if directory:
        return
    filename = validate_file_name(parts[2])
    if filename in plan.files:
        raise PackageTarError(say("The tar holds %(name)s twice.", name=repr(member.name)))
    plan.files[filename] = member


def _checked_config(tar: tarfile.TarFile, plan: _Plan) -> ModelConfig:
    assert plan.config is not None and plan.model is not None and plan.version is not None
    if plan.config.size > MAX_CONFIG_BYTES:
        raise PackageTarTooLarge(
            say(
                "config.pbtxt is %(size)s; the limit is %(limit)s.",
                size=human_bytes(plan.config.size),
                limit=human_bytes(MAX_CONFIG_BYTES),
            )
        )
    source = tar.extractfile(plan.config)
    assert source is not None  # a regular file, checked in _add
    try:
        config = parse_pbtxt(source.read().decode("utf-8"))
    except UnicodeDecodeError:
        raise PackageTarError(say("config.pbtxt in the tar is not UTF-8 text.")) from None
    except InvalidConfig as exc:
        raise PackageTarError(say("The tar's %(problem)s", problem=exc.message)) from None
    if config.name != plan.model:
        raise PackageTarError(
            say(
                "config.pbtxt names the model %(named)s, but the tar holds %(model)s.",
                named=repr(config.name),
                model=repr(plan.model),
            )
        )
    # Only an ensemble's version directory is empty: its steps run other models.
    if not plan.files and config.platform != "ensemble":
        raise PackageTarError(
            say(
                "The tar holds no files for version %(version)s; only an ensemble has none.",
                version=plan.version,
            )
        )
    if plan.version not in (config.version_policy_specific or []):
        raise PackageTarError(
            say(
                "config.pbtxt does not pin version %(version)s (its version_policy names "
                "%(pinned)s), so Triton would not serve it.",
                version=plan.version,
                pinned=str(config.version_policy_specific or "none"),
            )
        )
    return config


def _write(tar: tarfile.TarFile, plan: _Plan, config: ModelConfig, dest: Path) -> ExtractedPackage:
    assert plan.config is not None and plan.model is not None and plan.version is not None
    try:
        dest.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    except FileExistsError:
        raise PackageTarError(
            say("%(dest)s is a file; unpack into an empty directory.", dest=str(dest))
        ) from None
    if dest.is_symlink() or any(dest.iterdir()):
        raise PackageTarError(
            say(
                "The staging directory %(dest)s is not empty; unpack into an empty one.",
                dest=str(dest),
            )
        )
    model_dir = safe_join(dest, plan.model)
    version_dir = model_dir / str(plan.version)
    try:
        version_dir.mkdir(mode=DIR_MODE, parents=True)
        copy_entry(tar, plan.config, safe_join(model_dir, CONFIG_FILE))
        for filename, member in sorted(plan.files.items()):
            copy_entry(tar, member, safe_join(version_dir, filename))
        fsync_dir(version_dir)
        fsync_dir(model_dir)
        fsync_dir(dest)
    except BaseException:
        shutil.rmtree(model_dir, ignore_errors=True)
        raise
    return ExtractedPackage(plan.model, plan.version, model_dir, sorted(plan.files), config)


def copy_entry(tar: tarfile.TarFile, member: tarfile.TarInfo, path: Path) -> None:
    """Creates ``path`` new (never through a symlink) and copies the entry into it."""
    source = tar.extractfile(member)
    assert source is not None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, FILE_MODE)
    with os.fdopen(fd, "wb") as out:
        remaining = member.size
        while remaining > 0:
            block = source.read(min(CHUNK_SIZE, remaining))
            if not block:
                raise PackageTarError(say("The tar ends inside %(name)s.", name=repr(member.name)))
            out.write(block)
            remaining -= len(block)
        out.flush()
        os.fchmod(out.fileno(), FILE_MODE)
        os.fsync(out.fileno())
