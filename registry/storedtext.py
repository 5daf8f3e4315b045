"""Text from requests and packages as the database can store it and an answer can encode it.
PostgreSQL refuses NUL (U+0000) in text and json (SQLite would store it), so what is recorded as
sent (the audit log, a build's log, a token's claims) writes it ``\\u0000``, as JSON would; and a
lone surrogate (``"\\ud800"``, which JSON's escapes allow) is no Unicode text at all: nothing after
the parser can encode it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from extensions.keypaths import key_path

NUL_WRITTEN = "\\u0000"


def nul_escaped(value: Any) -> Any:
    """value with every NUL in its text (names included) written ``\\u0000``; lists, tuples and
    dicts are walked, anything else is returned as it is."""
    if isinstance(value, str):
        return value.replace("\x00", NUL_WRITTEN)
    if isinstance(value, dict):
        return {nul_escaped(k): nul_escaped(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [nul_escaped(v) for v in value]
    return value


def nul_paths(value: Any, path: str) -> Iterator[str]:
    """Where NUL is in value's text, names included, as the manifest's messages write key paths
    from ``path`` (`extensions.keypaths.key_path`: a name holding NUL is quoted, NUL escaped)."""
    if isinstance(value, str):
        if "\x00" in value:
            yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            where = key_path(path, str(key))
            if "\x00" in str(key):
                yield where
            else:
                yield from nul_paths(item, where)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from nul_paths(item, key_path(path, index))


def holds_lone_surrogate(document: Any) -> bool:
    """Whether a decoded JSON document holds a lone surrogate (``"\\ud800"`` without its pair)
    anywhere, names included: nothing after the parser can encode it (UTF-8 answers, PostgreSQL's
    text and json)."""
    try:
        json.dumps(document, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
