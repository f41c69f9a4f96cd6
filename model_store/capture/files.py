"""Captured tensors on disk: one ``.npz`` per captured request, under one folder per model.

``<root>/<model>/<id>.npz`` holds ``in.<name>`` and ``out.<name>`` arrays (NumPy's own format,
read without pickle). A file is written under a temporary name and renamed, so a reader sees
it whole or not at all; it is not fsynced: a capture lost in a power cut costs nothing, and an
fsync per request would be paid by the disk the models are served from.

Before each write the disk must keep :data:`MIN_FREE_BYTES` free after it; when it would not,
:class:`DiskFull` is raised and the caller stops capturing for that model (never the model).
"""

from __future__ import annotations

import io
import os
import re
import secrets
import shutil
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

#: Capturing stops while less than this would be left free on the store's disk.
MIN_FREE_BYTES = 512 * 1024 * 1024
_SAFE_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
INPUT_PREFIX, OUTPUT_PREFIX = "in.", "out."


class DiskFull(OSError):
    """Writing would leave the disk with less than :data:`MIN_FREE_BYTES`."""


def encode(inputs: Mapping[str, np.ndarray], outputs: Mapping[str, np.ndarray]) -> bytes:
    """One capture as ``.npz`` bytes (uncompressed: tensors of images compress badly, and the
    writer's time is better spent keeping up)."""
    buffer = io.BytesIO()
    arrays = {f"{INPUT_PREFIX}{k}": v for k, v in inputs.items()}
    arrays |= {f"{OUTPUT_PREFIX}{k}": v for k, v in outputs.items()}
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def decode(data: bytes | Path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``(inputs, outputs)`` of one capture file; never unpickles.

    Raises:
        ValueError: Not a capture file.
    """
    source = data if isinstance(data, Path) else io.BytesIO(data)
    try:
        with np.load(source, allow_pickle=False) as archive:
            items = {key: archive[key] for key in archive.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise ValueError(f"not a capture file: {exc}") from None
    inputs = {k[len(INPUT_PREFIX) :]: v for k, v in items.items() if k.startswith(INPUT_PREFIX)}
    outputs = {k[len(OUTPUT_PREFIX) :]: v for k, v in items.items() if k.startswith(OUTPUT_PREFIX)}
    return inputs, outputs


class CaptureFiles:
    def __init__(self, root: Path, min_free: int = MIN_FREE_BYTES) -> None:
        self.root = root
        self.min_free = min_free

    def folder(self, model: str) -> Path:
        if not _SAFE_PART.fullmatch(model):
            raise ValueError(f"not a model name: {model!r}")
        return self.root / model

    def path(self, model: str, name: str) -> Path:
        if not _SAFE_PART.fullmatch(name) or not name.endswith(".npz"):
            raise ValueError(f"not a capture file name: {name!r}")
        return self.folder(model) / name

    def write(self, model: str, data: bytes) -> str:
        """Store one capture's bytes; its file name (relative to the model's folder).

        Raises:
            DiskFull: Less than ``min_free`` would be left.
            OSError: The write failed (nothing is left behind).
        """
        folder = self.folder(model)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if shutil.disk_usage(folder).free - len(data) < self.min_free:
            raise DiskFull(f"less than {self.min_free} bytes would be left on the disk")
        name = f"{secrets.token_hex(12)}.npz"
        final = folder / name
        tmp = folder / f".{name}.tmp"
        try:
            with tmp.open("xb") as fh:
                os.fchmod(fh.fileno(), 0o600)
                fh.write(data)
            tmp.replace(final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return name

    def read(self, model: str, name: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        return decode(self.path(model, name))

    def delete(self, model: str, names: Iterable[str]) -> None:
        for name in names:
            self.path(model, name).unlink(missing_ok=True)

    def purge(self, model: str) -> None:
        shutil.rmtree(self.folder(model), ignore_errors=True)
