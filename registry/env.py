"""Small typed helpers that read settings from the environment and fail loudly on bad values."""

from __future__ import annotations

import os
import re
import secrets
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
_SIZE = re.compile(r"^\s*(\d+)\s*(b|k|kb|kib|m|mb|mib|g|gb|gib)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {
    None: 1, "b": 1,
    "k": 1024, "kb": 1000, "kib": 1024,
    "m": 1024**2, "mb": 1000**2, "mib": 1024**2,
    "g": 1024**3, "gb": 1000**3, "gib": 1024**3,
}  # fmt: skip
_RATE = re.compile(r"^\d+/(s|sec|second|m|min|minute|h|hour|d|day)$")


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    return None if value is None else value.strip()


def env_str(name: str, default: str = "") -> str:
    value = _raw(name)
    return default if value is None or value == "" else value


def env_bool(name: str, default: bool = False) -> bool:
    value = _raw(name)
    if value is None:
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean: use one of 1/0, true/false, yes/no, on/off")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    value = _raw(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a whole number") from None
    if number < minimum:
        raise ImproperlyConfigured(f"{name}={number} is too small: it must be at least {minimum}")
    return number


def env_seconds(name: str, default: float, *, minimum: float = 0.0, maximum: float = 86400.0) -> float:
    """A duration in seconds, fractions allowed (``2``, ``0.5``)."""
    value = _raw(name)
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number of seconds (such as 2 or 0.5)") from None
    if not minimum <= number <= maximum:  # also refuses nan
        raise ImproperlyConfigured(f"{name}={value} is out of range: use {minimum:g} to {maximum:g} seconds")
    return number


def env_size(name: str, default: int, *, minimum: int = 1) -> int:
    """A byte size: ``52428800``, ``50MiB``, ``64KiB``, ``1GB``; at least ``minimum``."""
    value = _raw(name)
    if value is None or value == "":
        return default
    match = _SIZE.match(value)
    if not match:
        raise ImproperlyConfigured(f"{name}={value!r} is not a size: use bytes or a unit (64KiB, 50MiB, 1GiB)")
    unit = match.group(2).lower() if match.group(2) else None
    size = int(match.group(1)) * _SIZE_UNITS[unit]
    if size <= 0:
        raise ImproperlyConfigured(f"{name}={value!r} must be greater than zero")
    if size < minimum:
        raise ImproperlyConfigured(f"{name}={value!r} is too small: it must be at least {minimum} bytes")
    return size


def env_list(name: str, default: list[str]) -> list[str]:
    value = _raw(name)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def env_path(name: str, default: Path) -> Path:
    value = _raw(name)
    return (Path(value).expanduser() if value else default).resolve()


def env_data_dir(name: str, default: Path) -> Path:
    """A directory the registry writes to: created if missing; anything unusable stops start-up."""
    path = env_path(name, default)
    if path.exists() and not path.is_dir():
        raise ImproperlyConfigured(f"{name}={str(path)!r} is not a directory; point it at a writable directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ImproperlyConfigured(
            f"{name}={str(path)!r} cannot be used as the data directory: {exc.strerror}; "
            "point it at a writable directory"
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ImproperlyConfigured(f"{name}={str(path)!r} is not writable; point it at a writable directory")
    return path


def env_url(name: str, default: str, schemes: tuple[str, ...]) -> str:
    """A URL whose scheme is one of ``schemes`` (empty stays empty)."""
    value = env_str(name, default)
    if not value:
        return value
    scheme = value.split("://", 1)[0].lower() if "://" in value else ""
    if scheme not in schemes:
        allowed = ", ".join(f"{s}://" for s in schemes)
        raise ImproperlyConfigured(f"{name}={redact_url(value)!r} is not a URL this registry can use: use {allowed}")
    return value


def env_base_url(name: str) -> str:
    """The URL the registry is reached at (``https://HOST[:PORT][/PATH]``, no trailing ``/``), or
    empty: links and identities are built on it, so anything else stops start-up."""
    value = env_str(name).rstrip("/")
    if not value:
        return value
    allowed = (
        "use http(s)://HOST[:PORT][/PATH] without credentials, query, fragment, spaces or escapes, "
        "such as https://registry.example.com"
    )
    try:
        parts = urlsplit(value)
        port = parts.port  # a port that is not a number (or past 65535) raises here
    except ValueError:
        parts, port = None, None
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username is not None
        or parts.netloc.endswith(":")
        or port == 0
        or _NOT_IN_A_BASE_URL.search(value)
    ):
        raise ImproperlyConfigured(f"{name}={redact_url(value)!r} is not a base URL: {allowed}")
    # Scheme and host in lower case: the URL is part of identities (the provenance builder id).
    return f"{parts.scheme}://{parts.netloc.lower()}{parts.path}"


#: Characters a base URL of the registry has no use for: a query, a fragment, whitespace, escapes.
_NOT_IN_A_BASE_URL = re.compile(r'[?#%\\\s<>"{}|^`]')


