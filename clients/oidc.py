"""Trusted publishing from the client (SPEC 6.3): a CI job's OpenID Connect ID token is exchanged
for a short-lived publish token, so the job needs no stored secret; and an extension's trusted
publishers are listed, added and removed.

    jwt = read_oidc_token("oidc-token.txt")            # or None: PROVISIONING_OIDC_TOKEN
    with RegistryClient("https://registry.example.com") as client:
        granted = exchange(client, jwt, name="etcd")   # {"token": "pvr_...", "expires_at", ...}
        client.token = granted["token"]
        client.publish(Path("dist/etcd-3.5.12.tar.gz"))

Where the token comes from: ``--oidc-token FILE`` names a file holding it (``-`` reads it from
stdin); else the environment variable ``PROVISIONING_OIDC_TOKEN`` holds the token itself (GitLab
CI's ``id_tokens:`` sets such a variable; on GitHub Actions a step writes the token to a file or
exports it). Neither token is ever printed or stored."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clients.errors import ClientError, UsageError, os_error_message
from clients.registry_client import RegistryClient

OIDC_TOKEN_ENV = "PROVISIONING_OIDC_TOKEN"  # noqa: S105 - the variable's name, not a token
MAX_TOKEN_CHARS = 16 * 1024
EXCHANGE_PATH = "api/v1/trusted-publishing/exchange"


def _checked(token: str, where: str) -> str:
    token = token.strip()
    if not token:
        raise UsageError(f"{where} is empty: it must hold the OIDC ID token (a JWT) your CI job was issued")
    if len(token) > MAX_TOKEN_CHARS or token.count(".") != 2 or any(c.isspace() for c in token):
        raise UsageError(
            f"{where} does not hold a JWT (three base64url parts separated by dots): give the OIDC ID token "
            "your CI job was issued"
        )
    return token


def read_oidc_token(path: str | None, environ: Mapping[str, str] = os.environ) -> str | None:
    """The OIDC ID token from ``path`` (``-``: stdin), else from ``PROVISIONING_OIDC_TOKEN``, else None."""
    if path:
        if path == "-":
            return _checked(sys.stdin.read(MAX_TOKEN_CHARS + 1), "stdin")
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read(MAX_TOKEN_CHARS + 1)
        except (OSError, UnicodeDecodeError) as exc:
            problem = os_error_message(exc, about=Path(path)) if isinstance(exc, OSError) else "not UTF-8 text"
            raise UsageError(f"cannot read the OIDC token file {path}: {problem}") from None
        return _checked(text, f"the OIDC token file {path}")
    value = environ.get(OIDC_TOKEN_ENV)
    if value is None or not value.strip():
        return None
    return _checked(value, OIDC_TOKEN_ENV)


def package_name(package: Path) -> str | None:
    """The extension name of a built package (read safely from its extension.toml), or None when
    the package cannot be read: the registry then says what is wrong with it."""
    from extensions.archive import inspect_package
    from extensions.errors import ExtensionError

    try:
        return inspect_package(package).name
    except (ExtensionError, OSError):
        return None


def exchange(client: RegistryClient, token: str, *, name: str | None = None) -> dict[str, Any]:
    """``POST /api/v1/trusted-publishing/exchange``: ``{"token": "pvr_...", "name", "scopes",
    "expires_at", "user", "pending", "trusted_publisher"}``. A refusal is a `RegistryErrorAnswer`
    whose message says what was wrong with the token."""
    body: dict[str, Any] = {"token": token}
    if name:
        body["name"] = name
    data: dict[str, Any] = client.call("POST", EXCHANGE_PATH, json=body, what="trusted publishing")
    return data


def _path(name: str) -> str:
    return f"api/v1/extensions/{name}/trusted-publishers/"


def trusted_publishers(client: RegistryClient, name: str) -> dict[str, Any]:
    """``GET .../trusted-publishers/``: ``{"name", "exists", "trusted_publishers": [...]}``."""
    data: dict[str, Any] = client.call("GET", _path(name), what="listing trusted publishers", auth=True)
    return data


def add_trusted_publisher(
    client: RegistryClient, name: str, *, issuer: str, claims: Mapping[str, str], audience: str | None = None
) -> dict[str, Any]:
    """``POST .../trusted-publishers/``: the publisher (pending when NAME does not exist yet)."""
    body: dict[str, Any] = {"issuer": issuer, "claims": dict(claims)}
    if audience:
        body["audience"] = audience
    data: dict[str, Any] = client.call("POST", _path(name), json=body, what="adding a trusted publisher", auth=True)
    return data


def remove_trusted_publisher(client: RegistryClient, name: str, publisher_id: int) -> dict[str, Any]:
    """``DELETE .../trusted-publishers/{id}/``: the removed publisher."""
    data: dict[str, Any] = client.call(
        "DELETE", f"{_path(name)}{publisher_id}/", what="removing a trusted publisher", auth=True
    )
    return data


def parse_claims(pairs: list[str]) -> dict[str, str]:
    """``["repository=acme/etcd", "ref=refs/heads/main"]`` as a dict; a bad pair is a usage error."""
    claims: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip() or not value:
            raise UsageError(f"--claim {pair!r} is not NAME=VALUE (e.g. --claim repository=acme/etcd)")
        if key.strip() in claims:
            raise UsageError(f"--claim {key.strip()} is given twice")
        claims[key.strip()] = value
    if not claims:
        raise ClientError("give at least one --claim NAME=VALUE", code="usage")
    return claims
