"""Chunked, resumable uploads streamed to disk, and ``.zip`` model bundles.

An upload lives in its own directory under the store's ``uploads/``::

    uploads/<id>/meta.json    what the client declared (file name, size, sha256), owner, state
    uploads/<id>/data.part    the bytes received so far; its size is the resume point

``<id>`` is 32 lowercase hex characters from :mod:`secrets`; every id that comes
from outside is checked against a strict pattern before a path is built from it.
Chunks are copied from a file-like stream in fixed pieces (:data:`PIECE_SIZE`),
so memory use does not grow with the file. A chunk is accepted only at the
current end of the data (``offset == received``), which makes retries safe: a
client that lost a response asks :meth:`UploadStore.status` and resumes there.

Concurrency: writers of one upload are serialised with ``fcntl.flock`` on its
``data.part``. That works between threads and processes on one host. Several
hosts (web replicas behind a load balancer) must share the same local-semantics
file system for the store root; flock over NFS is not dependable, so route one
upload's requests to one host or use a file system with working ``flock``.

A model may arrive as one ``.onnx`` file or as a ``.zip`` *bundle*: one
``.onnx`` file and the external data files it references. :func:`unpack_bundle`
extracts a bundle defensively (no ``extractall``) and :func:`check_bundle_model`
inspects the result.

The submodules, from the bottom up (each imports only those above it):
:mod:`~model_store.uploads.errors` (the errors and their message helpers),
:mod:`~model_store.uploads.records` (the on-disk files, the records handed out, the checks
on ids and names), :mod:`~model_store.uploads.upload_store` (:class:`UploadStore`) and
:mod:`~model_store.uploads.bundles` (unpacking and checking bundles). Their public names are
re-exported here; code that patches a name must patch it in the submodule that looks it up.

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
from model_store.uploads.upload_store import DEFAULT_LOCK_TIMEOUT_S, WRITEBACK_BYTES, UploadStore

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
