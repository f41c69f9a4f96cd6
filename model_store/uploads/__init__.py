"""Chunked, resumable uploads streamed to disk, and ``.zip`` model bundles.

Each submodule's docstring tells its part; from the bottom up (each imports only those above
it):

* :mod:`~model_store.uploads.errors`: the errors and their message helpers;
* :mod:`~model_store.uploads.records`: what an upload is on disk (``uploads/<id>/meta.json``
  and ``data.part``), the records handed out, the checks on ids and names;
* :mod:`~model_store.uploads.direct_io`: writing chunks with ``O_DIRECT`` from a reused
  aligned buffer (no copy into the page cache) and hashing the finished file the same way;
* :mod:`~model_store.uploads.chunks`: the checks on one chunk and the copying of its bytes to
  disk (``O_DIRECT``, or the page cache with early writeback);
* :mod:`~model_store.uploads.upload_store`: :class:`UploadStore`, which receives chunks (at the
  current end only, so retries are safe), serialises writers and enforces the limits;
* :mod:`~model_store.uploads.bundles`: unpacking and checking a bundle (one ``.onnx`` file and
  the external data files it references).

Their public names are re-exported here; code that patches a name must patch it in the
submodule that looks it up.

Several hosts: writers of one upload are serialised with ``fcntl.flock`` on its
``data.part``, which holds between threads and processes on one host. Web replicas behind a
load balancer must share a file system with working ``flock`` for the store root (flock over
NFS is not dependable), or route one upload's requests to one host.

Example:
    >>> uploads = UploadStore(store.uploads_dir, max_bytes=4 * 1024**3)
    >>> up = uploads.create("resnet50.onnx", size=102_400_000, owner="alice")
    >>> received = uploads.write_chunk(up.id, 0, request_stream, length=8 * 1024**2)
    >>> done = uploads.finish(up.id)  # once received == size
    >>> store.store_source("resnet50", 1, done.path, filename=done.filename)
"""

from __future__ import annotations

from model_store.uploads.bundles import (
    CENTRAL_DIRECTORY_BYTES_PER_ENTRY,
    MAX_COMPRESSION_RATIO,
    RATIO_CHECK_MIN_BYTES,
    BundleCheck,
    check_bundle_model,
    unpack_bundle,
)
from model_store.uploads.chunks import WRITEBACK_BYTES
from model_store.uploads.errors import (
    InsufficientStorage,
    InvalidUpload,
    UploadBusy,
    UploadCorrupt,
    UploadNotFound,
    UploadOffsetMismatch,
    UploadQuotaExceeded,
    UploadTooLarge,
    human_bytes,
)
from model_store.uploads.records import (
    ALLOWED_EXTENSIONS,
    MAX_OWNER_LENGTH,
    META_FILE,
    PART_FILE,
    PIECE_SIZE,
    STATE_COMPLETE,
    STATE_RECEIVING,
    FinishedUpload,
    Upload,
    check_upload_filename,
    check_upload_id,
)
from model_store.uploads.upload_store import DEFAULT_LOCK_TIMEOUT_S, UploadStore

__all__ = [
    "ALLOWED_EXTENSIONS",
    "CENTRAL_DIRECTORY_BYTES_PER_ENTRY",
    "DEFAULT_LOCK_TIMEOUT_S",
    "MAX_COMPRESSION_RATIO",
    "MAX_OWNER_LENGTH",
    "META_FILE",
    "PART_FILE",
    "PIECE_SIZE",
    "RATIO_CHECK_MIN_BYTES",
    "STATE_COMPLETE",
    "STATE_RECEIVING",
    "WRITEBACK_BYTES",
    "BundleCheck",
    "FinishedUpload",
    "InsufficientStorage",
    "InvalidUpload",
    "Upload",
    "UploadBusy",
    "UploadCorrupt",
    "UploadNotFound",
    "UploadOffsetMismatch",
    "UploadQuotaExceeded",
    "UploadStore",
    "UploadTooLarge",
    "check_bundle_model",
    "check_upload_filename",
    "check_upload_id",
    "human_bytes",
    "unpack_bundle",
]
