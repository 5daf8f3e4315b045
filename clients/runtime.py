"""The runtime loader (SPEC 5): `ExtensionManager`, mirroring the platform orchestrator's.

    manager = ExtensionManager(home=home, client=RegistryClient(url), runtime_version="1.2.0")
    ext = manager.load_extension("taskserv", "kubernetes")            # newest compatible version
    ext = manager.load_extension("taskserv", "kubernetes", "1.28.6")  # exactly this one
    manager.list_loaded_extensions(); manager.reload_extension("taskserv", "kubernetes")
    manager.metrics.hit_ratio

**Cache.** An LRU of ``cache_size`` (100) entries keyed ``{type}:{name}:{version}``. Loading a key
that is cached is a hit: the entry and its dependencies become the most recently used, nothing is
read. When an entry would exceed the size, the least recently *used* entry is evicted (never the
extension being loaded nor its dependencies). ``version`` is None (the newest version compatible
with ``runtime_version``), an exact version, or a constraint (``1.28``, ``^1.28``: the newest
matching). What a None or constraint load chose is remembered by the manager, so the next such
load is a hit too; ``reload_extension`` and ``clear_cache`` forget it.

**Discovery.** Installed extensions are looked for, in order, in

1. ``.provisioning/extensions/`` (relative to the current directory),
2. ``~/.provisioning-extensions/``,
3. ``/opt/provisioning-extensions/``,
4. each directory of ``$PROVISIONING_EXTENSIONS_PATH`` (``os.pathsep``-separated),

and then in the registry, through the local store (``clients.store``: packages by sha256, verified,
unpacked into ``HOME/store/trees/{type}/{name}/{version}/``). In a discovery directory an extension
is either ``{dir}/{type}s/{name}/extension.toml`` (one version: whatever its extension.toml says)
or ``{dir}/{type}s/{name}/{version}/extension.toml`` (versions side by side, the layout of the
bundled examples and of the store). The directory names must agree with extension.toml.

Versions are chosen by the shared resolver (`extensions.resolver.resolve`), dependencies included,
with the runtime's version as ``runtime_version``. Resolution first sees, for each name, only the
versions installed in the *first* discovery directory that has the name (the registry's only for
names installed nowhere): an installed extension wins over the registry, and an earlier directory
over a later one. Only when that has no answer (a version that is not installed was asked for, a
dependency's constraint excludes the installed version) does it see every directory and the
registry together, still preferring the installed versions it saw first (as lock pins).

**Policy** (environment, read by `LoadPolicy.from_env`):

- ``PROVISIONING_EXTENSION_MODE=full`` (default): anything may load except blocked names;
- ``restricted``: only names in ``PROVISIONING_ALLOWED_EXTENSIONS`` may load, dependencies
  included (an empty list allows nothing); blocked names never;
- ``disabled``: nothing loads or reloads (listing and clearing still work).

``PROVISIONING_BLOCKED_EXTENSIONS`` is refused in every mode. Lists are comma- or
whitespace-separated; an entry is ``NAME`` (any type), ``TYPE:NAME`` or ``TYPE:*``. The whole set
to load (the extension and its dependencies) is checked before anything is loaded, and a cached
extension is checked again on every hit.

**Integrity.** A tree from the store is checked file by file against its MANIFEST.json (every
listed file with its size and sha256, and no other file), on every cold load and reload; the
package itself was verified against the index's sha256 by the store. An installed tree with a
MANIFEST.json (an unpacked package) is checked the same way; one without (an author's source
directory) is taken as it is.

**Nushell.** When ``nu`` is available (``extensions.checks.find_nu``), every ``nulib/**/*.nu`` of an
extension must parse in Nushell (the content checks of `extensions.checks`, `nu --ide-check`)
before it is loaded; the results are on ``LoadResult.checks``. Without ``nu`` the step is reported
as skipped, never as passed.

**State.** With ``persist=True`` (the default) the cache is mirrored in ``HOME/runtime/state.json``
(atomic replace, under the file lock ``HOME/locks/runtime.lock``), so another process (``module
list``, ``runtime serve``) sees what was loaded. Every change (cold load, reload, eviction, clear)
first re-reads the file if another process changed it, then writes it; hits change only the
in-memory recency. Entries whose directory has gone are dropped when the file is read.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import logging
import os
import re
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clients.errors import ClientError, UsageError, home_unusable
from clients.registry_client import IntegrityError, RegistryUnavailable
from extensions.errors import ExtensionError
from extensions.kinds import TYPES as EXTENSION_TYPES
from extensions.kinds import plural, singular
from extensions.names import is_valid_name, suggest_name
from extensions.versions import Constraint, Requirement, SemVer, runs_on

if TYPE_CHECKING:
    from clients.registry_client import RegistryClient
    from clients.store import Store
    from extensions.checks import CheckResult
    from extensions.index import IndexCatalogue
    from extensions.manifest import Manifest
    from extensions.resolver import Candidate, Resolution

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_CACHE_SIZE",
    "EXTENSION_TYPES",
    "DependencyError",
    "Extension",
    "ExtensionManager",
    "ExtensionMetadata",
    "ExtensionNotFoundError",
    "IntegrityError",
    "LoadCheckError",
    "LoadPolicy",
    "LoadResult",
    "LoaderError",
    "LoaderMetrics",
    "NotLoadedError",
    "PolicyError",
    "VersionNotFoundError",
    "default_search_paths",
    "discover",
    "normalise_type",
    "runtime_version_from_env",
]

DEFAULT_CACHE_SIZE = 100
STATE_FORMAT = 1
MODES = ("full", "restricted", "disabled")
_LOAD_TIMES_KEPT = 1000


# --------------------------------------------------------------------------------------------------
# Errors: one ClientError subclass per failure SPEC 5 names, each with a "reason" in its details
# --------------------------------------------------------------------------------------------------


class LoaderError(ClientError):
    """A load, reload or discovery failed; ``details[0]["reason"]`` says which way."""


class ExtensionNotFoundError(LoaderError):
    """No extension of that type and name, anywhere; ``suggestions`` are close names."""

    def __init__(self, message: str, *, suggestions: Sequence[str] = (), details: list[Any] | None = None) -> None:
        super().__init__(message, code="not_found", details=details)
        self.suggestions = list(suggestions)


class VersionNotFoundError(LoaderError):
    """The extension exists but no version fits; ``available`` lists the versions there are."""

    def __init__(self, message: str, *, available: Sequence[str] = (), details: list[Any] | None = None) -> None:
        super().__init__(message, code="not_found", details=details)
        self.available = list(available)


class DependencyError(LoaderError):
    """Dependencies are missing (``missing``) or no version of some fits every constraint
    (``conflicting``); ``details`` are the resolver's reasons (``unknown``, ``conflict``, ...)."""

    def __init__(
        self,
        message: str,
        *,
        missing: Sequence[str] = (),
        conflicting: Sequence[str] = (),
        details: list[Any] | None = None,
    ) -> None:
        super().__init__(message, code="resolution_failed", details=details)
        self.missing = list(missing)
        self.conflicting = list(conflicting)


