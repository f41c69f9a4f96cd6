"""Reading an existing Triton model repository: what each model directory holds.

:func:`scan_repository` walks a repository a team already serves (Triton's layout:
``<model>/config.pbtxt`` and ``<model>/<version>/<files>``, docs/triton.md#repository-layout)
and describes every model directory: its config parsed with Triton's own protobuf schema (or,
for an ONNX model without one, the config the onnxruntime target would generate), its
versions with the SHA-256 of every file, its backend, the target it would be adopted into and
the problems found. It only reads: nothing in the repository is changed, and symbolic links
are followed only when they stay inside the repository.

Example:
    >>> scan = scan_repository(Path("/srv/triton/models"))
    >>> [(m.directory, m.target, [v.number for v in m.versions]) for m in scan.models]
    [('resnet', 'onnxruntime', [1, 2]), ('tokenizer', 'external', [1])]
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from model_store.adopt.found import (
    Problem,
    RepositoryScan,
    ScannedFile,
    ScannedModel,
    ScannedVersion,
)
from model_store.adopt.understand import understand_model
from model_store.errors import ModelStoreError
from model_store.file_io import sha256_file
from model_store.store import CONFIG_FILE
from model_store.text import Said, say

#: Refuse a tree larger than this many directory entries: a typo'd PATH ("/") must fail fast
#: instead of hashing a whole disk. Real repositories hold a few files per version.
MAX_ENTRIES = 20_000


class ScanRefused(ModelStoreError):
    """PATH is not something the hub will scan (missing, not a directory, far too large)."""

    code = "scan_refused"


# Walking safely ------------------------------------------------------------------------


class _Budget:
    """Counts directory entries across the scan and refuses past :data:`MAX_ENTRIES`."""

    def __init__(self, limit: int) -> None:
        self.left = limit

    def spend(self, root: Path) -> None:
        self.left -= 1
        if self.left < 0:
            raise ScanRefused(
                say(
                    "%(root)s holds more than %(limit)s files and folders; that is not a Triton "
                    "model repository (check PATH), or adopt its model folders one parent at "
                    "a time.",
                    root=str(root),
                    limit=MAX_ENTRIES,
                )
            )


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def _resolve_entry(entry: Path, root: Path) -> tuple[Path | None, Said]:
    """The real path of ``entry`` if it may be read, else (None, why not).

    A symbolic link is followed only when its target lies inside ``root``: a repository must
    not make the hub copy ``/etc/passwd`` or loop forever.
    """
    try:
        info = entry.lstat()
    except OSError as exc:
        return None, say("cannot be read (%(error)s)", error=exc.strerror)
    if not stat.S_ISLNK(info.st_mode):
        return entry, ""
    target = Path(os.path.realpath(entry))
    if not _inside(target, root):
        return None, say(
            "is a symbolic link that points outside the repository; it is not followed"
        )
    if not target.exists():
        return None, say("is a broken symbolic link")
    return target, ""


def list_files(folder: Path, root: Path, budget: _Budget) -> tuple[list[Path], list[Said]]:
    """Every regular file under ``folder`` (recursively, safely), and what was skipped why."""
    found: list[Path] = []
    skipped: list[Said] = []
    pending = [folder]
    while pending:
        current = pending.pop()
        try:
            entries = sorted(current.iterdir())
        except OSError as exc:
            skipped.append(
                say(
                    "%(name)s: cannot be listed (%(error)s)",
                    name=str(current.relative_to(folder)),
                    error=exc.strerror,
                )
            )
            continue
        for entry in entries:
            budget.spend(root)
            real, why = _resolve_entry(entry, root)
            shown = entry.relative_to(folder).as_posix()
            if real is None:
                skipped.append(say("%(name)s %(why)s", name=shown, why=why))
            elif real.is_dir():
                if real != entry:
                    skipped.append(
                        say(
                            "%(name)s is a symbolic link to a folder; it is not followed",
                            name=shown,
                        )
                    )
                else:
                    pending.append(entry)
            elif real.is_file():
                found.append(entry)
            else:
                skipped.append(say("%(name)s is not a regular file", name=shown))
    return sorted(found), skipped


def _is_version_name(text: str) -> bool:
    """Triton loads only plain integers without a leading zero (docs/triton.md)."""
    return text.isascii() and text.isdigit() and not text.startswith("0") and len(text) <= 10


def _scan_version(
    number: int, folder: Path, root: Path, budget: _Budget, *, hash_files: bool
) -> ScannedVersion:
    files, skipped = list_files(folder, root, budget)
    scanned = []
    for path in files:
        if path.name.startswith("."):
            skipped.append(
                say(
                    "%(name)s is hidden; it is not copied",
                    name=path.relative_to(folder).as_posix(),
                )
            )
            continue
        real = Path(os.path.realpath(path))
        digest = sha256_file(real) if hash_files else ""
        scanned.append(
            ScannedFile(path.relative_to(folder).as_posix(), real.stat().st_size, digest)
        )
    version = ScannedVersion(number, scanned)
    for line in skipped:
        version.problems.append(
            Problem(
                "info",
                "skipped_entry",
                say("%(version)s/%(skipped)s.", version=number, skipped=line),
            )
        )
    if not scanned:
        version.problems.append(
            Problem(
                "error",
                "empty_version",
                say("Version %(version)s holds no files.", version=number),
            )
        )
    return version


def _version_digest(version: ScannedVersion, config_text: str) -> str:
    lines = [f"{f.relpath}\0{f.sha256}" for f in version.files]
    lines.append(f"{CONFIG_FILE}\0{hashlib.sha256(config_text.encode()).hexdigest()}")
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def scan_model(path: Path, root: Path, budget: _Budget, *, hash_files: bool = True) -> ScannedModel:
    """Describes one model directory (its versions, config, backend, target and problems)."""
    model = ScannedModel(directory=path.name, path=path)
    extras: list[str] = []
    try:
        entries = sorted(path.iterdir())
    except OSError as exc:
        model.problems.append(
            Problem("error", "unreadable", say("Cannot be listed: %(error)s.", error=exc.strerror))
        )
        return model
    for entry in entries:
        budget.spend(root)
        real, why = _resolve_entry(entry, root)
        if real is None:
            model.problems.append(
                Problem(
                    "warning",
                    "skipped_entry",
                    say("%(name)s %(why)s.", name=entry.name, why=why),
                )
            )
        elif real.is_dir() and real == entry and _is_version_name(entry.name):
            model.versions.append(
                _scan_version(int(entry.name), entry, root, budget, hash_files=hash_files)
            )
        elif entry.name != CONFIG_FILE:
            extras.append(entry.name + ("/" if real.is_dir() else ""))
    model.versions.sort(key=lambda v: v.number)
    config_path = path / CONFIG_FILE
    config_real, _ = _resolve_entry(config_path, root) if config_path.exists() else (None, "")
    original = config_real.read_text(encoding="utf-8", errors="replace") if config_real else None
    understand_model(model, original, extras)
    for version in model.versions:
        version.digest = _version_digest(version, model.config_text)
    return model


def _looks_like_model_dir(path: Path) -> bool:
    """A model directory holds a config.pbtxt or at least one numbered version folder."""
    if (path / CONFIG_FILE).exists():
        return True
    try:
        return any(_is_version_name(p.name) and p.is_dir() for p in path.iterdir())
    except OSError:
        return False


def scan_repository(
    root: Path, *, hash_files: bool = True, max_entries: int = MAX_ENTRIES
) -> RepositoryScan:
    """Describes every model directory in the Triton repository at ``root``; changes nothing.

    Model directories are the folders directly under ``root`` that hold a config.pbtxt or a
    numbered version folder (Triton's layout); other folders are reported and skipped.

    Args:
        root: The repository (``--model-repository`` of the team's Triton).
        hash_files: Compute each file's SHA-256 (needed to recognise what was adopted before).
        max_entries: Refuse trees with more directory entries than this.

    Raises:
        ScanRefused: ``root`` is missing, not a directory, or far too large.
    """
    given = Path(root)
    if not given.is_absolute():
        raise ScanRefused(
            say(
                "Give the repository as an absolute path, not %(path)s.",
                path=repr(str(given)),
            )
        )
    if not given.is_dir():
        raise ScanRefused(say("%(path)s is not a directory on this host.", path=str(given)))
    real_root = Path(os.path.realpath(given))
    budget = _Budget(max_entries)
    scan = RepositoryScan(root=real_root, models=[])
    for entry in sorted(real_root.iterdir()):
        budget.spend(real_root)
        if entry.name.startswith("."):
            continue
        real, why = _resolve_entry(entry, real_root)
        if real is None:
            scan.problems.append(
                Problem(
                    "warning",
                    "skipped_entry",
                    say("%(name)s %(why)s.", name=entry.name, why=why),
                )
            )
        elif not real.is_dir():
            continue  # a README or a script beside the models: not a model
        elif real != entry:
            scan.problems.append(
                Problem(
                    "warning",
                    "skipped_entry",
                    say(
                        "%(name)s is a symbolic link to a "
                        "folder; it is not followed (adopt its target directly).",
                        name=entry.name,
                    ),
                )
            )
        elif _looks_like_model_dir(entry):
            scan.models.append(scan_model(entry, real_root, budget, hash_files=hash_files))
        else:
            scan.problems.append(
                Problem(
                    "info",
                    "not_a_model",
                    say(
                        "%(name)s/ holds neither a config.pbtxt nor "
                        "a numbered version folder; skipped.",
                        name=entry.name,
                    ),
                )
            )
    return scan