_URL_PREFIX = re.compile(r"^/([A-Za-z0-9._~-]+/)*$")


def env_url_prefix(name: str, default: str = "") -> str:
    """An absolute URL path prefix such as ``/_packages/`` (starting and ending with ``/``), or empty."""
    value = env_str(name, default)
    if value and not _URL_PREFIX.match(value):
        raise ImproperlyConfigured(
            f"{name}={value!r} is not a URL path prefix: use one that starts and ends with '/', such as /_packages/"
        )
    return value


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


def secure_url_problem(url: str) -> str | None:
    """Why a URL the registry fetches keys from is not safe to trust, or None: it must be https://,
    or http:// on this machine's loopback (a local issuer for development and tests). Plain http
    elsewhere would let anyone on the path swap the keys."""
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
    except ValueError:
        return f"{url[:200]!r} is not a URL"
    if parts.scheme == "https" and host:
        return None
    if parts.scheme == "http" and host in LOOPBACK_HOSTS:
        return None
    return f"{url[:200]!r} is not an https:// URL (plain http:// is allowed on loopback only)"


def env_issuers(name: str, default: list[str]) -> list[str]:
    """A comma-separated list of OpenID Connect issuer URLs, exactly as their tokens' ``iss`` says."""
    issuers = env_list(name, default)
    for issuer in issuers:
        problem = secure_url_problem(issuer)
        if problem is not None:
            raise ImproperlyConfigured(f"{name}: {problem}; list issuers as https://HOST[/PATH], comma-separated")
    return issuers


def env_rate(name: str, default: str) -> str:
    """A throttle rate in DRF's syntax: ``60/minute``, ``5/s``."""
    value = env_str(name, default)
    if not _RATE.match(value):
        raise ImproperlyConfigured(f"{name}={value!r} is not a rate: use N/second, N/minute, N/hour or N/day")
    return value


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env_str(name, default).lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} is not allowed: use one of {', '.join(choices)}")
    return value


def redact_url(url: str) -> str:
    """The URL with any password replaced, for error messages and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return parts._replace(netloc=netloc).geturl()
    return url


def database_from_url(name: str, default: str) -> dict[str, object]:
    """Django's DATABASES entry from a URL; only PostgreSQL and SQLite are supported."""
    import dj_database_url

    url = env_str(name, default)
    allowed = "postgres://USER:PASSWORD@HOST:PORT/NAME or sqlite:///ABSOLUTE/PATH"
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in {"postgres", "postgresql", "pgsql", "sqlite"}:
        raise ImproperlyConfigured(f"{name}={redact_url(url)!r} is not a database URL: use {allowed}")
    try:
        config = dict(dj_database_url.parse(url, conn_max_age=60 if scheme != "sqlite" else 0))
    except (ValueError, KeyError) as exc:
        raise ImproperlyConfigured(f"{name}={redact_url(url)!r} could not be read ({exc}): use {allowed}") from None
    if scheme != "sqlite" and not config.get("NAME"):
        raise ImproperlyConfigured(f"{name}={redact_url(url)!r} names no database: use {allowed}")
    if scheme != "sqlite":
        # A database that went away must fail requests fast (a 503), and a persistent connection
        # it dropped (a restart) is replaced before a request uses it, not after it failed one.
        config["CONN_HEALTH_CHECKS"] = True
        options = dict(config.get("OPTIONS") or {})  # type: ignore[call-overload]
        options.setdefault("connect_timeout", 5)  # ?connect_timeout=N overrides
        config["OPTIONS"] = options
    if scheme == "sqlite":
        config.setdefault("OPTIONS", {})
        # WAL and a busy timeout let the web process and in-process tasks share the file. A
        # transaction takes the write lock when it begins (IMMEDIATE): one that began reading and
        # then wrote would otherwise fail at once ("database is locked", a 500) whenever another
        # process was writing, the busy timeout notwithstanding.
        config["OPTIONS"] = {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;",
        }
    return config


def secret_key(name: str, data_dir: Path) -> str:
    """The configured secret key, or one generated on first start and kept (mode 0600) in data_dir."""
    value = env_str(name)
    if value:
        if len(value) < 32:
            raise ImproperlyConfigured(f"{name} is too short: use at least 32 random characters")
        return value
    path = data_dir / "secret_key"
    existing = _read_key(path)
    if existing:
        return existing
    # Written whole to a private temporary file, then linked into place: a concurrent first start
    # or a crash can never leave an empty or partial key behind.
    key = secrets.token_urlsafe(50)
    fd, tmp = tempfile.mkstemp(dir=data_dir, prefix=".secret_key-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(key + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            if not _read_key(path):  # an empty key left by a crash before this code: replace it
                os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return _read_key(path) or key  # a concurrent first start may have won: everyone uses its key


def _read_key(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return ""
