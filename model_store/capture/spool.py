"""The capture spool: sampled requests as the web process hands them over, one file each.

The web process must spend next to nothing on a capture: it writes the request's bytes as they
crossed the hub (both bodies, or the infer API's tensors already encoded) with a few facts in a
short JSON header, to ``<root>/<time>-<random>.cap``, and goes on. A worker reads the spool
later (webapp/registry/capture/ingest.py): it takes the tensors apart, writes the ``.npz``, adds
the rows and trims. A file is written under a temporary name and renamed, so the reader never
sees half of one.

File layout: 4 bytes (big-endian) of header length, the header (JSON: the facts and each
part's length), then the parts one after the other.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import struct
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from model_store.capture.files import DiskFull

#: The spool holds at most this many requests; past it new ones are dropped (and counted).
MAX_FILES = 4096
_SUFFIX = ".cap"
_CLAIMED = ".work"


class SpoolFull(Exception):
    """The spool holds :data:`MAX_FILES` requests already: the worker is behind."""


class Spool:
    def __init__(self, root: Path, min_free: int, max_files: int = MAX_FILES) -> None:
        self.root = root
        self.min_free = min_free
        self.max_files = max_files
        self._count_checked = 0.0
        self._count = 0

    def put(self, facts: dict[str, Any], parts: Sequence[bytes]) -> None:
        """Spool one request.

        Raises:
            SpoolFull: The worker is behind (nothing is written).
            DiskFull: Less than ``min_free`` would be left on the disk.
            OSError: The write failed (nothing is left behind).
        """
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        now = time.monotonic()
        if now - self._count_checked > 1.0:  # a directory listing at most once a second
            self._count = sum(1 for _ in self._names())
            self._count_checked = now
        if self._count >= self.max_files:
            raise SpoolFull(f"{self._count} requests wait in the spool")
        size = sum(len(p) for p in parts)
        if shutil.disk_usage(self.root).free - size < self.min_free:
            raise DiskFull(f"less than {self.min_free} bytes would be left on the disk")
        header = json.dumps({**facts, "parts": [len(p) for p in parts]}).encode()
        name = f"{time.time_ns():020d}-{secrets.token_hex(4)}"
        tmp = self.root / f".{name}.tmp"
        try:
            with tmp.open("xb") as fh:
                os.fchmod(fh.fileno(), 0o600)
                fh.write(struct.pack(">I", len(header)))
                fh.write(header)
                for part in parts:
                    fh.write(part)
            tmp.replace(self.root / f"{name}{_SUFFIX}")
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        self._count += 1

    def _names(self) -> Iterator[str]:
        try:
            with os.scandir(self.root) as entries:
                for entry in entries:
                    if entry.name.endswith(_SUFFIX):
                        yield entry.name
        except FileNotFoundError:
            return

    def oldest(self, limit: int) -> list[Path]:
        """Up to ``limit`` spooled requests, oldest first."""
        return [self.root / n for n in sorted(self._names())[:limit]]

    def claim(self, path: Path) -> Path | None:
        """Take ``path`` for this process (a rename: two workers never both take one); None
        when another took it first."""
        taken = path.with_name(f"{path.name}.{os.getpid()}{_CLAIMED}")
        try:
            path.rename(taken)
        except FileNotFoundError:
            return None
        return taken

    def forget_stale_claims(self, older_than_s: float = 3600.0) -> None:
        """Remove what a worker that died took and never finished."""
        cutoff = time.time() - older_than_s
        try:
            with os.scandir(self.root) as entries:
                for entry in entries:
                    if entry.name.endswith(_CLAIMED) and entry.stat().st_mtime < cutoff:
                        Path(entry.path).unlink(missing_ok=True)
        except FileNotFoundError:
            return


def read(path: Path) -> tuple[dict[str, Any], list[bytes]]:
    """The facts and the parts of one spooled request.

    Raises:
        ValueError: Not a spool file (it is then removed by the caller).
    """
    data = path.read_bytes()
    if len(data) < 4:
        raise ValueError("too short")
    (length,) = struct.unpack(">I", data[:4])
    try:
        facts = json.loads(data[4 : 4 + length])
        sizes = [int(n) for n in facts.pop("parts")]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"bad header: {exc}") from None
    parts, at = [], 4 + length
    for size in sizes:
        if size < 0 or at + size > len(data):
            raise ValueError("parts past the end")
        parts.append(data[at : at + size])
        at += size
    return facts, parts
