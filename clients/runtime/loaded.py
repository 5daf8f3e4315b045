"""What is loaded: an extension's metadata, a loaded extension, a load's result, the metrics."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from extensions.checks import CheckResult
    from extensions.manifest import Manifest


_LOAD_TIMES_KEPT = 1000


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
    where it came from (``source``: ``"local"`` for a discovery directory, ``"registry"`` for a
    package of the registry, ``"store"`` for one the local store held while the registry was not
    asked: offline, or unreachable), the package's ``sha256`` (registry and store only) and the
    cache keys of its dependencies."""

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
