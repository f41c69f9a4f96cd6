"""What an upload is: its files on disk, the records handed out, the checks on ids and names.

An upload lives in ``uploads/<id>/`` as ``meta.json`` (what the client declared) and
``data.part`` (the bytes so far). :class:`Upload` and :class:`FinishedUpload` are what the
store returns; :func:`check_upload_id` and :func:`check_upload_filename` check the values a
client sends before a path is built from them.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from model_store.errors import InvalidFileName
from model_store.names import validate_file_name
from model_store.text import say
from model_store.uploads.errors import InvalidUpload, UploadNotFound, quoted

#: Bytes copied at a time, from the request stream to disk and from disk to the hash.
PIECE_SIZE = 1024 * 1024
#: File types an upload may declare; a ``.zip`` is a bundle (one .onnx + its data files).
ALLOWED_EXTENSIONS = (".onnx", ".zip")
#: Also accepted: the inputs an INT8 quantisation calibrates on (never a version's source).
CALIBRATION_EXTENSIONS = (".npz",)
META_FILE = "meta.json"
PART_FILE = "data.part"
STATE_RECEIVING = "receiving"
STATE_COMPLETE = "complete"
MAX_OWNER_LENGTH = 150
#: Upload ids: 32 lowercase hex characters (from :mod:`secrets`).
ID_PATTERN = re.compile(r"[0-9a-f]{32}")
#: Modes of the directories and files that uploads and unpacked bundles create.
DIR_MODE = 0o750
FILE_MODE = 0o640


@dataclass(frozen=True)
class Upload:
    """What is known about one upload.

    Attributes:
        id: 32 hex characters.
        filename: The file name the client gave (a plain name ending in .onnx or .zip).
        size: The declared total size in bytes.
        sha256: The declared sha256 (lowercase hex), or None if the client gave none.
        owner: Free text naming who started it (e.g. a user name); used for access checks.
        created: Creation time, seconds since the epoch.
        state: ``"receiving"`` or ``"complete"``.
        received: Bytes on disk so far: the offset of the next chunk.
    """

    id: str
    filename: str
    size: int
    sha256: str | None
    owner: str
    created: float
    state: str
    received: int

    @property
    def is_bundle(self) -> bool:
        """True for a ``.zip`` bundle, False for a single ``.onnx`` file."""
        return self.filename.lower().endswith(".zip")

    @property
    def complete(self) -> bool:
        """True once :meth:`UploadStore.finish` succeeded."""
        return self.state == STATE_COMPLETE

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for the API), with ``is_bundle`` and ``complete`` added."""
        return {**asdict(self), "is_bundle": self.is_bundle, "complete": self.complete}


@dataclass(frozen=True)
class FinishedUpload:
    """A complete, verified upload, ready to be stored.

    Attributes:
        path: The received file. It stays there until the upload is cancelled or
            cleaned up, so pass it to ``ModelStore.store_source`` and then cancel.
        sha256: The sha256 of the received bytes (lowercase hex).
        size: Its size in bytes.
        filename: The name the client gave.
    """

    path: Path
    sha256: str
    size: int
    filename: str


def check_upload_id(upload_id: object) -> str:
    """Returns ``upload_id`` if it is 32 lowercase hex characters.

    Raises:
        UploadNotFound: For anything else (``../../etc``, ``abc``, non-strings), so
            a probe learns nothing more than for a well-formed unknown id.
    """
    if not isinstance(upload_id, str) or not ID_PATTERN.fullmatch(upload_id):
        raise UploadNotFound(
            say(
                "There is no upload %(upload)s: upload ids are 32 hex characters.",
                upload=quoted(upload_id),
            )
        )
    return upload_id


def check_upload_filename(filename: object) -> str:
    """Checks the name a client gives for an upload and returns it unchanged.

    Names with folder parts are refused outright (not reduced to their last
    part), and so are names the store could not use as a file name.

    Raises:
        InvalidUpload: If the name is not a plain ``.onnx`` or ``.zip`` file name.
    """
    first, second = ALLOWED_EXTENSIONS
    allowed = say("%(first)s or %(second)s", first=first, second=second)
    if not isinstance(filename, str):
        raise InvalidUpload(
            say(
                "The file name must be text, not %(type)s.",
                type=type(filename).__name__,
            )
        )
    if not filename:
        raise InvalidUpload(
            say("The file name is empty. Upload a %(allowed)s file.", allowed=allowed)
        )
    if "/" in filename or "\\" in filename or ".." in filename:
        raise InvalidUpload(
            say(
                "The file name %(name)s contains a folder or '..'. "
                "Send only the file's own name, e.g. 'model.onnx'.",
                name=quoted(filename),
            )
        )
    if any(not ch.isprintable() for ch in filename):
        raise InvalidUpload(
            say(
                "The file name %(name)s contains NUL, newline or other control "
                "characters. Rename the file.",
                name=quoted(filename),
            )
        )
    try:
        validate_file_name(filename)
    except InvalidFileName as exc:
        raise InvalidUpload(exc.message) from None
    if not filename.lower().endswith(ALLOWED_EXTENSIONS + CALIBRATION_EXTENSIONS):
        raise InvalidUpload(
            say(
                "The file %(name)s is neither an ONNX model nor a bundle. Upload a "
                "%(allowed)s file (a .zip holds one .onnx file and its external data).",
                name=quoted(filename),
                allowed=allowed,
            )
        )
    return filename
