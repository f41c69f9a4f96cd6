"""Owner-only local files: the var dir (HUB_VAR_DIR), the generated secret key, SQLite's database.

The secret key signs sessions and the database holds password hashes and API tokens, so the
folder that holds them is 0700 and they are 0600. Each is created with that mode from its first
byte, never created with the umask's mode (often 0644) and narrowed afterwards, since another
local user could open it in between and keep the descriptor. One that already exists with a
wider mode (made by an older version) is narrowed, and that is logged.

Plain Python, no Django: ``webapp.settings`` uses it while Django is still loading its
settings, and ``python -m webapp.stack`` before anything is started.

    VAR_DIR = private_dir(Path("var"))
    SECRET_KEY = read_or_create_secret(VAR_DIR / "secret_key", lambda: secrets.token_urlsafe(50))
    private_sqlite_file(VAR_DIR / "hub.sqlite3")
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600
#: Files SQLite keeps next to the database; it gives them the database file's mode.
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")

_log = logging.getLogger(__name__)


def private_dir(path: Path) -> Path:
    """Creates ``path`` (and missing parents) with mode 0700, or narrows an existing one.

    A folder that other users share (sticky bit, as ``/tmp``) or that is not ours is left as
    it is, with a warning: narrowing it would lock everyone else out.
    """
    path = Path(path)
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    info = path.stat()
    if stat.S_IMODE(info.st_mode) == DIR_MODE:
        return path
    if info.st_mode & stat.S_ISVTX or info.st_uid != os.geteuid():
        _log.warning(
            "The folder %s is shared or not ours (mode %04o), so it was not narrowed to %04o; "
            "set HUB_VAR_DIR to a folder of the hub's own.",
            path,
            stat.S_IMODE(info.st_mode),
            DIR_MODE,
        )
        return path
    _narrow(path, DIR_MODE, "The var folder")
    return path


def read_or_create_secret(path: Path, make: Callable[[], str]) -> str:
    """The secret stored in ``path``; the file is created first with ``make()`` if missing.

    The new secret is written whole to a temporary file created 0600 beside ``path`` and then
    hard-linked into place. A link, unlike a rename, never replaces a file: of two processes
    starting at once (web and worker) the first one's key is kept and both read it, complete.
    """
    path = Path(path)
    if not path.exists():
        _create_secret(path, make())
    _narrow(path, FILE_MODE, "The secret key file")
    return path.read_text().strip()


def private_sqlite_file(path: Path) -> None:
    """Creates the SQLite database file empty with mode 0600 before SQLite opens it.

    SQLite would create it 0644 whatever the umask, and gives its ``-wal`` and ``-shm`` files
    the database's mode, so this one mode covers all three; an empty file is an empty
    database to SQLite. An existing database (and side file) with a wider mode is narrowed.
    A missing folder is left for SQLite to report.
    """
    path = Path(path)
    try:
        fd = _create_private_file(path)
    except FileExistsError:
        for file in (path, *(path.with_name(path.name + end) for end in SQLITE_SIDE_FILES)):
            if file.exists():
                _narrow(file, FILE_MODE, "The SQLite database file")
        return
    except FileNotFoundError:
        return
    os.close(fd)


def _create_private_file(path: Path) -> int:
    """Creates ``path`` with mode 0600 (never following a symlink) and returns its descriptor.

    ``os.open``'s mode passes through the umask, which can only remove bits; ``fchmod`` then
    sets exactly 0600 even under an odd umask such as 0o200.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, FILE_MODE)
    os.fchmod(fd, FILE_MODE)
    return fd


def _create_secret(path: Path, secret: str) -> None:
    """Puts ``secret`` at ``path`` unless another process was first (see above)."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = _create_private_file(temporary)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(secret)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process was first: everyone uses its key
        except OSError:
            # A file system without hard links: a rename is atomic too (two processes starting
            # at that very moment could each keep a different key until the next restart).
            temporary.replace(path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()


def _narrow(path: Path, wanted: int, what: str) -> None:
    """Sets ``path``'s mode to ``wanted``, logging if it was open to group or others."""
    current = stat.S_IMODE(path.stat().st_mode)
    if current == wanted:
        return
    try:
        path.chmod(wanted)
    except OSError as exc:
        _log.warning("%s %s has mode %04o and cannot be narrowed: %s", what, path, current, exc)
        return
    if current & ~wanted & 0o7777:
        _log.warning(
            "%s %s had mode %04o, open to other users; narrowed it to %04o.",
            what,
            path,
            current,
            wanted,
        )
