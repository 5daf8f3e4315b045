"""The baseline for `bench_resolve_core`: plain resolvelib with the minimal provider its documentation
shows, over the same graph held in memory, parsing versions and specifiers with `packaging` on every
call, as a straightforward provider would. Our constraints are translated to PEP 440 specifier sets
once, up front (`^1.2` -> `>=1.2.0,<2.0.0`); the generated catalogue has no pre-releases and no `||`,
so the translation is exact there."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version as PVersion
from resolvelib import AbstractProvider, BaseReporter, Resolver

from extensions.versions import Constraint


def to_pep440(text: str) -> str:
    """Our constraint as a PEP 440 specifier set (one AND-group, no pre-release bounds)."""
    constraint = Constraint.parse(text)
    if len(constraint.groups) != 1:
        raise ValueError(f"{text!r} has alternatives ('||'), which PEP 440 cannot express")
    parts = []
    for comparator in constraint.groups[0]:
        version = comparator.version
        if comparator.op == "<" and version.prerelease == (0,):
            parts.append(f"<{version.major}.{version.minor}.{version.patch}")  # <X.Y.Z-0 reads as <X.Y.Z
        elif comparator.upper is not None or version.prerelease:
            raise ValueError(f"{text!r} cannot be translated")
        else:
            op = "==" if comparator.op == "=" else comparator.op
            parts.append(f"{op}{version}")
    return ",".join(parts)


@dataclass(frozen=True)
class BaseRequirement:
    name: str
    specifier: str  # PEP 440, parsed on every use


@dataclass(frozen=True)
class BaseCandidate:
    name: str
    version: str
    dependencies: tuple[tuple[str, str], ...]


class BaselineProvider(AbstractProvider[BaseRequirement, BaseCandidate, str]):
    def __init__(self, index: Mapping[str, list[BaseCandidate]]) -> None:
        self.index = index

    def identify(self, requirement_or_candidate: BaseRequirement | BaseCandidate) -> str:
        return requirement_or_candidate.name

    def get_preference(
        self,
        identifier: str,
        resolutions: Mapping[str, BaseCandidate],
        candidates: Mapping[str, Iterator[BaseCandidate]],
        information: Mapping[str, Iterator[Any]],
        backtrack_causes: Sequence[Any],
    ) -> int:
        return sum(1 for _ in candidates[identifier])

    def find_matches(
        self,
        identifier: str,
        requirements: Mapping[str, Iterator[BaseRequirement]],
        incompatibilities: Mapping[str, Iterator[BaseCandidate]],
    ) -> list[BaseCandidate]:
        specifiers = [SpecifierSet(r.specifier) for r in requirements[identifier]]
        bad = {c.version for c in incompatibilities[identifier]}
        found = [
            c
            for c in self.index.get(identifier, [])
            if c.version not in bad and all(PVersion(c.version) in s for s in specifiers)
        ]
        return sorted(found, key=lambda c: PVersion(c.version), reverse=True)

    def is_satisfied_by(self, requirement: BaseRequirement, candidate: BaseCandidate) -> bool:
        return PVersion(candidate.version) in SpecifierSet(requirement.specifier)

    def get_dependencies(self, candidate: BaseCandidate) -> Iterable[BaseRequirement]:
        return [BaseRequirement(name, spec) for name, spec in candidate.dependencies]


def baseline_index(records: Iterable[Mapping[str, Any]]) -> dict[str, list[BaseCandidate]]:
    index: dict[str, list[BaseCandidate]] = {}
    for record in records:
        deps = tuple((name, to_pep440(text)) for name, text in record["dependencies"].items())
        index.setdefault(record["name"], []).append(BaseCandidate(record["name"], record["version"], deps))
    return index


def baseline_resolve(
    roots: Sequence[str], index: Mapping[str, list[BaseCandidate]], max_rounds: int = 2000
) -> dict[str, str]:
    """name -> version; raises resolvelib's errors."""
    resolver: Resolver[BaseRequirement, BaseCandidate, str] = Resolver(BaselineProvider(index), BaseReporter())
    result = resolver.resolve([BaseRequirement(name, "") for name in roots], max_rounds=max_rounds)
    return {name: candidate.version for name, candidate in result.mapping.items()}