class PolicyError(LoaderError):
    """The runtime's policy (mode, allowed and blocked lists) refuses the extension."""

    def __init__(self, message: str, *, details: list[Any] | None = None) -> None:
        super().__init__(message, code="forbidden", details=details)


class NotLoadedError(LoaderError):
    """``reload_extension`` of an extension that is not loaded."""

    def __init__(self, message: str, *, details: list[Any] | None = None) -> None:
        super().__init__(message, code="not_found", details=details)


class LoadCheckError(LoaderError):
    """The extension's Nushell code does not parse; ``details`` are the check results."""

    def __init__(self, message: str, *, details: list[Any] | None = None) -> None:
        super().__init__(message, code="check_failed", details=details)


# --------------------------------------------------------------------------------------------------
# What is loaded
# --------------------------------------------------------------------------------------------------


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _parse_timestamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass(frozen=True)
class ExtensionMetadata:
    """The platform's ``ExtensionMetadata``. ``dependencies`` are the names of the extensions this
    one needs (their constraints are in extension.toml); ``author`` joins the authors."""

    name: str
    version: str
    description: str
    extension_type: str
    dependencies: tuple[str, ...] = ()
    author: str | None = None
    repository: str | None = None

    @classmethod
    def from_manifest(cls, manifest: Manifest) -> ExtensionMetadata:
        return cls(
            name=str(manifest.name),
            version=str(manifest.version),
            description=manifest.description,
            extension_type=manifest.type,
            dependencies=tuple(str(d.name) for d in manifest.dependencies),
            author=", ".join(manifest.authors) or None,
            repository=manifest.repository,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "extension_type": self.extension_type,
            "dependencies": list(self.dependencies),
            "author": self.author,
            "repository": self.repository,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExtensionMetadata:
        return cls(
            name=str(data["name"]),
            version=str(data["version"]),
            description=str(data.get("description", "")),
            extension_type=str(data["extension_type"]),
            dependencies=tuple(str(d) for d in data.get("dependencies", ())),
            author=data.get("author"),
            repository=data.get("repository"),
        )


@dataclass(frozen=True)
class Extension:
    """A loaded extension: the platform's ``Extension`` (``metadata``, ``path``, ``loaded_at``) plus
    where it came from (``source``: ``"local"`` for a discovery directory, ``"registry"`` for the
    store), the package's ``sha256`` (registry only) and the cache keys of its dependencies."""

    metadata: ExtensionMetadata
    path: str
    loaded_at: datetime
    source: str = "local"
    sha256: str = ""
    dependency_keys: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """The cache key, ``{type}:{name}:{version}``."""
        return f"{self.metadata.extension_type}:{self.metadata.name}:{self.metadata.version}"

    def to_dict(self) -> dict[str, Any]:
        """The shape of the platform's ``GET /api/v1/extensions/loaded`` items, plus ``source``."""
        return {
            "metadata": self.metadata.to_dict(),
            "path": self.path,
            "loaded_at": _timestamp(self.loaded_at),
            "source": self.source,
        }

    def to_state(self) -> dict[str, Any]:
        return {
            **self.to_dict(),
            "key": self.key,
            "sha256": self.sha256,
            "dependency_keys": list(self.dependency_keys),
        }

    @classmethod
    def from_state(cls, data: Mapping[str, Any]) -> Extension:
        return cls(
            metadata=ExtensionMetadata.from_dict(data["metadata"]),
            path=str(data["path"]),
            loaded_at=_parse_timestamp(str(data["loaded_at"])),
            source=str(data.get("source", "local")),
            sha256=str(data.get("sha256", "")),
            dependency_keys=tuple(str(k) for k in data.get("dependency_keys", ())),
        )


@dataclass(frozen=True)
class LoadResult:
    """What one `ExtensionManager.load` did: the extension, whether the cache answered, the
    extensions read from disk by this call (dependencies first) and the Nushell check results."""

    extension: Extension
    cached: bool
    loaded: tuple[Extension, ...] = ()
    checks: tuple[CheckResult, ...] = ()
    reloaded: tuple[Extension, ...] = ()  # a reload: every version of the extension read again, oldest first

    def to_dict(self) -> dict[str, Any]:
        return {
            "extension": self.extension.to_dict(),
            "cached": self.cached,
            "loaded": [e.key for e in self.loaded],
            "reloaded": [e.key for e in self.reloaded],
            "checks": [c.as_dict() for c in self.checks],
        }

    def reload_message(self) -> str:
        """The platform's answer to a reload, ``Extension NAME reloaded``, naming the versions when
        several were loaded (and so reloaded)."""
        versions = [e.metadata.version for e in self.reloaded]
        suffix = f" ({', '.join(versions)})" if len(versions) > 1 else ""
        return f"Extension {self.extension.metadata.name} reloaded{suffix}"


@dataclass
class LoaderMetrics:
    """Counters of one manager. ``loads`` counts `load_extension` calls (failed ones too, also
    counted in ``failures``), ``cache_hits`` those the cache answered (``hit_ratio`` is their
    share); ``evictions`` the entries the LRU dropped; ``dependency_loads`` the dependencies read
    along the way; ``load_times`` the seconds of the last 1000 cold loads (dependencies included).
    ``cache_misses`` = ``loads - cache_hits`` (failures included)."""

    loads: int = 0
    cache_hits: int = 0
    failures: int = 0
    evictions: int = 0
    reloads: int = 0
    dependency_loads: int = 0
    load_times: deque[float] = field(default_factory=lambda: deque(maxlen=_LOAD_TIMES_KEPT))

    @property
    def cache_misses(self) -> int:
        return self.loads - self.cache_hits

    @property
    def hit_ratio(self) -> float:
        """``cache_hits / loads`` (0.0 before the first load)."""
        return self.cache_hits / self.loads if self.loads else 0.0

    def to_dict(self) -> dict[str, Any]:
        times = sorted(self.load_times)

        def pct(p: float) -> float | None:
            if not times:
                return None
            return round(times[min(len(times) - 1, round(p / 100 * (len(times) - 1)))] * 1000, 3)

        return {
            "loads": self.loads,
            "cache_hits": self.cache_hits,
            "cache_misses": self.cache_misses,
            "hit_ratio": round(self.hit_ratio, 4),
            "failures": self.failures,
            "evictions": self.evictions,
            "reloads": self.reloads,
            "dependency_loads": self.dependency_loads,
            "load_time_ms": {
                "count": len(times),
                "mean": round(sum(times) / len(times) * 1000, 3) if times else None,
                "p50": pct(50),
                "p99": pct(99),
                "max": round(times[-1] * 1000, 3) if times else None,
            },
        }


# --------------------------------------------------------------------------------------------------
# Types, versions and the runtime's version
# --------------------------------------------------------------------------------------------------


def normalise_type(text: str) -> str:
    """``taskserv`` (also ``Taskserv``, the platform's spelling, and ``taskservs``); UsageError else."""
    value = singular(str(text).strip().lower())
    if value is None:
        raise UsageError(
            f"unknown extension type {str(text)[:40]!r}: use one of {', '.join(EXTENSION_TYPES)}",
            details=[{"path": "type", "allowed": list(EXTENSION_TYPES)}],
        )
    return value


def _exact_version(text: str) -> SemVer:
    try:
        return SemVer.parse(str(text).strip().removeprefix("=").strip()).without_build()
    except ExtensionError as exc:
        raise UsageError(
            f"version {str(text)[:80]!r} is not a version: {exc.message}", details=[{"path": "version"}]
        ) from None


def _check_name(name: str) -> str:
    if not is_valid_name(name):
        suggestion = suggest_name(str(name))
        hint = f"; did you mean {suggestion!r}?" if suggestion else ""
        raise UsageError(
            f"{str(name)[:80]!r} is not an extension name: lower-case letters, digits and single hyphens, "
            f"starting with a letter, 2 to 64 characters{hint}",
            details=[{"path": "name", "suggestion": suggestion}],
        )
    return name


def runtime_version_from_env(value: str | None = None, environ: Mapping[str, str] | None = None) -> str | None:
    """The runtime's version: ``value`` (``--runtime-version``), else ``$PROVISIONING_VERSION``, else
    None (no compatibility filter). UsageError when it is not SemVer."""
    env = os.environ if environ is None else environ
    text = value if value else env.get("PROVISIONING_VERSION") or None
    if text is None:
        return None
    try:
        return str(SemVer.parse(text.strip()))
    except ExtensionError as exc:
        where = "--runtime-version" if value else "PROVISIONING_VERSION"
        raise UsageError(f"{where}: {exc.message}", details=[{"path": where}]) from None


@dataclass(frozen=True)
class _Spec:
    """A requested version: exact, a constraint, or any."""

    exact: SemVer | None
    constraint: Constraint

    @property
    def alias(self) -> str:
        return str(self.constraint)

    @classmethod
    def parse(cls, version: str | None) -> _Spec:
        if version is None or not str(version).strip() or str(version).strip() == "*":
            return cls(None, Constraint.ANY)
        text = str(version).strip().removeprefix("=").strip()
        try:
            exact = SemVer.parse(text).without_build()
        except ExtensionError:
            pass
        else:
            return cls(exact, Constraint.parse(f"={exact}"))
        try:
            return cls(None, Constraint.parse(str(version)))
        except ExtensionError as exc:
            raise UsageError(
                f"version {str(version)[:80]!r} is neither a version nor a constraint: {exc.message}",
                details=[{"path": "version"}],
            ) from None


# --------------------------------------------------------------------------------------------------
# Policy
# --------------------------------------------------------------------------------------------------


def _parse_entries(text: str | None, variable: str) -> frozenset[str]:
    entries = set()
    for index, raw in enumerate(t for t in re.split(r"[\s,]+", text or "") if t):
        entry = raw.strip().lower()
        kind, sep, name = entry.rpartition(":")
        ok = (not sep or kind in EXTENSION_TYPES) and (is_valid_name(name) or (sep and name == "*"))
        if not ok:
            raise UsageError(
                f"{variable}[{index}]: {raw[:80]!r} is not an entry: use NAME, TYPE:NAME or TYPE:* "
                f"(TYPE one of {', '.join(EXTENSION_TYPES)}), separated by commas or spaces",
                details=[{"path": f"{variable}[{index}]"}],
            )
        entries.add(entry)
    return frozenset(entries)


@dataclass(frozen=True)
class LoadPolicy:
    """What this runtime may load (see the module docstring)."""

    mode: str = "full"
    allowed: frozenset[str] = frozenset()
    blocked: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise UsageError(
                f"PROVISIONING_EXTENSION_MODE={self.mode[:40]!r} is not a mode: use one of {', '.join(MODES)}",
                details=[{"path": "PROVISIONING_EXTENSION_MODE", "allowed": list(MODES)}],
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LoadPolicy:
        env = os.environ if environ is None else environ
        return cls(
            mode=(env.get("PROVISIONING_EXTENSION_MODE") or "full").strip().lower(),
            allowed=_parse_entries(env.get("PROVISIONING_ALLOWED_EXTENSIONS"), "PROVISIONING_ALLOWED_EXTENSIONS"),
            blocked=_parse_entries(env.get("PROVISIONING_BLOCKED_EXTENSIONS"), "PROVISIONING_BLOCKED_EXTENSIONS"),
        )

    @staticmethod
    def _matches(entries: frozenset[str], kind: str, name: str) -> bool:
        return name in entries or f"{kind}:{name}" in entries or f"{kind}:*" in entries

    def refusal(self, kind: str, name: str) -> str | None:
        """Why ``kind name`` may not load (``blocked``, ``not_allowed``, ``disabled``), or None."""
        if self._matches(self.blocked, kind, name):
            return "blocked"
        if self.mode == "disabled":
            return "disabled"
        if self.mode == "restricted" and not self._matches(self.allowed, kind, name):
            return "not_allowed"
        return None

    def check(self, kind: str, name: str, *, required_by: str | None = None) -> None:
        reason = self.refusal(kind, name)
        if reason is None:
            return
        what = f"{kind} {name}" + (f" (required by {required_by})" if required_by else "")
        why = {
            "blocked": "it is listed in PROVISIONING_BLOCKED_EXTENSIONS, which is refused in every mode",
            "disabled": "PROVISIONING_EXTENSION_MODE=disabled loads nothing; allowed modes: full, restricted",
            "not_allowed": (
                "PROVISIONING_EXTENSION_MODE=restricted loads only what PROVISIONING_ALLOWED_EXTENSIONS lists "
                f"(NAME, TYPE:NAME or TYPE:*); it lists {', '.join(sorted(self.allowed)) or 'nothing'}"
            ),
        }[reason]
        raise PolicyError(
            f"the runtime's policy refuses {what}: {why}",
            details=[
                {"reason": reason, "mode": self.mode, "type": kind, "name": name, "required_by": required_by},
            ],
        )


# --------------------------------------------------------------------------------------------------
# Discovery directories
# --------------------------------------------------------------------------------------------------


def default_search_paths(
    *, cwd: Path | None = None, user_home: Path | None = None, environ: Mapping[str, str] | None = None
) -> list[Path]:
    """The discovery directories of SPEC 5, in order (whether they exist or not)."""
    env = os.environ if environ is None else environ
    paths = [
        (cwd or Path.cwd()) / ".provisioning" / "extensions",
        (user_home or Path(env.get("HOME") or Path.home())) / ".provisioning-extensions",
        Path("/opt/provisioning-extensions"),
    ]
    paths += [Path(p).expanduser() for p in (env.get("PROVISIONING_EXTENSIONS_PATH") or "").split(os.pathsep) if p]
    return paths


class _LocalIndex:
    """Installed extensions in the discovery directories, read lazily per name."""

    def __init__(self, dirs: Sequence[Path]) -> None:
        self.dirs = list(dirs)
        self._found: dict[str, list[tuple[int, Candidate]]] = {}

    def _scan(self, name: str) -> list[tuple[int, Candidate]]:
        found = self._found.get(name)
        if found is not None:
            return found
        found = []
        for rank, directory in enumerate(self.dirs):
            for kind in EXTENSION_TYPES:
                base = directory / plural(kind) / name
                if (base / "extension.toml").is_file():
                    found.append((rank, _local_candidate(base, kind, name, None)))
                elif base.is_dir():
                    for sub in sorted(base.iterdir()):
                        if (sub / "extension.toml").is_file():
                            found.append((rank, _local_candidate(sub, kind, name, sub.name)))
        self._found[name] = found
        return found

    def seen(self) -> list[str]:
        return [name for name, found in self._found.items() if found]

    def first(self, name: str) -> list[Candidate]:
        """The versions in the first directory that has ``name``."""
        found = self._scan(name)
        if not found:
            return []
        rank = found[0][0]
        return _dedupe(c for r, c in found if r == rank)

    def every(self, name: str) -> list[Candidate]:
        """The versions in every directory; an earlier directory wins for the same version."""
        return _dedupe(c for _, c in self._scan(name))

    def preferred(self, name: str, runtime: SemVer | None) -> SemVer | None:
        """The newest runtime-compatible version in the first directory with one."""
        by_rank: dict[int, list[Candidate]] = {}
        for rank, candidate in self._scan(name):
            by_rank.setdefault(rank, []).append(candidate)
        for rank in sorted(by_rank):
            fits = [
                c.version
                for c in by_rank[rank]
                if runs_on(c.provisioning_version, runtime) and not c.version.is_prerelease
            ]
            if fits:
                return max(fits)
        return None

    def names(self) -> set[str]:
        names: set[str] = set()
        for directory in self.dirs:
            for kind in EXTENSION_TYPES:
                with contextlib.suppress(OSError):
                    names.update(p.name for p in (directory / plural(kind)).iterdir() if is_valid_name(p.name))
        return names


def _misplaced(dirs: Sequence[Path], kind: str, name: str) -> Path | None:
    """An extension put straight into a discovery directory (``{dir}/{name}/extension.toml``, or with a
    version directory), which is not searched: ``{dir}/{name}``, so that the error can say where it goes."""
    for directory in dirs:
        base = directory / name
        with contextlib.suppress(OSError):
            if (base / "extension.toml").is_file() or any(base.glob("*/extension.toml")):
                return base
    return None


def _dedupe(candidates: Iterator[Candidate] | Sequence[Candidate]) -> list[Candidate]:
    seen: dict[SemVer, Candidate] = {}
    for candidate in candidates:
        seen.setdefault(candidate.version, candidate)
    return sorted(seen.values(), key=lambda c: c.version, reverse=True)


def _read_manifest(path: Path) -> Manifest:
    from extensions.manifest import load_manifest

    try:
        return load_manifest(path)
    except ExtensionError as exc:
        raise ClientError(f"{path / 'extension.toml'}: {exc}", code=exc.code, details=exc.details_list()) from None


def _local_candidate(path: Path, kind: str, name: str, version_dir: str | None) -> Candidate:
    from extensions.resolver import Candidate

    manifest = _read_manifest(path)
    wrong = []
    if manifest.name != name:
        wrong.append(f"its name is {manifest.name!r}, not {name!r}")
    if manifest.type != kind:
        wrong.append(f"its type is {manifest.type!r}, not {kind!r}")
    if version_dir is not None and version_dir != str(manifest.version):
        wrong.append(f"its version is {manifest.version}, not {version_dir}")
    if wrong:
        raise ClientError(
            f"{path / 'extension.toml'} does not match its directory: {'; '.join(wrong)}. An installed extension "
            "lives in {dir}/{type}s/{name}/ or {dir}/{type}s/{name}/{version}/",
            code="invalid_manifest",
            details=[{"path": str(path / "extension.toml")}],
        )
    return Candidate(
        name=name,
        version=manifest.version,
        dependencies=tuple(Requirement(d.name, d.constraint) for d in manifest.dependencies),
        provisioning_version=manifest.provisioning_version,
        type=manifest.type,
        extra={"source": "local", "path": str(path), "manifest": manifest},
    )


class _Sources:
    """The catalogue the resolver sees: installed versions and the registry's (module docstring)."""

    def __init__(self, local: _LocalIndex, registry: IndexCatalogue | None, *, shadow: bool) -> None:
        self.local = local
        self.registry = registry
        self.shadow = shadow
        self.unavailable: RegistryUnavailable | None = None  # the registry could not be asked

    def versions(self, name: str) -> Sequence[Candidate]:
        installed = self.local.first(name) if self.shadow else self.local.every(name)
        if self.registry is None or (installed and self.shadow):
            return installed
        remote = self._remote(name, tolerate=bool(installed))
        have = {c.version for c in installed}
        return [*installed, *(c for c in remote if c.version not in have)]

    def _remote(self, name: str, *, tolerate: bool) -> Sequence[Candidate]:
        assert self.registry is not None
        try:
            return self.registry.versions(name)
        except RegistryUnavailable as exc:
            if tolerate:
                self.unavailable = exc
                return ()
            raise

    def names(self) -> list[str]:
        names = self.local.names()
        if self.registry is not None:
            with contextlib.suppress(ClientError):
                names.update(self.registry.names())
        return sorted(names)


# --------------------------------------------------------------------------------------------------
# The manager
# --------------------------------------------------------------------------------------------------


class ExtensionManager:
    """The runtime loader: an LRU cache of loaded extensions over discovery directories and the
    registry (module docstring). Thread-safe; one manager per runtime."""

    def __init__(
        self,
        *,
        home: Path,
        client: RegistryClient | None,
        runtime_version: str | None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        search_paths: Sequence[Path] | None = None,
        policy: LoadPolicy | None = None,
        persist: bool = True,
        check_nushell: bool = True,
        nu: str | None = None,
        progress: Callable[[str], Callable[[int, int | None], None]] | None = None,
    ) -> None:
        if cache_size < 1:
            raise ValueError(f"cache_size must be at least 1, not {cache_size}")
        self.home = Path(home)
        self.client = client
        self.runtime_version: SemVer | None = None if runtime_version is None else SemVer.parse(runtime_version)
        self.cache_size = cache_size
        self.search_paths = list(default_search_paths() if search_paths is None else search_paths)
        self.policy = policy if policy is not None else LoadPolicy.from_env()
        self.persist = persist
        self.check_nushell = check_nushell
        self.nu = nu
        self.progress = progress
        self.metrics = LoaderMetrics()
        self._cache: OrderedDict[str, Extension] = OrderedDict()
        self._aliases: dict[tuple[str, str, str], str] = {}
        self._lock = threading.RLock()
        self._store: Store | None = None
        self._state_stamp: tuple[int, int, int] | None = None
        self._generation = 0
        if persist:
            self._sync()

    # --- the platform's API ------------------------------------------------------------------------

    def load_extension(self, type: str, name: str, version: str | None = None) -> Extension:
        """The loaded extension (from the cache, or found, verified and read with its dependencies)."""
        return self.load(type, name, version).extension

    def list_loaded_extensions(self) -> list[Extension]:
        """Every cached extension, least recently used first."""
        with self._lock:
            if self.persist:
                self._sync()
            return list(self._cache.values())

    def reload_extension(self, type: str, name: str, version: str | None = None) -> Extension:
        """Read a loaded extension again: found again, verified, re-read, ``loaded_at`` set to now.
        Several versions of one extension may be loaded at once: without ``version`` every loaded
        version is reloaded (the most recently used one is returned); with it, only that version.
        NotLoadedError if it (or that version) is not loaded, listing the versions that are."""
        return self.reload(type, name, version).extension

    def reload(self, type: str, name: str, version: str | None = None) -> LoadResult:
        """`reload_extension`, with what it read (``reloaded``: each version of the extension, oldest
        first; ``loaded``: everything read, dependencies included) and the Nushell checks."""
        kind = normalise_type(type)
        _check_name(name)
        wanted = None if version is None else _exact_version(version)
        with self._lock, self._writing():
            every = [e for e in self._cache.values() if _same(e, kind, name)]
            chosen = [e for e in every if wanted is None or SemVer.parse(e.metadata.version) == wanted]
            if not chosen:
                raise self._not_loaded(kind, name, wanted, every)
            self.policy.check(kind, name)
            for alias in [a for a in self._aliases if a[:2] == (kind, name)]:
                del self._aliases[alias]
            loaded_now: list[Extension] = []
            checks: list[CheckResult] = []
            reloaded: list[Extension] = []
            for extension in chosen:  # least recently used first: the last one ends most recently used
                result = self._load_cold(kind, name, _Spec.parse(extension.metadata.version), force=True)
                loaded_now.extend(result.loaded)
                checks.extend(result.checks)
                reloaded.append(result.extension)
            self.metrics.reloads += 1
            return replace(
                result,
                loaded=tuple(loaded_now),
                checks=tuple(checks),
                reloaded=tuple(sorted(reloaded, key=lambda e: SemVer.parse(e.metadata.version))),
            )

    def _not_loaded(self, kind: str, name: str, wanted: SemVer | None, loaded: Sequence[Extension]) -> NotLoadedError:
        versions = sorted((e.metadata.version for e in loaded), key=SemVer.parse)
        if wanted is not None and versions:
            message = (
                f"{kind} {name} {wanted} is not loaded, so it cannot be reloaded (loaded versions: "
                f"{', '.join(versions)}; leave out --version to reload them all)"
            )
        else:
            what = f"{kind} {name}" + (f" {wanted}" if wanted is not None else "")
            message = (
                f"{what} is not loaded, so it cannot be reloaded (loaded: {', '.join(self._cache) or 'nothing'}); "
                f"load it with `provisioning module load {kind} {name}`"
            )
        return NotLoadedError(
            message,
            details=[
                {
                    "reason": "not_loaded",
                    "type": kind,
                    "name": name,
                    "version": None if wanted is None else str(wanted),
                    "loaded_versions": versions,
                    "loaded": list(self._cache),
                }
            ],
        )

    def is_extension_loaded(self, type: str, name: str) -> bool:
        kind = normalise_type(type)
        with self._lock:
            if self.persist:
                self._sync()
            return any(_same(e, kind, name) for e in self._cache.values())

    def clear_cache(self) -> None:
        """Forget every loaded extension (and what None/constraint loads chose)."""
        with self._lock, self._writing():
            self._cache.clear()
            self._aliases.clear()

    # --- the richer call the CLI uses -------------------------------------------------------------

    def load(self, type: str, name: str, version: str | None = None) -> LoadResult:
        """`load_extension`, with what it did: cached or not, what was read, the Nushell checks."""
        start = time.perf_counter()
        kind = normalise_type(type)
        _check_name(name)
        spec = _Spec.parse(version)
        with self._lock:
            self.metrics.loads += 1
            key = (
                f"{kind}:{name}:{spec.exact}" if spec.exact is not None else self._aliases.get((kind, name, spec.alias))
            )
            hit = self._cache.get(key) if key is not None else None
            try:
                if hit is not None and all(k in self._cache for k in hit.dependency_keys):
                    self.policy.check(kind, name)
                    for dep in hit.dependency_keys:
                        self._check_policy_key(dep, required_by=hit.key)
                    for dep in hit.dependency_keys:
                        self._cache.move_to_end(dep)
                    self._cache.move_to_end(hit.key)
                    self.metrics.cache_hits += 1
                    return LoadResult(extension=hit, cached=True)
                self.policy.check(kind, name)
                with self._writing():
                    result = self._load_cold(kind, name, spec, force=False)
            except BaseException:
                self.metrics.failures += 1
                raise
            if result.cached:
                self.metrics.cache_hits += 1
            else:
                self.metrics.load_times.append(time.perf_counter() - start)
            if spec.exact is None:
                self._aliases[(kind, name, spec.alias)] = result.extension.key
            return result

    # --- loading ----------------------------------------------------------------------------------

    def _load_cold(self, kind: str, name: str, spec: _Spec, *, force: bool) -> LoadResult:
        plan = self._plan(kind, name, spec)
        root = plan[-1]
        by_name = {c.name: c for c in plan}
        for candidate in plan[:-1]:
            self.policy.check(candidate.type, candidate.name, required_by=f"{kind} {name} {root.version}")
        keys = {_key_of(c) for c in plan}
        root_key = _key_of(root)
        if (
            not force
            and root_key in self._cache
            and all(k in self._cache for k in self._cache[root_key].dependency_keys)
        ):
            for key in (*self._cache[root_key].dependency_keys, root_key):
                self._cache.move_to_end(key)
            return LoadResult(extension=self._cache[root_key], cached=True)
        loaded: list[Extension] = []
        checks: list[CheckResult] = []
        for candidate in plan:
            key = _key_of(candidate)
            is_root = candidate is root
            if key in self._cache and not (force and is_root):
                self._cache.move_to_end(key)
                continue
            dependency_keys = tuple(_key_of(by_name[r.name]) for r in candidate.dependencies if r.name in by_name)
            extension, results = self._materialise(candidate, dependency_keys)
            checks.extend(results)
            self._insert(extension, protect=keys)
            loaded.append(extension)
            if not is_root:
                self.metrics.dependency_loads += 1
        return LoadResult(extension=self._cache[root_key], cached=False, loaded=tuple(loaded), checks=tuple(checks))

    def _insert(self, extension: Extension, *, protect: set[str]) -> None:
        key = extension.key
        self._cache.pop(key, None)
        while len(self._cache) >= self.cache_size:
            victim = next((k for k in self._cache if k not in protect), None)
            if victim is None:
                break  # the extension and its dependencies alone exceed the size: keep them all
            del self._cache[victim]
            self.metrics.evictions += 1
            for alias in [a for a, k in self._aliases.items() if k == victim]:
                del self._aliases[alias]
        self._cache[key] = extension

    def _check_policy_key(self, key: str, *, required_by: str) -> None:
        kind, name, _ = key.split(":", 2)
        self.policy.check(kind, name, required_by=required_by)

    def _registry(self) -> IndexCatalogue | None:
        return None if self.client is None else self.client.catalogue()

    def _plan(self, kind: str, name: str, spec: _Spec) -> list[Candidate]:
        """The candidates to load, dependencies first, the extension last."""
        from extensions.errors import ResolutionError
        from extensions.resolver import resolve

        local = _LocalIndex(self.search_paths)
        registry = self._registry()
        root = Requirement(name, spec.constraint)
        first = _Sources(local, registry, shadow=True)
        resolution: Resolution
        try:
            resolution = resolve([root], first, runtime_version=self.runtime_version)
        except ResolutionError as exc:
            seen = local.seen()
            if not seen:
                raise self._explain(exc, kind, name, spec, first) from None
            everything = _Sources(local, registry, shadow=False)
            prefer = {n: v for n in seen if (v := local.preferred(n, self.runtime_version)) is not None}
            try:
                resolution = resolve([root], everything, runtime_version=self.runtime_version, locked=prefer)
            except ResolutionError as again:
                raise self._explain(again, kind, name, spec, everything) from None
        chosen = resolution.resolved[name]
        if chosen.type and chosen.type != kind:
            raise ExtensionNotFoundError(
                f"there is no {kind} named {name}: {name} is a {chosen.type}; "
                f"use `provisioning module load {chosen.type} {name}`",
                suggestions=[f"{chosen.type}:{name}"],
                details=[{"reason": "wrong_type", "type": kind, "name": name, "actual_type": chosen.type}],
            )
        order = [n for n in resolution.install_order if n != name]
        return [resolution.resolved[n] for n in order] + [chosen]

    def _explain(self, error: ExtensionError, kind: str, name: str, spec: _Spec, sources: _Sources) -> LoaderError:
        """The resolver's failure as the specific error SPEC 5 asks for."""
        explained = self._explain_error(error, kind, name, spec, sources)
        if sources.unavailable is not None:
            explained.message += f" (only installed versions were seen: {sources.unavailable.message})"
            explained.details.append({"reason": "registry_unavailable", "message": sources.unavailable.message})
        return explained

    def _explain_error(
        self, error: ExtensionError, kind: str, name: str, spec: _Spec, sources: _Sources
    ) -> LoaderError:
        from extensions.resolver import describe_constraint

        details = error.details_list()
        first = details[0] if details and isinstance(details[0], dict) else {}
        reason = first.get("reason")
        is_root = first.get("name") == name and first.get("required_by") is None
        if reason == "unknown" and is_root:
            suggestions = list(first.get("suggestions") or [])
            if not suggestions:
                suggestions = difflib.get_close_matches(name, sources.names(), n=3, cutoff=0.7)
            hint = f"; did you mean {' or '.join(repr(s) for s in suggestions)}?" if suggestions else ""
            misplaced = _misplaced(self.search_paths, kind, name)
            if misplaced is not None:  # far likelier what was meant than a close name
                hint = (
                    f"; {misplaced / 'extension.toml'} is not looked at: an installed {kind} lives in "
                    f"{misplaced.parent / f'{kind}s' / name}/ (or .../{name}/VERSION/)"
                )
            where = "the discovery directories" + (" or the registry" if self.client is not None else "")
            return ExtensionNotFoundError(
                f"{kind} {name} not found in {where}{hint}",
                suggestions=suggestions,
                details=[
                    {
                        "reason": "extension_not_found",
                        "type": kind,
                        "name": name,
                        "suggestions": suggestions,
                        "searched": [str(p) for p in self.search_paths],
                        "misplaced": None if misplaced is None else str(misplaced),
                    }
                ],
            )
        if reason == "no_matching_version" and is_root:
            available = [str(c.version) for c in sorted(sources.versions(name), key=lambda c: c.version)]
            skipped = list(first.get("skipped") or [])
            why = "; ".join(f"{s['version']} {s['why']}" for s in skipped if s.get("version") in available)
            listed = f"available: {', '.join(available) or 'none'}"
            if spec.exact is not None and str(spec.exact) not in available:
                message = f"{kind} {name} has no version {spec.exact} ({listed})"
            elif spec.exact is not None:
                message = f"{kind} {name} {spec.exact} cannot be loaded: {why or first.get('message', '')} ({listed})"
            else:
                wanted = "" if spec.constraint.is_any else f" matching {describe_constraint(spec.constraint)}"
                runtime = f" compatible with runtime {self.runtime_version}" if self.runtime_version is not None else ""
                message = f"{kind} {name} has no version{wanted}{runtime} ({listed})"
                if why:
                    message += f"; {why}"
            return VersionNotFoundError(
                message,
                available=available,
                details=[
                    {
                        "reason": "version_not_found",
                        "type": kind,
                        "name": name,
                        "requested": str(spec.exact or spec.constraint),
                        "runtime_version": None if self.runtime_version is None else str(self.runtime_version),
                        "available": available,
                        "skipped": skipped,
                    }
                ],
            )
        problems = [d for d in details if isinstance(d, dict)] or [{"reason": "dependency", "message": error.message}]
        missing = sorted({str(d["name"]) for d in problems if d.get("reason") == "unknown" and d.get("name")})
        conflicting = sorted(
            {
                str(d["name"])
                for d in problems
                if d.get("reason") in ("conflict", "no_matching_version") and d.get("name")
            }
        )
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing)}")
        if conflicting:
            parts.append(f"no version of {', '.join(conflicting)} fits")
        summary = f" ({'; '.join(parts)})" if parts else ""
        return DependencyError(
            f"cannot load {kind} {name}: its dependencies cannot be satisfied{summary}: {error.message}",
            missing=missing,
            conflicting=conflicting,
            details=problems,
        )

    def _get_store(self) -> Store:
        if self._store is None:
            from clients.store import Store

            self._store = Store(self.home)
        return self._store

    def _materialise(
        self, candidate: Candidate, dependency_keys: tuple[str, ...]
    ) -> tuple[Extension, list[CheckResult]]:
        """Find the candidate's tree, verify it, read its manifest, parse its Nushell code."""
        from clients.store import verify_tree

        source = str(candidate.extra.get("source", "registry"))
        version = str(candidate.version)
        if source == "local":
            path = Path(str(candidate.extra["path"]))
            if (path / "MANIFEST.json").is_file():
                _integrity(path, verify_tree(path))
            sha256 = ""
        else:
            if self.client is None:
                raise LoaderError(f"{candidate.name} {version} is in the registry, but no registry client is set")
            store = self._get_store()
            # A tree already unpacked is checked before the store would quietly unpack it again: a
            # changed file in the runtime's store is reported, not papered over.
            path = store.tree_path(candidate.type, candidate.name, version)
            mark = store.tree_mark(candidate.type, candidate.name, version)
            if mark is not None and mark.sha256 == candidate.sha256 and path.is_dir():
                _integrity(path, verify_tree(path, manifest_sha256=mark.manifest_sha256))
            bar = self.progress(f"{candidate.name} {version}") if self.progress is not None else None
            store.fetch(self.client, candidate.name, version, candidate.sha256, progress=bar)
            path = store.tree(candidate.type, candidate.name, version, candidate.sha256)
            sha256 = candidate.sha256
        manifest = _read_manifest(path)
        if (manifest.name, str(manifest.version), manifest.type) != (candidate.name, version, candidate.type):
            raise IntegrityError(
                f"{path / 'extension.toml'} says {manifest.type} {manifest.name} {manifest.version}, but "
                f"{candidate.type} {candidate.name} {version} was expected: the tree does not hold what was published",
                details=[{"reason": "integrity", "path": str(path / "extension.toml")}],
            )
        checks = self._nushell(path, manifest)
        extension = Extension(
            metadata=ExtensionMetadata.from_manifest(manifest),
            path=str(path),
            loaded_at=datetime.now(UTC),
            source=source,
            sha256=sha256,
            dependency_keys=dependency_keys,
        )
        return extension, checks

    def _nushell(self, root: Path, manifest: Manifest) -> list[CheckResult]:
        """Every ``nulib/**/*.nu`` must parse in Nushell (when installed); LoadCheckError otherwise."""
        nulib = root / "nulib"
        if not self.check_nushell or not nulib.is_dir() or not any(nulib.rglob("*.nu")):
            return []
        from extensions.checks import CheckResult, find_nu, nu_unavailable_reason, run_content_checks

        nu = self.nu or find_nu()
        if nu is None:
            return [CheckResult("nushell", "nulib", "skipped", nu_unavailable_reason())]
        report = run_content_checks(nulib, nu=nu, kcl=False)
        results = [replace(r, path=f"nulib/{r.path}") for r in report.results]
        failed = [r for r in results if r.status == "failed"]
        if failed:
            raise LoadCheckError(
                f"{manifest.type} {manifest.name} {manifest.version} cannot be loaded: "
                + "; ".join(f"{r.path}: {r.message.splitlines()[0] if r.message else 'failed'}" for r in failed),
                details=[{"reason": "check_failed", **r.as_dict()} for r in results],
            )
        return results

    # --- state ------------------------------------------------------------------------------------

    @property
    def state_path(self) -> Path:
        return self.home / "runtime" / "state.json"

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Under the state file's lock: catch up with other processes, change, write (persist=True)."""
        if not self.persist:
            yield
            return
        import filelock

        lock_path = self.home / "locks" / "runtime.lock"
        try:
            lock_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise home_unusable(self.home, exc) from None
        with filelock.FileLock(str(lock_path)):
            self._sync()
            before = self._snapshot()
            try:
                yield
            finally:
                if self._snapshot() != before:
                    try:
                        self._write()
                    except OSError as exc:
                        raise home_unusable(self.home, exc) from None

    def _snapshot(self) -> list[tuple[str, datetime]]:
        return [(k, e.loaded_at) for k, e in self._cache.items()]

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            st = self.state_path.stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _sync(self) -> None:
        """Take the state file's contents when another process changed it since we last read/wrote."""
        stamp = self._stamp()
        if stamp == self._state_stamp:
            return
        self._state_stamp = stamp
        if stamp is None:
            if self._generation:
                self._cache.clear()
                self._aliases.clear()
            return
        try:
            data = json.loads(self.state_path.read_bytes())
            if data.get("format") != STATE_FORMAT:
                raise ValueError(f"format {data.get('format')!r}")
            generation = int(data.get("generation", 0))
            entries = [Extension.from_state(item) for item in data.get("extensions", [])]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring the runtime state %s: %s", self.state_path, exc)
            return
        if generation == self._generation and self._generation:
            return
        self._generation = generation
        cache: OrderedDict[str, Extension] = OrderedDict()
        for extension in entries:
            if Path(extension.path).is_dir():
                cache[extension.key] = extension
        while len(cache) > self.cache_size:
            cache.popitem(last=False)
        self._cache = cache
        self._aliases = {a: k for a, k in self._aliases.items() if k in cache}

    def _write(self) -> None:
        self._generation += 1
        payload = {
            "format": STATE_FORMAT,
            "generation": self._generation,
            "updated_at": _timestamp(datetime.now(UTC)),
            "extensions": [e.to_state() for e in self._cache.values()],
        }
        path = self.state_path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        with tmp.open("w", encoding="utf-8") as handle:
            json.dump(payload, handle, indent=1)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        self._state_stamp = self._stamp()


