"""``extensions.lock`` (TOML): exactly what an infrastructure directory has installed::

    version = 1
    registry = "http://127.0.0.1:8000"
    requested = ["containerd ^2", "kubernetes"]

    [[extension]]
    name = "kubernetes"
    version = "1.28.6"
    type = "taskserv"
    sha256 = "…"
    source = "http://127.0.0.1:8000/api/v1/extensions/kubernetes/versions/1.28.6/download"
    dependencies = ["containerd ^1.7", "etcd ^3.5"]

``requested`` lists what was asked for explicitly (``taskserv create NAME [--version V]``: the
extension's name and the version or constraint as given), so a later ``create`` resolves every one
of them again and never silently moves away from an explicit request; a lockfile written before it
existed reads as having none. ``dependencies`` are each locked version's requirements
(`extensions.resolver.describe_requirement` spellings).

`Lockfile.load` checks every key and names the bad one (``extension[2].sha256``); `Lockfile.dump`
writes entries sorted by name through a temporary file and a rename, so a reader never sees half a
lockfile, and the same content always gives the same bytes.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from clients.errors import ClientError, os_error_message
from clients.files import atomic_write
from extensions.errors import ExtensionError
from extensions.kinds import TYPES
from extensions.names import NAME_RE
from extensions.versions import Requirement, SemVer, parse_requirement

__all__ = ["LOCKFILE_NAME", "LOCKFILE_VERSION", "LockedExtension", "Lockfile"]

LOCKFILE_NAME = "extensions.lock"
LOCKFILE_VERSION = 1
_HEX = frozenset("0123456789abcdef")
_HINT = "fix it, or write it again with `provisioning taskserv create` (or cluster/providers create)"


@dataclass(frozen=True)
class LockedExtension:
    name: str
    version: str
    type: str
    sha256: str
    source: str
    dependencies: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "type": self.type,
            "sha256": self.sha256,
            "source": self.source,
            "dependencies": list(self.dependencies),
        }


@dataclass
class Lockfile:
    registry: str
    extensions: list[LockedExtension] = field(default_factory=list)
    requested: list[str] = field(default_factory=list)  # "NAME" or "NAME CONSTRAINT", as asked for

    # --- reading ----------------------------------------------------------------------------------

    @classmethod
    def load(cls, path: Path) -> Lockfile:
        """Read and check a lockfile; `ClientError` naming the file and the key on anything wrong."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ClientError(
                f"{path} does not exist: install something first (`provisioning taskserv create NAME --infra DIR`)",
                code="not_found",
            ) from None
        except OSError as exc:
            raise ClientError(f"cannot read {path}: {os_error_message(exc, about=path)}") from None
        except UnicodeDecodeError as exc:
            raise ClientError(f"cannot read {path}: it is not UTF-8 text ({exc.reason}); {_HINT}") from None
        return cls.loads(text, path=str(path))

    @classmethod
    def loads(cls, text: str, *, path: str = LOCKFILE_NAME) -> Lockfile:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ClientError(f"{path} is not valid TOML ({exc}); {_HINT}", code="invalid_lockfile") from None
        return cls.from_dict(data, path=path)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = LOCKFILE_NAME) -> Lockfile:
        def bad(key: str, message: str) -> ClientError:
            return ClientError(f"{path}: {key}: {message}; {_HINT}", code="invalid_lockfile", details=[{"path": key}])

        if data.get("version") != LOCKFILE_VERSION:
            raise bad(
                "version", f"{data.get('version')!r} is not supported: this client reads version {LOCKFILE_VERSION}"
            )
        registry = data.get("registry", "")
        if not isinstance(registry, str):
            raise bad("registry", "must be the registry's URL as a string")
        requested = data.get("requested", [])  # absent in lockfiles written before it existed
        if not isinstance(requested, list) or not all(isinstance(r, str) for r in requested):
            raise bad("requested", 'must be a list of requirements such as "containerd ^2" or "kubernetes"')
        asked: set[str] = set()
        for index, text in enumerate(requested):
            try:
                requirement = parse_requirement(text)
            except ExtensionError as exc:
                raise bad(f"requested[{index}]", exc.message) from None
            if requirement.name in asked:
                raise bad(f"requested[{index}]", f"{requirement.name!r} is requested twice: each name appears once")
            asked.add(requirement.name)
        entries = data.get("extension", [])
        if not isinstance(entries, list):
            raise bad("extension", "must be an array of tables ([[extension]])")
        extensions: list[LockedExtension] = []
        seen: set[str] = set()
        for position, entry in enumerate(entries):
            where = f"extension[{position}]"
            if not isinstance(entry, dict):
                raise bad(where, "must be a table with name, version, type, sha256, source and dependencies")
            for key in ("name", "version", "type", "sha256", "source"):
                if not isinstance(entry.get(key), str):
                    raise bad(f"{where}.{key}", "is missing or not a string")
            name, version, type_, sha256 = entry["name"], entry["version"], entry["type"], entry["sha256"]
            if not NAME_RE.match(name):
                raise bad(f"{where}.name", f"{name!r} is not an extension name (lower-case letters, digits and '-')")
            if name in seen:
                raise bad(f"{where}.name", f"{name!r} is locked twice: each extension appears once")
            seen.add(name)
            try:
                SemVer.parse(version)
            except ExtensionError as exc:
                raise bad(f"{where}.version", exc.message) from None
            if type_ not in TYPES:
                raise bad(f"{where}.type", f"{type_!r} is not a type: use one of {', '.join(TYPES)}")
            if len(sha256) != 64 or not set(sha256) <= _HEX:
                raise bad(f"{where}.sha256", f"{sha256!r} is not a sha256: use 64 lower-case hexadecimal digits")
            dependencies = entry.get("dependencies", [])
            if not isinstance(dependencies, list) or not all(isinstance(d, str) for d in dependencies):
                raise bad(f"{where}.dependencies", 'must be a list of requirements such as "etcd ^3.5"')
            for index, text in enumerate(dependencies):
                try:
                    parse_requirement(text)
                except ExtensionError as exc:
                    raise bad(f"{where}.dependencies[{index}]", exc.message) from None
            extensions.append(
                LockedExtension(
                    name=name,
                    version=version,
                    type=type_,
                    sha256=sha256,
                    source=entry["source"],
                    dependencies=tuple(dependencies),
                )
            )
        return cls(registry=registry, extensions=extensions, requested=list(requested))

    # --- queries ----------------------------------------------------------------------------------

    def get(self, name: str) -> LockedExtension | None:
        return next((e for e in self.extensions if e.name == name), None)

    def pins(self) -> dict[str, str]:
        """name -> locked version (for `extensions.resolver.resolve(locked=...)`)."""
        return {e.name: e.version for e in self.extensions}

    def requirements(self) -> list[Requirement]:
        """The explicit requests, parsed."""
        return [parse_requirement(text) for text in self.requested]

    def problems(self) -> list[str]:
        """Requests and dependencies the locked set does not satisfy (a hand-edited or merged lockfile)."""
        found: list[str] = []
        for text, requirement in zip(self.requested, self.requirements(), strict=True):
            locked = self.get(requirement.name)
            if locked is None:
                found.append(f"{text} was requested, but {requirement.name} is not locked")
            elif not requirement.constraint.contains(locked.version, include_prereleases=True):
                found.append(f"{text} was requested, but {locked.version} is locked")
        for entry in self.extensions:
            for text in entry.dependencies:
                requirement = parse_requirement(text)
                locked = self.get(requirement.name)
                if locked is None:
                    found.append(f"{entry.name} {entry.version} requires {text}, which is not locked")
                elif not requirement.constraint.contains(locked.version, include_prereleases=True):
                    found.append(f"{entry.name} {entry.version} requires {text}, but {locked.version} is locked")
        return found

    # --- writing ----------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": LOCKFILE_VERSION,
            "registry": self.registry,
            "requested": sorted(self.requested, key=lambda text: parse_requirement(text).name),
            "extension": [e.to_dict() for e in sorted(self.extensions, key=lambda e: e.name)],
        }

    def dumps(self) -> str:
        return tomli_w.dumps(self.to_dict())

    def dump(self, path: Path) -> None:
        """Write the lockfile atomically (a temporary file beside it, then a rename)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, self.dumps().encode("utf-8"), mode=0o644)  # a project file, not a private one
