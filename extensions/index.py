"""Index documents (SPEC 3.2, ``GET /api/v1/index/{name}``): every version of one extension in one
compact, cacheable JSON document. The registry renders them (``render_index``); the client reads
them (``parse_index``) and resolves over them (``IndexCatalogue``), so both sides resolve the same
data the same way.

Format 1::

    {
      "format": 1,
      "name": "etcd",
      "versions": [                                   # SemVer precedence, oldest first
        {
          "version": "3.5.9",                         # SemVer 2.0.0
          "sha256": "9f86d0...",                      # 64 lower-case hex digits: the package's hash
          "size": 18234,                              # bytes of the package
          "yanked": false,
          "type": "taskserv",                         # provider | taskserv | cluster | template
          "dependencies": {"containerd": "^1.7"},     # extension name -> constraint (SPEC 2.3)
          "compatibility": {"provisioning_version": ">=1.0.0"},   # [compatibility], as written
          "provides": {"taskservs": ["etcd"]},        # kind -> provided names
          "published_at": "2024-03-01T12:00:00Z"      # optional, ISO 8601
        }
      ]
    }

The bytes are canonical: keys sorted, no insignificant whitespace, UTF-8, provided names sorted,
so the same data always gives the same bytes (and the same ``ETag``). Readers ignore keys they do
not know, so later formats can add some.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from extensions.errors import ExtensionError
from extensions.names import NAME_RE
from extensions.resolver import Candidate
from extensions.versions import Constraint, Requirement, SemVer, parse_version

__all__ = [
    "INDEX_FORMAT",
    "IndexCatalogue",
    "IndexDocumentError",
    "parse_index",
    "render_index",
]

INDEX_FORMAT = 1
MAX_INDEX_BYTES = 16 * 1024 * 1024

_SHA256_RE = re.compile(r"[0-9a-f]{64}", re.ASCII)
#: The keys of a version entry; every entry has the first five (REQUIRED_ENTRY_KEYS).
ENTRY_KEYS = (
    "version",
    "sha256",
    "size",
    "yanked",
    "type",
    "dependencies",
    "compatibility",
    "provides",
    "published_at",
)
REQUIRED_ENTRY_KEYS = ENTRY_KEYS[:5]


class IndexDocumentError(ExtensionError):
    """An index document is not well-formed (the registry served something the client cannot use,
    or the registry was asked to render bad data). ``path`` is the key path inside the document."""

    code = "invalid_index"


# --------------------------------------------------------------------------------------------------
# Rendering (the registry)
# --------------------------------------------------------------------------------------------------


def render_index(name: str, versions: Iterable[Mapping[str, Any]]) -> bytes:
    """The index document of ``name`` as canonical JSON bytes.

    Each item of ``versions`` has the entry keys of the format (other keys are ignored); versions
    and constraints may be given as ``SemVer`` and ``Constraint`` objects or as strings,
    ``dependencies`` as a mapping or as ``Requirement`` objects / ``{"name", "constraint"}`` dicts,
    ``published_at`` as an aware ``datetime`` or a string. ``IndexDocumentError`` for bad data."""
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise IndexDocumentError(f"{name!r} is not an extension name: use lower-case letters, digits and '-'")
    entries: dict[SemVer, dict[str, Any]] = {}
    for position, item in enumerate(versions):
        entry = _render_entry(item, f"versions[{position}]")
        version = parse_version(entry["version"])
        if version in entries:
            raise IndexDocumentError(
                f"version {entry['version']} is listed twice (as {entries[version]['version']} too): "
                "versions that differ only in build metadata are the same version",
                path=f"versions[{position}].version",
            )
        entries[version] = entry
    document = {
        "format": INDEX_FORMAT,
        "name": name,
        "versions": [entries[v] for v in sorted(entries)],
    }
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _render_entry(item: Mapping[str, Any], path: str) -> dict[str, Any]:
    if not isinstance(item, Mapping):
        raise IndexDocumentError(f"a version entry must be a mapping, not {type(item).__name__}", path=path)
    missing = [key for key in REQUIRED_ENTRY_KEYS if key not in item]
    if missing:
        raise IndexDocumentError(
            f"a version entry needs {', '.join(missing)}; it has {', '.join(sorted(map(str, item))) or 'nothing'}",
            path=path,
        )
    entry: dict[str, Any] = {
        "version": _version_text(item["version"], f"{path}.version"),
        "sha256": _sha256(item["sha256"], f"{path}.sha256"),
        "size": _size(item["size"], f"{path}.size"),
        "yanked": _bool(item["yanked"], f"{path}.yanked"),
        "type": _string(item["type"], f"{path}.type"),
        "dependencies": _render_dependencies(item.get("dependencies") or {}, f"{path}.dependencies"),
        "compatibility": _string_map(item.get("compatibility") or {}, f"{path}.compatibility"),
        "provides": _provides(item.get("provides") or {}, f"{path}.provides"),
    }
    published = item.get("published_at")
    if published is not None:
        entry["published_at"] = _timestamp(published, f"{path}.published_at")
    return entry


def _version_text(value: Any, path: str) -> str:
    if isinstance(value, SemVer):
        return str(value)
    if not isinstance(value, str):
        raise IndexDocumentError(f"a version must be a string such as '1.2.0', not {type(value).__name__}", path=path)
    try:
        return str(parse_version(value))
    except ExtensionError as exc:
        raise IndexDocumentError(exc.message, path=path) from None


def _render_dependencies(value: Any, path: str) -> dict[str, str]:
    pairs: list[tuple[str, Any]] = []
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, Iterable) and not isinstance(value, str | bytes):
        for position, item in enumerate(value):
            if isinstance(item, Requirement):
                pairs.append((item.name, item.constraint))
            elif isinstance(item, Mapping) and "name" in item:
                pairs.append((item["name"], item.get("constraint") or "*"))
            else:
                raise IndexDocumentError(
                    "a dependency must be a Requirement or a {'name', 'constraint'} mapping", path=f"{path}[{position}]"
                )
    else:
        raise IndexDocumentError("dependencies must map extension names to constraints", path=path)
    out: dict[str, str] = {}
    for dep_name, constraint in pairs:
        where = f"{path}.{dep_name}"
        if not isinstance(dep_name, str) or not NAME_RE.match(dep_name):
            raise IndexDocumentError(f"{dep_name!r} is not an extension name", path=where)
        if dep_name in out:
            raise IndexDocumentError(f"{dep_name!r} is listed twice: list each dependency once", path=where)
        out[dep_name] = _constraint_text(constraint, where)
    return out


def _constraint_text(value: Any, path: str) -> str:
    if isinstance(value, Constraint):
        return str(value)
    if not isinstance(value, str):
        raise IndexDocumentError(f"a constraint must be a string such as '^1.2', not {type(value).__name__}", path=path)
    try:
        Constraint.parse(value)
    except ExtensionError as exc:
        raise IndexDocumentError(exc.message, path=path) from None
    return value


def _provides(value: Any, path: str) -> dict[str, list[str]]:
    if not isinstance(value, Mapping):
        raise IndexDocumentError("provides must map kinds to lists of names", path=path)
    out: dict[str, list[str]] = {}
    for kind, names in value.items():
        where = f"{path}.{kind}"
        if not isinstance(kind, str) or isinstance(names, str | bytes) or not isinstance(names, Iterable):
            raise IndexDocumentError("provides must map kinds to lists of names", path=where)
        listed = list(names)
        if not all(isinstance(n, str) for n in listed):
            raise IndexDocumentError("provided names must be strings", path=where)
        out[kind] = sorted(listed)
    return out


def _timestamp(value: Any, path: str) -> str:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise IndexDocumentError("published_at must be an aware datetime (with a time zone)", path=path)
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, str):
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise IndexDocumentError(
                f"{value!r} is not an ISO 8601 time such as '2024-03-01T12:00:00Z'", path=path
            ) from None
        return value
    raise IndexDocumentError(f"published_at must be an ISO 8601 string, not {type(value).__name__}", path=path)


# --------------------------------------------------------------------------------------------------
# Checks shared by rendering and parsing
# --------------------------------------------------------------------------------------------------


def _sha256(value: Any, path: str) -> str:
    if not isinstance(value, str) or not _SHA256_RE.fullmatch(value):
        raise IndexDocumentError(f"{value!r} is not a sha256: use 64 lower-case hexadecimal digits", path=path)
    return value


def _size(value: Any, path: str) -> int:
    if type(value) is not int or value < 0:
        raise IndexDocumentError(f"{value!r} is not a size: use a whole number of bytes, 0 or more", path=path)
    return value


def _bool(value: Any, path: str) -> bool:
    if type(value) is not bool:
        raise IndexDocumentError(f"{value!r} is not true or false", path=path)
    return value


def _string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise IndexDocumentError(f"{value!r} is not a string", path=path)
    return value


def _string_map(value: Any, path: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise IndexDocumentError("must be an object of strings", path=path)
    out = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise IndexDocumentError(f"{key!r} is not a string key", path=path)
        out[key] = (
            _constraint_text(item, f"{path}.{key}") if isinstance(item, Constraint) else _string(item, f"{path}.{key}")
        )
    return out


# --------------------------------------------------------------------------------------------------
# Parsing (the client)
# --------------------------------------------------------------------------------------------------


def parse_index(data: bytes | str | Mapping[str, Any], *, name: str | None = None) -> tuple[str, list[Candidate]]:
    """The extension name and its candidates (oldest first) from an index document.

    With ``name``, the document must be about that extension. ``IndexDocumentError`` with the key
    path for anything malformed; keys the format does not define are ignored."""
    document = _load(data)
    fmt = document.get("format")
    if fmt != INDEX_FORMAT:
        raise IndexDocumentError(
            f"index format {fmt!r} is not supported: this client reads format {INDEX_FORMAT} (upgrade it)",
            path="format",
        )
    doc_name = document.get("name")
    if not isinstance(doc_name, str) or not NAME_RE.match(doc_name):
        raise IndexDocumentError(f"{doc_name!r} is not an extension name", path="name")
    if name is not None and doc_name != name:
        raise IndexDocumentError(f"the index document is about {doc_name!r}, not {name!r}", path="name")
    versions = document.get("versions")
    if not isinstance(versions, list):
        raise IndexDocumentError("versions must be a list of version entries", path="versions")
    candidates: dict[SemVer, Candidate] = {}
    for position, entry in enumerate(versions):
        candidate = _parse_entry(doc_name, entry, f"versions[{position}]")
        if candidate.version in candidates:
            raise IndexDocumentError(
                f"version {candidate.version} is listed twice", path=f"versions[{position}].version"
            )
        candidates[candidate.version] = candidate
    return doc_name, [candidates[v] for v in sorted(candidates)]


def _load(data: bytes | str | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(data, Mapping):
        return data
    if isinstance(data, bytes | bytearray) and len(data) > MAX_INDEX_BYTES:
        raise IndexDocumentError(f"the index document is larger than {MAX_INDEX_BYTES} bytes")
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IndexDocumentError(f"the index document is not UTF-8 JSON: {exc}") from None
    if not isinstance(document, dict):
        raise IndexDocumentError(f"the index document must be a JSON object, not {type(document).__name__}")
    return document


def _parse_entry(name: str, entry: Any, path: str) -> Candidate:
    if not isinstance(entry, Mapping):
        raise IndexDocumentError("a version entry must be an object", path=path)
    for key in REQUIRED_ENTRY_KEYS:
        if key not in entry:
            raise IndexDocumentError(f"a version entry needs {key!r}", path=f"{path}.{key}")
    if not isinstance(entry["version"], str):
        raise IndexDocumentError("a version must be a string such as '1.2.0'", path=f"{path}.version")
    try:
        version = parse_version(entry["version"])
    except ExtensionError as exc:
        raise IndexDocumentError(exc.message, path=f"{path}.version") from None
    dependencies = entry.get("dependencies", {})
    if not isinstance(dependencies, Mapping):
        raise IndexDocumentError("dependencies must map extension names to constraints", path=f"{path}.dependencies")
    requirements = []
    for dep_name, text in dependencies.items():
        where = f"{path}.dependencies.{dep_name}"
        if not NAME_RE.match(dep_name):
            raise IndexDocumentError(f"{dep_name!r} is not an extension name", path=where)
        if not isinstance(text, str):
            raise IndexDocumentError("a constraint must be a string such as '^1.2'", path=where)
        try:
            requirements.append(Requirement(dep_name, Constraint.parse(text)))
        except ExtensionError as exc:
            raise IndexDocumentError(exc.message, path=where) from None
    compatibility = _string_map(entry.get("compatibility", {}), f"{path}.compatibility")
    provisioning = None
    if "provisioning_version" in compatibility:
        try:
            provisioning = Constraint.parse(compatibility["provisioning_version"])
        except ExtensionError as exc:
            raise IndexDocumentError(exc.message, path=f"{path}.compatibility.provisioning_version") from None
    provides = _provides(entry.get("provides", {}), f"{path}.provides")
    published = entry.get("published_at")
    if published is not None:
        published = _timestamp(published, f"{path}.published_at")
    return Candidate(
        name=name,
        version=version,
        dependencies=tuple(requirements),
        yanked=_bool(entry["yanked"], f"{path}.yanked"),
        provisioning_version=provisioning,
        type=_string(entry["type"], f"{path}.type"),
        sha256=_sha256(entry["sha256"], f"{path}.sha256"),
        size=_size(entry["size"], f"{path}.size"),
        extra={"compatibility": compatibility, "provides": provides, "published_at": published},
    )


# --------------------------------------------------------------------------------------------------
# A catalogue over index documents (the client)
# --------------------------------------------------------------------------------------------------

Loader = Callable[[str], "bytes | str | Mapping[str, Any] | None"]


class IndexCatalogue:
    """A ``Catalogue`` over index documents, fetched lazily: the first time the resolver asks about
    a name, ``loader(name)`` returns its document (bytes, text or parsed JSON), or None when there is
    no such extension. Each name is loaded at most once.

    ``known_names`` (an iterable, or a callable giving one, called once when needed) lists names
    for "did you mean" suggestions beyond those already loaded."""

    def __init__(
        self,
        loader: Loader | None = None,
        *,
        documents: Iterable[bytes | str | Mapping[str, Any]] = (),
        known_names: Iterable[str] | Callable[[], Iterable[str]] | None = None,
    ) -> None:
        self._loader = loader
        self._known = known_names
        self._versions: dict[str, tuple[Candidate, ...]] = {}
        for document in documents:
            self.add(document)

    def add(self, document: bytes | str | Mapping[str, Any], *, name: str | None = None) -> str:
        """Parse and keep a document; returns the extension's name."""
        doc_name, candidates = parse_index(document, name=name)
        self._versions[doc_name] = tuple(reversed(candidates))
        return doc_name

    @property
    def loaded(self) -> Mapping[str, Sequence[Candidate]]:
        """The names looked at so far and their candidates (newest first; empty when unknown)."""
        return self._versions

    def versions(self, name: str) -> Sequence[Candidate]:
        found = self._versions.get(name)
        if found is None:
            document = self._loader(name) if self._loader is not None else None
            if document is None:
                found = ()
                self._versions[name] = found
            else:
                self.add(document, name=name)
                found = self._versions[name]
        return found

    def names(self) -> Iterable[str]:
        names = {name for name, found in self._versions.items() if found}
        known = self._known() if callable(self._known) else self._known
        if known is not None:
            self._known = list(known)
            names.update(self._known)
        return sorted(names)
