"""The dashboard's handles on the on-disk store (one place that reads MODEL_STORE_ROOT)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from model_store.store import ModelStore
from model_store.uploads import UploadStore


def get_store() -> ModelStore:
    store = ModelStore(Path(settings.MODEL_STORE_ROOT))
    store.ensure_layout()
    return store


def get_uploads() -> UploadStore:
    return UploadStore(
        get_store().uploads_dir,
        max_bytes=settings.UPLOAD_MAX_BYTES,
        max_open_per_owner=settings.UPLOADS_OPEN_PER_USER,
        max_open_bytes_per_owner=settings.UPLOAD_OPEN_BYTES_PER_USER,
        min_free_bytes=settings.STORE_MIN_FREE_BYTES,
    )
