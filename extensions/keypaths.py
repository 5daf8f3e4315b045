"""Key paths as the messages about a manifest or a request write them. Its own module: the
resolver and the registry use it without loading the manifest's schema machinery."""

from __future__ import annotations

import json
import re

_BARE_KEY_RE = re.compile(r"[A-Za-z0-9_-]+")


def _key(key: str) -> str:
    return key if _BARE_KEY_RE.fullmatch(key) else json.dumps(key, ensure_ascii=False)


def key_path(path: str, key: str | int) -> str:
    """``path`` and then ``key`` as messages write a TOML key path: ``a.b``, ``a[0]``, and a name
    that is no bare key quoted as JSON writes it (``a."x y"``, a control character escaped)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{_key(key)}" if path else _key(key)