def _integrity(root: Path, problems: Sequence[str]) -> None:
    if not problems:
        return
    shown = "; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
    raise IntegrityError(
        f"integrity check failed for {root}: {shown}. The files must be exactly those of the published "
        f"package (MANIFEST.json): remove {root} and load again to unpack a fresh copy",
        details=[{"reason": "integrity", "path": str(root), "problems": list(problems)}],
    )


def _same(extension: Extension, kind: str, name: str) -> bool:
    return extension.metadata.extension_type == kind and extension.metadata.name == name


def _key_of(candidate: Candidate) -> str:
    return f"{candidate.type}:{candidate.name}:{candidate.version.without_build()}"


# --------------------------------------------------------------------------------------------------
# Discovery in the registry (`module discover`)
# --------------------------------------------------------------------------------------------------


def discover(
    client: RegistryClient,
    type: str,
    *,
    name: str | None = None,
    runtime_version: str | None = None,
) -> list[dict[str, Any]]:
    """What the registry offers of a kind: ``[{type, name, extension, version, description}]`` by
    name. With ``name``, only that one (or the extension of that name), plus every version
    (``versions: [{version, yanked, compatible, published_at}]``, newest first) and the latest
    version's ``dependencies`` and ``provisioning_version``. ExtensionNotFoundError (with close
    names) when the registry offers no such name."""
    kind = normalise_type(type)
    items = [
        {
            "type": kind,
            "name": str(i.get("name")),
            "extension": str(i.get("extension")),
            "version": i.get("version"),
            "description": i.get("description", ""),
        }
        for i in client.provided(kind)
    ]
    items.sort(key=lambda i: (i["name"], i["extension"]))
    if name is None:
        return items
    _check_name(name)
    chosen = [i for i in items if i["name"] == name] or [i for i in items if i["extension"] == name]
    if not chosen:
        suggestions = difflib.get_close_matches(name, sorted({i["name"] for i in items}), n=3, cutoff=0.7)
        hint = f"; did you mean {' or '.join(repr(s) for s in suggestions)}?" if suggestions else ""
        offered = ", ".join(sorted({i["name"] for i in items})[:20]) or "none"
        raise ExtensionNotFoundError(
            f"the registry offers no {kind} named {name}{hint} (it offers: {offered})",
            suggestions=suggestions,
            details=[{"reason": "extension_not_found", "type": kind, "name": name, "suggestions": suggestions}],
        )
    from extensions.index import parse_index
    from extensions.resolver import describe_requirement

    runtime = None if runtime_version is None else SemVer.parse(runtime_version)
    for item in chosen:
        document = client.index(item["extension"])
        candidates = parse_index(document, name=item["extension"])[1] if document is not None else []
        item["versions"] = [
            {
                "version": str(c.version),
                "yanked": c.yanked,
                "compatible": None if runtime is None else runs_on(c.provisioning_version, runtime),
                "provisioning_version": None if c.provisioning_version is None else str(c.provisioning_version),
                "published_at": c.extra.get("published_at"),
            }
            for c in reversed(candidates)
        ]
        latest = next((c for c in reversed(candidates) if str(c.version) == item["version"]), None)
        item["dependencies"] = [describe_requirement(r) for r in latest.dependencies] if latest is not None else []
    return chosen
