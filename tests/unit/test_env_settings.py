from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from webapp.env import database_from_url, env_bool, env_bytes, env_hostport, env_int, env_secret


def test_env_bool_accepts_the_usual_words(monkeypatch: pytest.MonkeyPatch) -> None:
    for word, expected in [("true", True), ("1", True), ("off", False), ("No", False)]:
        monkeypatch.setenv("X", word)
        assert env_bool("X", default=not expected) is expected


def test_env_bool_rejects_anything_else_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X", "maybe")
    with pytest.raises(ImproperlyConfigured, match="not a boolean"):
        env_bool("X", default=False)


def test_env_bool_uses_default_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("X", raising=False)
    assert env_bool("X", default=True) is True


def test_env_int_checks_type_and_minimum(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X", "ten")
    with pytest.raises(ImproperlyConfigured, match="not an integer"):
        env_int("X", default=1)
    monkeypatch.setenv("X", "0")
    with pytest.raises(ImproperlyConfigured, match="minimum"):
        env_int("X", default=1, minimum=1)


def test_env_bytes_understands_binary_units(monkeypatch: pytest.MonkeyPatch) -> None:
    for text, expected in [("4G", 4 << 30), ("512M", 512 << 20), ("1GiB", 1 << 30), ("100", 100)]:
        monkeypatch.setenv("X", text)
        assert env_bytes("X", default=1) == expected
    monkeypatch.setenv("X", "lots")
    with pytest.raises(ImproperlyConfigured, match="not a size"):
        env_bytes("X", default=1)


def test_env_hostport_accepts_scheme_and_rejects_garbage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X", "http://triton:8000/")
    assert env_hostport("X", default="a:1") == "triton:8000"
    for bad in ["triton", "triton:http", ":8000", "triton:70000"]:
        monkeypatch.setenv("X", bad)
        with pytest.raises(ImproperlyConfigured, match="host:port"):
            env_hostport("X", default="a:1")


def test_env_secret_reads_a_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    secret = tmp_path / "s"
    secret.write_text("hunter2\n")
    monkeypatch.setenv("S_FILE", str(secret))
    assert env_secret("S") == "hunter2"
    monkeypatch.setenv("S_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="cannot be read"):
        env_secret("S")


def test_database_url_sqlite_relative_and_absolute(tmp_path: Path) -> None:
    assert database_from_url("sqlite:///db.sqlite3", base_dir=tmp_path)["NAME"] == str(
        tmp_path / "db.sqlite3"
    )
    assert database_from_url("sqlite:////var/x.db", base_dir=tmp_path)["NAME"] == "/var/x.db"


def test_database_url_postgres_parts(tmp_path: Path) -> None:
    db = database_from_url("postgres://hub:p%40ss@db.internal:5433/hub", base_dir=tmp_path)
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["NAME"], db["USER"], db["PASSWORD"], db["HOST"], db["PORT"]) == (
        "hub", "hub", "p@ss", "db.internal", "5433",
    )  # fmt: skip


def test_database_url_rejects_unknown_schemes(tmp_path: Path) -> None:
    with pytest.raises(ImproperlyConfigured, match="not supported"):
        database_from_url("mysql://x/y", base_dir=tmp_path)
    with pytest.raises(ImproperlyConfigured, match="names no database"):
        database_from_url("postgres://host:5432/", base_dir=tmp_path)


def test_env_api_key_is_empty_when_unset_and_checked_when_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from webapp.env import env_api_key

    monkeypatch.delenv("K", raising=False)
    monkeypatch.delenv("K_FILE", raising=False)
    assert env_api_key("K") == ""
    monkeypatch.setenv("K", "too-short")
    with pytest.raises(ImproperlyConfigured, match="K: the Triton API key is too short") as bad:
        env_api_key("K")
    assert "too-short" not in str(bad.value)
    key_file = tmp_path / "key"
    key_file.write_text("ab" * 32 + "\n")  # a Docker secret, with its trailing newline
    monkeypatch.setenv("K_FILE", str(key_file))
    assert env_api_key("K") == "ab" * 32
