"""Index documents (``GET /api/v1/index/{name}``), materialised on the extension's row.

The document is rendered (`extensions.index.render_index`, canonical bytes) inside the same
transaction as every change that alters it — publish, yank, unyank — so the stored copy is a cache
that those writes invalidate atomically, correct across any number of web processes, and identical
bytes for identical data (its ETag is their SHA-256)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from extensions.index import render_index
from registry.models import Extension, Version


def index_entry(version: Version) -> dict[str, Any]:
    manifest = version.manifest or {}
    return {
        "version": version.version,
        "sha256": version.sha256,
        "size": version.size,
        "yanked": version.yanked,
        "type": version.type,
        # As written (^1.7) where the manifest kept it: any reader parses either form.
        "dependencies": {d["name"]: d.get("written") or d["constraint"] for d in manifest.get("dependencies", [])},
        "compatibility": dict(manifest.get("compatibility") or {}),
        "provides": {kind: names for kind, names in (manifest.get("provides") or {}).items() if names},
        "published_at": version.published_at,
    }


def render_document(name: str, versions: Iterable[Version]) -> tuple[str, str]:
    """The canonical document text and its ETag (the SHA-256 of its bytes)."""
    data = render_index(name, [index_entry(v) for v in versions])
    return data.decode("utf-8"), hashlib.sha256(data).hexdigest()


def document_body(index_json: str) -> bytes:
    """The bytes served at /api/v1/index/{name} (and stored as the static index file): the stored
    document in the success envelope."""
    return b'{"success":true,"data":' + index_json.encode("utf-8") + b"}"


def refresh_index(extension: Extension) -> None:
    """Re-render and store the extension's index document (call inside the changing transaction)."""
    text, etag = render_document(extension.name, extension.versions.all())
    extension.index_json, extension.index_etag = text, etag
