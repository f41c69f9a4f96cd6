"""Typed readers for settings that come from the environment.

Each helper fails loudly (``ImproperlyConfigured``) on a value it cannot use, so a typo in a
deployment stops the process at start-up instead of surfacing as odd behaviour later.

    DEBUG = env_bool("DEBUG", default=False)
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

from model_store.load_timeouts import LoadTimeouts, LoadTimeoutSettingError, read_load_timeouts
from model_store.runtime.access import validate_api_key

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_bool(name: str, *, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use true or false.")


def env_int(name: str, *, default: int, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer.") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below the minimum of {minimum}.")
    return value


def env_bytes(name: str, *, default: int) -> int:
    """A size such as ``4294967296``, ``512M`` or ``4G`` (binary units)."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    text = raw.strip().upper().removesuffix("B").removesuffix("I")
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    factor = units.get(text[-1:], 1)
    number = text[:-1] if text[-1:] in units else text
    try:
        value = int(number) * factor
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a size (examples: 4G, 512M).") from None
    if value <= 0:
        raise ImproperlyConfigured(f"{name} must be positive.")
    return value


def env_list(name: str, *, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_secret(name: str, *, default: str | None = None) -> str:
    """Read ``NAME``, or the file named by ``NAME_FILE`` (Docker secrets)."""
    file_var = os.environ.get(f"{name}_FILE")
    if file_var:
        try:
            return Path(file_var).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={file_var!r} cannot be read: {exc}") from exc
    value = os.environ.get(name)
    if value:
        return value
    if default is None:
        raise ImproperlyConfigured(f"{name} must be set (or {name}_FILE).")
    return default


def env_api_key(name: str) -> str:
    """The key for Triton's restricted APIs from ``NAME`` or ``NAME_FILE``; ``""`` when unset.

    A key Triton could not use (too short, odd characters) stops the process here; the
    message never repeats the key.
    """
    key = env_secret(name, default="")
    if key:
        try:
            validate_api_key(key)
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: {exc}.") from None
    return key


def env_load_timeouts(*, default_s: float) -> LoadTimeouts:
    """Load timeouts per target: ``LOAD_TIMEOUT_SECONDS`` and ``LOAD_TIMEOUT_<TARGET>_SECONDS``
    (model_store.load_timeouts, which a node reads from its environment the same way)."""
    try:
        return read_load_timeouts(os.environ, default_s=default_s)
    except LoadTimeoutSettingError as exc:
        raise ImproperlyConfigured(str(exc)) from None


def env_hostport(name: str, *, default: str) -> str:
    """A ``host:port`` address; a scheme such as ``http://`` is accepted and dropped."""
    raw = env_str(name, default)
    text = raw.split("://", 1)[1] if "://" in raw else raw
    text = text.rstrip("/")
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ImproperlyConfigured(f"{name}={raw!r} is not host:port (example: 127.0.0.1:8000).")
    return text


def database_from_url(url: str, *, base_dir: Path) -> dict[str, object]:
    """Django DATABASES['default'] from ``sqlite:///path`` or ``postgres://user@host:port/db``."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "sqlite":
        # sqlite:///relative/file.db is relative to the project; sqlite:////abs/file.db is absolute.
        path = unquote(parts.path)
        name = (
            Path(path[1:])
            if path.startswith("//")
            else base_dir / (path.lstrip("/") or "db.sqlite3")
        )
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": str(name)}
    if scheme in {"postgres", "postgresql", "pgsql"}:
        if not parts.path.strip("/"):
            raise ImproperlyConfigured(
                "DATABASE_URL names no database (postgres://host:5432/NAME)."
            )
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parts.path.lstrip("/")),
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(parts.port or ""),
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
        }
    raise ImproperlyConfigured(
        f"DATABASE_URL scheme {scheme!r} is not supported; use sqlite:/// or postgres://."
    )
