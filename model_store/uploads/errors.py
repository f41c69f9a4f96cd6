"""The errors of uploads and bundles, and the two helpers their messages use.

Every refusal of an upload or a bundle is one of these :class:`ModelStoreError` subclasses,
each with its own ``code`` for the API; :func:`human_bytes` and :func:`quoted` put sizes and
client-supplied values into their messages. Kept apart so that the upload store and the
bundle reader raise the same errors without importing each other.
"""

from __future__ import annotations

from typing import Any

from model_store.errors import ModelStoreError
from model_store.text import Said, say


class InvalidUpload(ModelStoreError):
    """The upload request or the uploaded bundle is not acceptable (name, size, hash, layout)."""

    code = "invalid_upload"


class UploadNotFound(ModelStoreError):
    """No upload with that id exists (never created, cancelled, or cleaned up)."""

    code = "upload_not_found"


class UploadOffsetMismatch(ModelStoreError):
    """A chunk was sent for an offset other than the current end of the data.

    Attributes:
        expected: The number of bytes received so far: resume from here.
    """

    code = "upload_offset"

    def __init__(self, message: Said, expected: int) -> None:
        super().__init__(message)
        self.expected = expected

    def as_dict(self) -> dict[str, Any]:
        """The API shape plus ``expected_offset`` (as text, like the other fields)."""
        return {**super().as_dict(), "expected_offset": str(self.expected)}


class UploadTooLarge(ModelStoreError):
    """The file, a chunk, or a bundle's content is larger than allowed or declared."""

    code = "upload_too_large"


class UploadCorrupt(ModelStoreError):
    """The received bytes do not match the declared sha256; nothing was kept."""

    code = "upload_corrupt"


class UploadBusy(ModelStoreError):
    """Another request is still writing to the same upload."""

    code = "upload_busy"


class UploadQuotaExceeded(ModelStoreError):
    """The owner already has as many open uploads, or open bytes, as allowed."""

    code = "upload_quota"


class InsufficientStorage(ModelStoreError):
    """The store's disk would fall under its free-space floor; nothing was written."""

    code = "insufficient_storage"


def human_bytes(count: int) -> Said:
    """Formats a byte count for people: ``1536`` -> ``"1.5 KiB"``, ``2**31`` -> ``"2 GiB"``."""
    value = float(count)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            if unit == "bytes":
                return say("%(count)s bytes", count=count)
            text = f"{value:.1f}".removesuffix(".0")
            return f"{text} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def quoted(value: object) -> str:
    """A user-supplied value quoted for a message, escaped and cut short."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
