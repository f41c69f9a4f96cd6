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
    return UploadStore(get_store().uploads_dir, max_bytes=settings.UPLOAD_MAX_BYTES)
