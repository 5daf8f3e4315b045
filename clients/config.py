"""Where the client talks to and keeps its state: the registry URL, the token, and the home
directory (``PROVISIONING_HOME``: the local store, cached index documents, runtime state and
stored credentials). Command-line options win over the environment, which wins over what
`provisioning registry login` stored."""

from __future__ import annotations

import contextlib
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

import platformdirs
import tomli_w

from clients.errors import ClientError, UsageError, home_unusable, os_error_message
from clients.files import atomic_write

DEFAULT_REGISTRY = "http://127.0.0.1:8000"
_CREDENTIALS = "credentials.toml"


def default_home() -> Path:
    return Path(platformdirs.user_data_dir("provisioning", appauthor=False))


def home_directory(home: str | Path | None = None) -> Path:
    """The client's home: ``home``, else PROVISIONING_HOME, else the platform's data directory."""
    return Path(home or os.environ.get("PROVISIONING_HOME") or default_home()).expanduser()


@dataclass(frozen=True)
class Config:
    registry: str
    token: str | None
    home: Path
    output: str = "table"
    verify: bool = True  # check index documents and packages against the signed index (--no-verify: off)

    @property
    def credentials_path(self) -> Path:
        return self.home / _CREDENTIALS


def _stored_credentials(home: Path) -> dict[str, str]:
    path = home / _CREDENTIALS
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return {}  # nothing stored (a home that is not a directory is reported where it is written)
    except OSError as exc:
        raise ClientError(
            f"cannot read stored credentials {path}: {os_error_message(exc, about=path)}; "
            "remove it or run `registry login`"
        ) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ClientError(f"cannot read stored credentials {path}: {exc}; remove it or run `registry login`") from None
    return {k: v for k, v in data.items() if isinstance(v, str)}


def load_config(
    *,
    registry: str | None = None,
    token: str | None = None,
    home: str | Path | None = None,
    output: str = "table",
    verify: bool = True,
) -> Config:
    """The effective configuration: options, then environment, then stored credentials."""
    home_path = home_directory(home)
    stored = _stored_credentials(home_path)
    url = registry or os.environ.get("PROVISIONING_REGISTRY") or stored.get("registry") or DEFAULT_REGISTRY
    if not url.startswith(("http://", "https://")):
        given = (
            "--registry"
            if registry
            else "PROVISIONING_REGISTRY"
            if os.environ.get("PROVISIONING_REGISTRY")
            else f"the registry stored in {home_path / 'credentials.toml'}"
        )
        hint = f" (did you mean http://{url}?)" if "://" not in url else ""
        raise UsageError(f"{given}: registry URL {url!r} must start with http:// or https://{hint}")
    the_token = token or os.environ.get("PROVISIONING_TOKEN") or None
    if the_token is None and stored.get("registry", "").rstrip("/") == url.rstrip("/"):
        the_token = stored.get("token")
    return Config(registry=url.rstrip("/"), token=the_token, home=home_path, output=output, verify=verify)


def store_credentials(config: Config, *, registry: str, token: str) -> Path:
    """Keep the token for this registry (mode 0600) under the home directory. The token is written
    to a new file that only the user can read (made by mkstemp, never an existing file whose mode
    could be wider) and renamed over the old credentials."""
    path = config.credentials_path
    try:
        config.home.mkdir(parents=True, exist_ok=True)
        # A temporary file left by an older client (credentials.tmp, reused with its mode) may hold a token.
        with contextlib.suppress(OSError):
            path.with_suffix(".tmp").unlink()
        atomic_write(path, tomli_w.dumps({"registry": registry.rstrip("/"), "token": token}).encode(), mode=0o600)
    except OSError as exc:
        raise home_unusable(config.home, exc) from None
    return path


def forget_credentials(config: Config) -> bool:
    try:
        config.credentials_path.unlink()
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        raise ClientError(
            f"cannot remove {config.credentials_path}: {os_error_message(exc, about=config.credentials_path)}"
        ) from None
    return True
