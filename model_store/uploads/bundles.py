"""``.zip`` model bundles: one ``.onnx`` file and the external data files it references.

:func:`unpack_bundle` extracts a bundle defensively: the zip's end records are read and
checked before ``zipfile`` parses its directory, every member is checked (names, types,
sizes, compression ratio) before anything is written, and members are streamed out one by
one, never with ``extractall``. :func:`check_bundle_model` then inspects the model and lists
the files it does not use.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import struct
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from model_store.errors import UnsafePath
from model_store.file_io import safe_join
from model_store.text import Said, say
from model_store.uploads.errors import InvalidUpload, UploadTooLarge, human_bytes, quoted
from model_store.uploads.records import DIR_MODE, FILE_MODE, PIECE_SIZE

if TYPE_CHECKING:
    from model_store.onnx_info import OnnxInfo


#: Members larger than this whose uncompressed/compressed ratio exceeds
#: :data:`MAX_COMPRESSION_RATIO` are treated as a zip bomb. Real weights compress
#: by a few percent; a bomb of zeros by ~1000x.
MAX_COMPRESSION_RATIO = 100
RATIO_CHECK_MIN_BYTES = 1024 * 1024
_DRIVE_PATTERN = re.compile(r"[A-Za-z]:")
_BUNDLE_RULES = say("A .zip bundle must hold one .onnx file and its external data files.")
#: Central-directory bytes allowed per permitted entry: a 46-byte header, the name and extra
#: fields (zip64 sizes, timestamps). Real bundles need a few hundred; 4 KiB is generous.
CENTRAL_DIRECTORY_BYTES_PER_ENTRY = 4096
# The end records of a zip (APPNOTE.TXT 4.3.14-4.3.16), little-endian.
_EOCD = struct.Struct("<4s4H2LH")  # signature, disks, entries here/total, cd size/offset, comment
_EOCD_SIGNATURE = b"PK\x05\x06"
_ZIP64_LOCATOR = struct.Struct("<4sLQL")  # signature, disk, offset of the ZIP64 EOCD, disks
_ZIP64_LOCATOR_SIGNATURE = b"PK\x06\x07"
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")  # ..., entries here/total, cd size/offset
_ZIP64_EOCD_SIGNATURE = b"PK\x06\x06"
_MAX_ZIP_COMMENT = 0xFFFF


def _not_a_zip() -> Said:
    return say("The bundle is not a valid .zip file. %(rules)s", rules=_BUNDLE_RULES)


def _member_parts(name: str) -> tuple[str, ...]:
    """Splits a zip member name into safe relative parts, or refuses it.

    Raises:
        InvalidUpload: Absolute names, drive letters, backslashes, ``..``,
            empty or ``.`` parts, and control characters.
    """
    shown = quoted(name)
    if not name or "\\" in name or any(not ch.isprintable() for ch in name):
        raise InvalidUpload(
            say(
                "The bundle member %(member)s has a backslash, control characters or no name. "
                "%(rules)s",
                member=shown,
                rules=_BUNDLE_RULES,
            )
        )
    if name.startswith("/") or _DRIVE_PATTERN.match(name):
        raise InvalidUpload(
            say(
                "The bundle member %(member)s is an absolute path. %(rules)s",
                member=shown,
                rules=_BUNDLE_RULES,
            )
        )
    parts = tuple(name.removesuffix("/").split("/"))
    if any(part == ".." for part in parts):
        raise InvalidUpload(
            say(
                "The bundle member %(member)s climbs out with '..'. %(rules)s",
                member=shown,
                rules=_BUNDLE_RULES,
            )
        )
    if any(part in ("", ".") for part in parts):
        raise InvalidUpload(
            say(
                "The bundle member %(member)s has an empty or '.' part. %(rules)s",
                member=shown,
                rules=_BUNDLE_RULES,
            )
        )
    return parts


def _check_member_type(info: zipfile.ZipInfo) -> None:
    """Refuses symlinks, devices and the like (Unix mode in the high 16 bits of external_attr)."""
    mode = info.external_attr >> 16
    kind = stat.S_IFMT(mode)
    if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
        if kind == stat.S_IFLNK:
            message = say(
                "The bundle member %(member)s is a symbolic link. Put the real files in the "
                "zip. %(rules)s",
                member=quoted(info.filename),
                rules=_BUNDLE_RULES,
            )
        else:
            message = say(
                "The bundle member %(member)s is not a regular file. Put the real files in the "
                "zip. %(rules)s",
                member=quoted(info.filename),
                rules=_BUNDLE_RULES,
            )
        raise InvalidUpload(message)
    if info.flag_bits & 0x1:
        raise InvalidUpload(
            say(
                "The bundle member %(member)s is encrypted. Zip it without a password.",
                member=quoted(info.filename),
            )
        )


def _plan_bundle(
    members: list[zipfile.ZipInfo], max_total_bytes: int, max_files: int
) -> list[tuple[zipfile.ZipInfo, tuple[str, ...]]]:
    """Checks every member and returns the files to extract with their relative parts."""
    files: list[tuple[zipfile.ZipInfo, tuple[str, ...]]] = []
    seen: set[tuple[str, ...]] = set()
    total = 0
    for info in members:
        parts = _member_parts(info.filename)
        _check_member_type(info)
        if parts in seen:
            raise InvalidUpload(
                say(
                    "The bundle holds %(member)s twice. %(rules)s",
                    member=quoted(info.filename),
                    rules=_BUNDLE_RULES,
                )
            )
        seen.add(parts)
        if len(seen) > max_files:  # folders count too: each one costs an entry to parse
            raise InvalidUpload(
                say(
                    "The bundle holds more than %(max_files)s files and folders. %(rules)s",
                    max_files=max_files,
                    rules=_BUNDLE_RULES,
                )
            )
        if info.is_dir():
            continue
        files.append((info, parts))
        total += info.file_size
        if total > max_total_bytes:
            raise UploadTooLarge(
                say(
                    "The bundle unpacks to more than %(limit)s, the limit. Upload a smaller model.",
                    limit=human_bytes(max_total_bytes),
                )
            )
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > RATIO_CHECK_MIN_BYTES and ratio > MAX_COMPRESSION_RATIO:
            raise InvalidUpload(
                say(
                    "The bundle member %(member)s expands from %(compressed)s to %(size)s, "
                    "which looks like a zip bomb. Zip the real model files.",
                    member=quoted(info.filename),
                    compressed=human_bytes(info.compress_size),
                    size=human_bytes(info.file_size),
                )
            )
    onnx_files = [parts for _info, parts in files if parts[-1].lower().endswith(".onnx")]
    if len(onnx_files) != 1:
        if not onnx_files:
            message = say("The bundle holds no .onnx file. %(rules)s", rules=_BUNDLE_RULES)
        else:
            message = say(
                "The bundle holds %(count)s .onnx files. %(rules)s",
                count=len(onnx_files),
                rules=_BUNDLE_RULES,
            )
        raise InvalidUpload(message)
    prefixes = {parts[:i] for _info, parts in files for i in range(1, len(parts))}
    clash = prefixes & {parts for _info, parts in files}
    if clash:
        shown = "/".join(sorted(clash)[0])
        raise InvalidUpload(
            say(
                "The bundle uses %(path)s as a file and a folder. %(rules)s",
                path=repr(shown),
                rules=_BUNDLE_RULES,
            )
        )
    return files


def _find_end_record(fh: BinaryIO, file_size: int) -> int:
    """The offset of the End Of Central Directory record, found the way ``zipfile`` finds it.

    First at the very end (an archive without a comment), else the last signature within the
    longest possible comment: the same search, so that both read the same record.

    Raises:
        InvalidUpload: There is no such record, so the file is not a zip.
    """
    at = file_size - _EOCD.size
    if at >= 0:
        fh.seek(at)
        record = fh.read(_EOCD.size)
        if record.startswith(_EOCD_SIGNATURE) and record.endswith(b"\0\0"):
            return at
    start = max(file_size - _MAX_ZIP_COMMENT - _EOCD.size, 0)
    fh.seek(start)
    tail = fh.read()
    found = tail.rfind(_EOCD_SIGNATURE)
    if found < 0 or len(tail) - found < _EOCD.size:
        raise InvalidUpload(_not_a_zip())
    return start + found


def _zip64_declared(fh: BinaryIO, end_at: int) -> tuple[int, int] | None:
    """(entries, central directory bytes) from the ZIP64 end record; None if there is none.

    ``zipfile`` reads that record right before its locator; the locator also names its offset.
    Both places are read and the larger numbers kept, so that no zip reader can be shown a
    larger directory than the one checked here.
    """
    if end_at < _ZIP64_LOCATOR.size:
        return None
    fh.seek(end_at - _ZIP64_LOCATOR.size)
    signature, _disk, record_at, _disks = _ZIP64_LOCATOR.unpack(fh.read(_ZIP64_LOCATOR.size))
    if signature != _ZIP64_LOCATOR_SIGNATURE:
        return None
    declared: list[tuple[int, int]] = []
    for at in {end_at - _ZIP64_LOCATOR.size - _ZIP64_EOCD.size, record_at}:
        if not 0 <= at <= end_at:  # the record comes before the locator, never after the end
            continue
        fh.seek(at)
        record = fh.read(_ZIP64_EOCD.size)
        if len(record) == _ZIP64_EOCD.size and record.startswith(_ZIP64_EOCD_SIGNATURE):
            fields = _ZIP64_EOCD.unpack(record)
            declared.append((max(fields[6], fields[7]), fields[8]))
    if not declared:
        return None
    return max(entries for entries, _size in declared), max(size for _entries, size in declared)


def _declared_directory(zip_path: Path) -> tuple[int, int]:
    """(entries, bytes) that a zip's end records declare for its central directory.

    Reads at most the last 64 KiB of the file (the end record and a possible comment).
    """
    try:
        with zip_path.open("rb") as fh:
            end_at = _find_end_record(fh, fh.seek(0, os.SEEK_END))
            fh.seek(end_at)
            fields = _EOCD.unpack(fh.read(_EOCD.size))
            zip64 = _zip64_declared(fh, end_at)
    except OSError:
        raise InvalidUpload(_not_a_zip()) from None
    # As in zipfile, a ZIP64 record replaces the 16/32-bit fields (which then hold 0xFFFF...).
    return zip64 if zip64 is not None else (max(fields[3], fields[4]), fields[5])


def _check_declared_directory(zip_path: Path, max_files: int) -> None:
    """Refuses a zip whose end records declare too many entries or too large a directory.

    This runs before ``zipfile`` reads the central directory, which it loads whole into
    memory and turns into one object per entry: a huge one costs memory and time. zipfile
    walks the directory by its size, not by the declared count, so both are checked; the
    members are counted again once parsed, in case the count was a lie.

    Raises:
        InvalidUpload: Not a zip, more than ``max_files`` entries (files and folders), or
            more than :data:`CENTRAL_DIRECTORY_BYTES_PER_ENTRY` bytes per allowed entry.
    """
    entries, size = _declared_directory(zip_path)
    if entries > max_files:
        raise InvalidUpload(
            say(
                "The bundle declares %(entries)s entries: more than %(max_files)s files and "
                "folders, the limit. %(rules)s",
                entries=entries,
                max_files=max_files,
                rules=_BUNDLE_RULES,
            )
        )
    limit = max_files * CENTRAL_DIRECTORY_BYTES_PER_ENTRY
    if size > limit:
        raise InvalidUpload(
            say(
                "The bundle's central directory is %(size)s, more than the %(limit)s that "
                "%(max_files)s files and folders need. %(rules)s",
                size=human_bytes(size),
                limit=human_bytes(limit),
                max_files=max_files,
                rules=_BUNDLE_RULES,
            )
        )


def _extract_member(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, budget: int
) -> int:
    """Streams one member to a new file ``target``; returns the bytes written.

    Never writes more than the member declares or than ``budget`` allows
    (zipfile also stops at the declared size and checks the CRC).
    """
    target.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    written = 0
    limit = min(info.file_size, budget)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    with archive.open(info) as src, os.fdopen(fd, "wb") as dst:
        while block := src.read(PIECE_SIZE):
            written += len(block)
            if written > limit:
                raise UploadTooLarge(
                    say(
                        "The bundle member %(member)s is larger than it declares "
                        "or than the limit. Zip the real model files.",
                        member=quoted(info.filename),
                    )
                )
            dst.write(block)
        dst.flush()
        os.fsync(dst.fileno())
    return written


def unpack_bundle(
    zip_path: Path, dest_dir: Path, max_total_bytes: int, max_files: int = 64
) -> Path:
    """Extracts a ``.zip`` bundle (one ``.onnx`` plus its external data) into ``dest_dir``.

    Every member is checked before anything is written: names must be relative
    without ``..``, backslashes or drive letters; no symlinks or other special
    files; no duplicates; exactly one ``.onnx``; at most ``max_files`` entries
    (files and folders), and a central directory no larger than they need, both
    checked from the end records before ``zipfile`` parses the directory; at most
    ``max_total_bytes`` uncompressed, and no member with a zip-bomb compression
    ratio. Members are then streamed out one by one (never ``extractall``), each
    path confirmed inside ``dest_dir``. Folders inside the zip are kept. On any
    error ``dest_dir`` is left empty.

    Next, run :func:`check_bundle_model` on the returned path: it checks that
    the external data the model references is inside the bundle.

    Args:
        zip_path: The uploaded zip file.
        dest_dir: An empty or not yet existing directory to extract into.
        max_total_bytes: Limit on the sum of the members' uncompressed sizes.
        max_files: Limit on the number of entries, files and folders together.

    Returns:
        The path of the extracted ``.onnx`` file.

    Raises:
        InvalidUpload: Not a zip, or a layout or member that is not allowed.
        UploadTooLarge: The content is larger than ``max_total_bytes``.
    """
    dest = Path(dest_dir)
    dest.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise ValueError(f"{dest} must be empty")
    _check_declared_directory(Path(zip_path), max_files)
    try:
        archive = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        raise InvalidUpload(_not_a_zip()) from None
    try:
        with archive:
            plan = _plan_bundle(archive.infolist(), max_total_bytes, max_files)
            budget = max_total_bytes
            onnx_path: Path | None = None
            for info, parts in plan:
                target = safe_join(dest, *parts)
                budget -= _extract_member(archive, info, target, budget)
                if parts[-1].lower().endswith(".onnx"):
                    onnx_path = target
    except (zipfile.BadZipFile, EOFError, NotImplementedError, RuntimeError) as exc:
        _empty_dir(dest)
        raise InvalidUpload(
            say(
                "The bundle cannot be unpacked (%(error)s). %(rules)s",
                error=str(exc),
                rules=_BUNDLE_RULES,
            )
        ) from None
    except UnsafePath as exc:
        _empty_dir(dest)
        raise InvalidUpload(
            say("%(problem)s %(rules)s", problem=exc.message, rules=_BUNDLE_RULES)
        ) from None
    except BaseException:
        _empty_dir(dest)
        raise
    assert onnx_path is not None  # _plan_bundle guarantees exactly one
    return onnx_path


def _empty_dir(directory: Path) -> None:
    """Removes everything inside ``directory`` (not the directory itself)."""
    for entry in directory.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


@dataclass
class BundleCheck:
    """What :func:`check_bundle_model` found.

    Attributes:
        info: The model's description from ``inspect_onnx``.
        unused_files: Bundle files (relative to the bundle root) that the model
            does not reference; harmless, but they will not be stored with it.
        warnings: Plain-words notes for the user, one per unused file.
    """

    info: OnnxInfo
    unused_files: list[str] = field(default_factory=list)
    warnings: list[Said] = field(default_factory=list)


def check_bundle_model(onnx_path: Path, bundle_dir: Path | None = None) -> BundleCheck:
    """Inspects an unpacked bundle's model and lists files in the bundle it does not use.

    ``inspect_onnx`` does the safety work: every external data location must be a
    file inside the model's folder and long enough for the bytes it claims.

    Args:
        onnx_path: The ``.onnx`` returned by :func:`unpack_bundle`.
        bundle_dir: The bundle's root (``dest_dir``); defaults to the model's folder.

    Returns:
        The inspection and the unused files, with warnings to show.

    Raises:
        InvalidModel: The .onnx is not a readable model.
        UnsafeExternalData: External data points outside the model's folder.
        MissingExternalData: External data the model needs is not in the bundle.
    """
    from model_store.onnx_info import inspect_onnx  # onnx is heavy; only load it when needed

    onnx_path = Path(onnx_path)
    root = Path(bundle_dir) if bundle_dir is not None else onnx_path.parent
    info = inspect_onnx(onnx_path)
    used = {onnx_path.resolve()}
    used.update((onnx_path.parent / location).resolve() for location in info.external_data_files)
    unused = sorted(
        path.relative_to(root).as_posix()
        for path in root.rglob("*")
        if path.is_file() and path.resolve() not in used
    )
    warnings: list[Said] = [
        say(
            "The bundle file %(name)s is not used by the model and will not be stored.",
            name=repr(name),
        )
        for name in unused
    ]
    return BundleCheck(info=info, unused_files=unused, warnings=warnings)
