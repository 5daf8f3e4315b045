"""What the resolver works on and what it answers: candidates, catalogues, the resolution, and the
install order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from extensions.errors import ResolutionError
from extensions.graph import DependencyCycleError, dependency_order
from extensions.versions import Constraint, Requirement, SemVer, parse_requirement, parse_version


@dataclass(frozen=True)
class Candidate:
    """One published version of an extension, as the resolver sees it.

    ``extra`` is free-form (``download_url``, ``published_at``, ``provides``...) and takes no part in
    equality or hashing. Hashing uses ``(name, version)`` only, which agrees with equality."""

    name: str
    version: SemVer
    dependencies: tuple[Requirement, ...] = ()
    yanked: bool = False
    provisioning_version: Constraint | None = None
    type: str = ""
    sha256: str = ""
    size: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.dependencies, tuple):
            object.__setattr__(self, "dependencies", tuple(self.dependencies))

    def __hash__(self) -> int:
        return hash((self.name, self.version))

    def __str__(self) -> str:
        return f"{self.name} {self.version}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: what the resolve API and the client report for a resolved extension."""
        out: dict[str, Any] = {
            "name": self.name,
            "version": str(self.version),
            "type": self.type,
            "sha256": self.sha256,
            "size": self.size,
            "yanked": self.yanked,
            "dependencies": {r.name: str(r.constraint) for r in self.dependencies},
        }
        if "download_url" in self.extra:
            out["download_url"] = self.extra["download_url"]
        return out


class Catalogue(Protocol):
    """Where the resolver finds candidates: the registry's database or the client's index documents."""

    def versions(self, name: str) -> Sequence[Candidate]:
        """Every version of ``name`` (yanked ones too), in any order; empty if there is no such name."""
        ...

    def names(self) -> Iterable[str]:
        """Every extension name (used to suggest close names for an unknown one)."""
        ...


class MemoryCatalogue:
    """A catalogue held in memory. Versions are sorted newest first once; a repeated
    ``name@version`` keeps the first one given."""

    def __init__(self, candidates: Iterable[Candidate] = ()) -> None:
        by_name: dict[str, dict[SemVer, Candidate]] = {}
        for candidate in candidates:
            by_name.setdefault(candidate.name, {}).setdefault(candidate.version, candidate)
        self._versions: dict[str, tuple[Candidate, ...]] = {
            name: tuple(sorted(found.values(), key=_version_of, reverse=True)) for name, found in by_name.items()
        }

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]]) -> MemoryCatalogue:
        """Build from plain records: ``{"name", "version", "dependencies": {name: constraint}}``
        (or a list of ``"name constraint"`` strings), and optionally ``yanked``,
        ``provisioning_version``, ``type``, ``sha256``, ``size``."""
        candidates = []
        for record in records:
            deps = record.get("dependencies") or {}
            if isinstance(deps, Mapping):
                requirements = tuple(Requirement(n, Constraint.parse(c or "*")) for n, c in deps.items())
            else:
                requirements = tuple(parse_requirement(text) for text in deps)
            pv = record.get("provisioning_version")
            candidates.append(
                Candidate(
                    name=record["name"],
                    version=parse_version(str(record["version"])),
                    dependencies=requirements,
                    yanked=bool(record.get("yanked", False)),
                    provisioning_version=Constraint.parse(pv) if pv else None,
                    type=record.get("type", ""),
                    sha256=record.get("sha256", ""),
                    size=int(record.get("size", 0)),
                )
            )
        return cls(candidates)

    def versions(self, name: str) -> Sequence[Candidate]:
        return self._versions.get(name, ())

    def names(self) -> Iterable[str]:
        return self._versions.keys()


def _version_of(candidate: Candidate) -> SemVer:
    return candidate.version


@dataclass(frozen=True)
class Resolution:
    """A successful resolution.

    ``resolved`` maps each name to its chosen candidate, in install order. ``locked_ignored`` lists
    the ``locked`` pins that could not be kept (``{"name", "locked", "chosen", "reason"}``);
    ``skipped`` lists the versions newer than the chosen ones that every requirement would have
    admitted but a rule excluded (``{"name", "version", "why"}``: yanked, pre-release, runtime)."""

    resolved: dict[str, Candidate]
    install_order: list[str]
    locked_ignored: list[dict[str, str]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, in install order."""
        return {
            "resolved": [self.resolved[name].to_dict() for name in self.install_order],
            "install_order": list(self.install_order),
            "locked_ignored": [dict(item) for item in self.locked_ignored],
            "skipped": [dict(item) for item in self.skipped],
        }


def install_order(resolved: Mapping[str, Candidate]) -> list[str]:
    """Names with dependencies before dependents; among names that are ready, alphabetical
    (`extensions.graph.dependency_order`). Dependencies on names outside ``resolved`` are ignored.
    A cycle raises ``ResolutionError`` naming it: ``a -> b -> a`` (a requires b, b requires a)."""
    try:
        return dependency_order({name: [r.name for r in c.dependencies] for name, c in resolved.items()})
    except DependencyCycleError as exc:
        raise _cycle_error(exc.cycle) from None


def _cycle_error(cycle: list[str]) -> ResolutionError:
    text = " -> ".join(cycle)
    message = (
        f"the resolved extensions depend on each other in a cycle: {text}; "
        "an extension cannot be installed before its own dependencies, so one of them must drop its dependency"
    )
    return ResolutionError(message, details=[{"reason": "cycle", "cycle": cycle, "message": message}])
