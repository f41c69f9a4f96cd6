"""Owner-only modes for the hub's local files: HUB_VAR_DIR, the secret key, the SQLite database.

The var dir holds the generated secret key (it signs sessions) and the SQLite database (password
hashes, API tokens), so the dir is 0700 and both files 0600 whatever the umask, from the moment
they exist; existing files with wider modes are narrowed and that is logged.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from model_store import spawn

ROOT = Path(__file__).resolve().parents[2]
UMASKS = [0o022, 0o000]


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture(params=UMASKS, ids=lambda m: f"umask{m:03o}")
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """Runs the test under a permissive umask, restoring the old one after."""
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


# The real start-up: settings, django.setup() and migrate, in a fresh interpreter --------------

_START_UP = """
import json, os, sys
os.umask(int(sys.argv[1], 8))
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.db import connection
connection.ensure_connection()  # still open: SQLite's -wal and -shm files exist now
var = os.environ["HUB_VAR_DIR"]
modes = {name: os.lstat(os.path.join(var, name)).st_mode & 0o7777 for name in os.listdir(var)}
modes["."] = os.lstat(var).st_mode & 0o7777
print(json.dumps(modes))
"""


@pytest.mark.parametrize("mask", UMASKS, ids=lambda m: f"umask{m:03o}")
def test_start_up_creates_var_dir_secret_key_and_database_owner_only(
    tmp_path: Path, mask: int
) -> None:
    var = tmp_path / "var"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SECRET_KEY", "DATABASE_URL"))}
    env |= {"HUB_VAR_DIR": str(var), "DJANGO_SETTINGS_MODULE": "webapp.settings"}
    env.pop("MODEL_STORE_ROOT", None)
    env.pop("STATIC_ROOT", None)
    result = spawn.run(
        [sys.executable, "-c", _START_UP, f"{mask:o}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    modes = json.loads(result.stdout.strip().splitlines()[-1])
    private = [".", "secret_key", *(name for name in modes if name.startswith("hub.sqlite3"))]
    assert {"hub.sqlite3", "hub.sqlite3-wal", "hub.sqlite3-shm"} <= set(private)
    expected = dict.fromkeys(private, "0o600") | {".": "0o700"}
    assert {name: oct(modes[name]) for name in private} == expected


# The secret key -------------------------------------------------------------------------------


class ModeWatch:
    """Looks at every file in a folder at each file-system call Python makes (audit hooks).

    Records any moment at which a file there is readable or writable by group or others:
    a key written with the umask's mode and narrowed afterwards is caught at the chmod.
    """

    def __init__(self) -> None:
        self.folder: Path | None = None
        self.wide: list[tuple[str, str, int]] = []
        self.events = 0
        sys.addaudithook(self._hook)  # cannot be removed; inert once ``folder`` is None

    def _hook(self, event: str, args: tuple[object, ...]) -> None:
        folder = self.folder
        if folder is None or not event.startswith(("open", "os.")):
            return
        self.folder = None  # our own listdir/stat below must not re-enter
        try:
            self.events += 1
            for entry in folder.iterdir():
                entry_mode = mode(entry)
                if entry.is_file() and entry_mode & 0o077:
                    self.wide.append((event, entry.name, entry_mode))
        finally:
            self.folder = folder


_WATCH: ModeWatch | None = None


@pytest.fixture
def watch() -> Iterator[ModeWatch]:
    global _WATCH
    if _WATCH is None:
        _WATCH = ModeWatch()
    _WATCH.wide.clear()
    _WATCH.events = 0
    try:
        yield _WATCH
    finally:
        _WATCH.folder = None


def test_the_generated_secret_key_is_never_readable_by_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask: int, watch: ModeWatch
) -> None:
    import webapp.settings as settings

    var = tmp_path / "var"
    var.mkdir(mode=0o700)
    monkeypatch.setattr(settings, "VAR_DIR", var)
    watch.folder = var
    key = settings._default_secret_key()
    watch.folder = None
    assert watch.events > 0  # the watch saw the creation
    assert watch.wide == []
    assert mode(var / "secret_key") == 0o600
    assert (var / "secret_key").read_text() == key and len(key) > 40
    assert [p.name for p in var.iterdir()] == ["secret_key"]  # no temporary file left behind
    assert settings._default_secret_key() == key  # read back, not replaced


def test_a_secret_key_created_meanwhile_by_another_process_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from webapp import private_files

    path = tmp_path / "secret_key"
    real_link = os.link

    def other_process_was_first(src: str, dst: str) -> None:
        Path(dst).write_text("theirs")
        Path(dst).chmod(0o600)
        real_link(src, dst)

    monkeypatch.setattr(os, "link", other_process_was_first)
    assert private_files.read_or_create_secret(path, lambda: "ours") == "theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["secret_key"]


def test_a_readable_secret_key_is_narrowed_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from webapp.private_files import read_or_create_secret

    path = tmp_path / "secret_key"
    path.write_text("old-key\n")
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="webapp.private_files"):
        assert read_or_create_secret(path, lambda: "new") == "old-key"
    assert mode(path) == 0o600
    assert "secret key" in caplog.text and "0644" in caplog.text and "0600" in caplog.text


# The var dir --------------------------------------------------------------------------------


def test_the_var_dir_is_created_owner_only(tmp_path: Path, umask: int) -> None:
    from webapp.private_files import private_dir

    var = tmp_path / "a" / "var"
    assert private_dir(var) == var
    assert mode(var) == 0o700


def test_an_existing_open_var_dir_is_narrowed_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from webapp.private_files import private_dir

    var = tmp_path / "var"
    var.mkdir()
    var.chmod(0o755)
    with caplog.at_level(logging.WARNING, logger="webapp.private_files"):
        private_dir(var)
    assert mode(var) == 0o700
    assert str(var) in caplog.text and "0755" in caplog.text


def test_a_shared_sticky_folder_is_left_alone_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # HUB_VAR_DIR=/tmp must not make /tmp 0700 for everyone else.
    from webapp.private_files import private_dir

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    with caplog.at_level(logging.WARNING, logger="webapp.private_files"):
        private_dir(shared)
    assert mode(shared) == 0o1777
    assert "shared" in caplog.text and "not narrowed" in caplog.text


def test_the_stack_creates_its_var_dir_owner_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask: int
) -> None:
    from webapp.stack.__main__ import Stack

    var = tmp_path / "var"
    monkeypatch.setenv("HUB_VAR_DIR", str(var))
    Stack()
    assert mode(var) == 0o700


# The SQLite database ------------------------------------------------------------------------


def test_the_database_file_is_created_empty_and_owner_only(tmp_path: Path, umask: int) -> None:
    import sqlite3

    from webapp.private_files import private_sqlite_file

    db = tmp_path / "hub.sqlite3"
    private_sqlite_file(db)
    assert mode(db) == 0o600 and db.stat().st_size == 0
    connection = sqlite3.connect(db)  # an empty file is an empty database to SQLite
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("CREATE TABLE t (x)")
    connection.commit()
    for name in ("hub.sqlite3", "hub.sqlite3-wal", "hub.sqlite3-shm"):
        assert mode(tmp_path / name) == 0o600, name  # SQLite copies the database's mode
    connection.close()


def test_an_open_database_file_is_narrowed_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from webapp.private_files import private_sqlite_file

    db = tmp_path / "hub.sqlite3"
    db.write_bytes(b"")
    db.chmod(0o664)
    (tmp_path / "hub.sqlite3-wal").write_bytes(b"")
    (tmp_path / "hub.sqlite3-wal").chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="webapp.private_files"):
        private_sqlite_file(db)
    assert mode(db) == 0o600
    assert mode(tmp_path / "hub.sqlite3-wal") == 0o600
    assert "hub.sqlite3" in caplog.text and "0664" in caplog.text


def test_a_database_in_a_missing_folder_is_left_to_sqlite(tmp_path: Path) -> None:
    from webapp.private_files import private_sqlite_file

    private_sqlite_file(tmp_path / "nowhere" / "hub.sqlite3")
    assert not (tmp_path / "nowhere").exists()
