"""Dependency resolution: one resolver for the registry (fed from the database) and the client (fed
from index documents), so both give the same answer for the same data.

The search is resolvelib's (STYLE habit 15); this module is its provider plus what surrounds it::

    resolve(["kubernetes ^1.28", "cilium"], catalogue, runtime_version="1.4.0", locked={"etcd": "3.5.9"})

Semantics (SPEC 2.3 and 3.2):

- each name gets the newest version that satisfies every constraint on it; when a newer choice leads
  to a conflict further down, resolvelib backtracks to an older one;
- pre-releases only match a constraint that names a pre-release of the same ``MAJOR.MINOR.PATCH``,
  or everywhere with ``include_prereleases=True`` (``Constraint.contains``);
- yanked versions are never chosen unless the request pins exactly that version (a root
  requirement ``=1.2.3``) or ``locked`` names it. A dependency's exact pin does not revive a yanked
  version (the author's old pin is not the user's intent); the failure then says how to force it.
  The rule holds for the whole resolution, whatever order resolvelib meets the requirements in;
- with ``runtime_version``, versions whose ``[compatibility] provisioning_version`` excludes it are
  never chosen;
- a ``locked`` version that still satisfies every requirement is preferred; a pin that cannot be
  honoured is dropped and reported in ``Resolution.locked_ignored`` with the reason;
- ``install_order`` puts dependencies before dependents, ties broken by name; a cycle among the
  resolved extensions is an error that names it (``a -> b -> a``);
- resolvelib's backjumping is only complete without cycles (it never unpins a name that is part of
  a conflict, even when that name's version brought the conflicting requirement in through a
  cycle). So when a search fails and the names it looked at form cycles, a second search tries the
  versions that depend back into their cycle last; its answer, if any, is the answer.

Every failure is a ``ResolutionError`` (``resolution_failed``) whose message is one line for people
and whose ``details`` is a list of dicts with a ``reason`` (``conflict``, ``no_matching_version``,
``unknown``, ``cycle``, ``too_complex``, ``too_many_requirements``, ``invalid_requirement``,
``invalid_runtime_version``, ``invalid_locked_version``) plus the
fields that reason needs: the requirements involved and who asked for them (``required_by``, and a
``chain`` from a root requirement), the versions that exist, and the versions skipped and why.

Work is bounded: at most ``max_requirements`` root requirements, ``max_rounds`` resolver rounds and
``max_extensions`` distinct names; past a bound the answer is "too complex", never a hang.

Speed: per name, the candidates are sorted once (newest first) and every constraint is evaluated
once against them into a bit mask; ``find_matches`` is then an AND of masks, and the lists it
returns are cached per mask. The provider also picks the next name to pin itself
(``narrow_requirement_selection`` returns a single name), so resolvelib never sorts by preference.
"""

from __future__ import annotations

import difflib
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from resolvelib import AbstractProvider, BaseReporter, ResolutionImpossible, ResolutionTooDeep
from resolvelib.resolvers import RequirementInformation
from resolvelib.resolvers import Resolution as _Search

from extensions.errors import ExtensionError, ResolutionError
from extensions.graph import DependencyCycleError, dependency_order
from extensions.versions import Constraint, Requirement, SemVer, parse_requirement, parse_version, runs_on

__all__ = [
    "Candidate",
    "Catalogue",
    "MemoryCatalogue",
    "Resolution",
    "describe_constraint",
    "describe_requirement",
    "install_order",
    "resolve",
]

MAX_EXTENSIONS = 1000


# --------------------------------------------------------------------------------------------------
# Candidates and catalogues
# --------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------
# Showing constraints to people
# --------------------------------------------------------------------------------------------------


def describe_constraint(constraint: Constraint) -> str:
    """A short spelling of ``constraint`` for messages, equivalent to it (``^4.0`` rather than the
    normal form ``>=4.0.0, <5.0.0-0``). Falls back to ``str(constraint)`` when no shorter form is
    known to be equivalent."""
    if constraint.is_any:
        return "*"
    text = " || ".join(_describe_group(group) for group in constraint.groups)
    try:
        if Constraint.parse(text, check_satisfiable=False) == constraint:
            return text
    except ExtensionError:  # pragma: no cover - every spelling built above parses
        pass
    return str(constraint)  # pragma: no cover - the short forms are equivalent by construction


def describe_requirement(requirement: Requirement) -> str:
    """``etcd >=3.5, <4.0``, or just ``etcd`` for any version."""
    if requirement.constraint.is_any:
        return requirement.name
    return f"{requirement.name} {describe_constraint(requirement.constraint)}"


def _short(version: SemVer) -> str:
    """``X.Y`` for a release ``X.Y.0`` (which ``>=`` and ``^`` read the same way), else the version."""
    if not version.prerelease and version.patch == 0:
        return f"{version.major}.{version.minor}"
    return str(version)


def _describe_group(group: Sequence[Any]) -> str:
    if not group:
        return "*"
    lower = [c for c in group if c.op == ">="]
    upper = [c for c in group if c.op == "<"]
    if len(group) == 2 and len(lower) == 1 and len(upper) == 1:
        low, high = lower[0].version, upper[0].version
        if not low.prerelease and high.prerelease == (0,):
            if low.major > 0:
                caret = SemVer(low.major + 1, 0, 0, (0,))
            elif low.minor > 0:
                caret = SemVer(0, low.minor + 1, 0, (0,))
            else:
                caret = SemVer(0, 0, low.patch + 1, (0,))
            if high == caret:
                return "^" + (_short(low) if (low.major, low.minor) != (0, 0) else str(low))
            if high == SemVer(low.major, low.minor + 1, 0, (0,)):
                return "~" + _short(low)
    parts = []
    for c in group:
        if c.op == ">=" and not c.version.prerelease and c.version.patch == 0:
            parts.append(">=" + _short(c.version))
        elif c.op == "<" and c.version.prerelease == (0,) and c.version.patch == 0:
            parts.append(f"<{c.version.major}.{c.version.minor}")
        else:
            parts.append(str(c))
    return ", ".join(parts)


def _requirer(parent: Candidate | None) -> str:
    return "you asked for" if parent is None else f"{parent} requires"


def _line(requirement: Requirement, parent: Candidate | None) -> str:
    return f"{_requirer(parent)} {describe_requirement(requirement)}"


# --------------------------------------------------------------------------------------------------
# The provider
# --------------------------------------------------------------------------------------------------


class _TooManyExtensions(Exception):
    """Raised from inside the search when more than ``max_extensions`` names are involved."""


class _Name:
    """Everything the provider precomputes about one name. Bit ``i`` of a mask stands for
    ``candidates[i]``; candidates are sorted newest first."""

    __slots__ = ("allowed", "candidates", "full", "index", "lists", "locked_bit", "masks", "newest_first")

    def __init__(
        self,
        versions: Sequence[Candidate],
        runtime: SemVer | None,
        locked: SemVer | None,
        pinned: Iterable[SemVer],
        cycle: frozenset[str] = frozenset(),
    ) -> None:
        unique: dict[SemVer, Candidate] = {}
        for candidate in sorted(versions, key=_version_of, reverse=True):
            unique.setdefault(candidate.version, candidate)
        self.newest_first: tuple[Candidate, ...] = tuple(unique.values())
        # The order candidates are tried in: newest first, except that when ``cycle`` (the names of a
        # dependency cycle this name is on) is given, versions that depend back into it go last.
        self.candidates: tuple[Candidate, ...] = self.newest_first
        closing: set[SemVer] = set()
        if cycle:
            closing = {c.version for c in self.newest_first if any(r.name in cycle for r in c.dependencies)}
            self.candidates = (
                *(c for c in self.newest_first if c.version not in closing),
                *(c for c in self.newest_first if c.version in closing),
            )
        self.index: dict[SemVer, int] = {c.version: i for i, c in enumerate(self.candidates)}
        self.full = (1 << len(self.candidates)) - 1
        runtime_ok = 0
        yanked = 0
        for i, candidate in enumerate(self.candidates):
            if runs_on(candidate.provisioning_version, runtime):
                runtime_ok |= 1 << i
            if candidate.yanked:
                yanked |= 1 << i
        revived = 0  # yanked versions the request pins exactly, or locks
        for version in (*pinned, *([locked] if locked is not None else [])):
            if version in self.index:
                revived |= 1 << self.index[version]
        #: the locked version, tried first (unless it closes a cycle, on a retry that avoids them)
        self.locked_bit = 0
        if locked is not None and locked in self.index and locked not in closing:
            self.locked_bit = (1 << self.index[locked]) & runtime_ok
        #: the candidates the rules let through: suiting the runtime, and not yanked unless revived
        self.allowed = runtime_ok & (~yanked | revived)
        self.masks: dict[Constraint, int] = {}
        self.lists: dict[int, list[Candidate]] = {}


class _Provider(AbstractProvider[Requirement, Candidate, str]):
    def __init__(
        self,
        catalogue: Catalogue,
        *,
        include_prereleases: bool,
        runtime: SemVer | None,
        locked: Mapping[str, SemVer],
        pinned: Mapping[str, set[SemVer]],
        max_extensions: int,
        cycles: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        self.catalogue = catalogue
        self.include_prereleases = include_prereleases
        self.runtime = runtime
        self.locked = locked
        self.pinned = pinned
        self.max_extensions = max_extensions
        self.cycles = cycles or {}
        self.names: dict[str, _Name] = {}
        self.seen: dict[int, Candidate] = {}  # candidates whose dependencies were asked for
        self.satisfied: dict[tuple[int, int], bool] = {}

    # Precomputation -----------------------------------------------------------------------------------

    def info(self, name: str) -> _Name:
        info = self.names.get(name)
        if info is None:
            if len(self.names) >= self.max_extensions:
                raise _TooManyExtensions
            info = _Name(
                self.catalogue.versions(name),
                self.runtime,
                self.locked.get(name),
                self.pinned.get(name, ()),
                self.cycles.get(name, frozenset()),
            )
            self.names[name] = info
        return info

    def mask(self, info: _Name, constraint: Constraint) -> int:
        """The candidates ``constraint`` admits, rules applied."""
        found = info.masks.get(constraint)
        if found is None:
            include = self.include_prereleases
            found = 0
            for i, candidate in enumerate(info.candidates):
                if constraint.contains(candidate.version, include_prereleases=include):
                    found |= 1 << i
            found &= info.allowed
            info.masks[constraint] = found
        return found

    def admitted(self, name: str, requirements: Iterable[Requirement]) -> int:
        """The mask of candidates of ``name`` every requirement admits, rules applied."""
        info = self.info(name)
        mask = info.allowed
        masks = info.masks
        for requirement in requirements:
            found = masks.get(requirement.constraint)
            mask &= self.mask(info, requirement.constraint) if found is None else found
        return mask

    # resolvelib's interface ---------------------------------------------------------------------------

    def identify(self, requirement_or_candidate: Requirement | Candidate) -> str:
        return requirement_or_candidate.name

    def get_preference(
        self,
        identifier: str,
        resolutions: Mapping[str, Candidate],
        candidates: Mapping[str, Iterator[Candidate]],
        information: Mapping[str, Iterator[RequirementInformation[Requirement, Candidate]]],
        backtrack_causes: Sequence[RequirementInformation[Requirement, Candidate]],
    ) -> tuple[bool, int, str]:
        causes = _cause_names(backtrack_causes)
        return self._preference(identifier, information, causes)

    def narrow_requirement_selection(
        self,
        identifiers: Iterable[str],
        resolutions: Mapping[str, Candidate],
        candidates: Mapping[str, Iterator[Candidate]],
        information: Mapping[str, Iterator[RequirementInformation[Requirement, Candidate]]],
        backtrack_causes: Sequence[RequirementInformation[Requirement, Candidate]],
    ) -> Iterable[str]:
        """Pick the one name to pin next, so resolvelib need not sort by ``get_preference``: names
        involved in the latest conflict first (as pip does), then the name with the fewest candidates
        left (fail first), then by name."""
        causes = _cause_names(backtrack_causes)
        best: tuple[bool, int, str] | None = None
        for identifier in identifiers:
            key = self._preference(identifier, information, causes)
            if best is None or key < best:
                best = key
        assert best is not None
        return [best[2]]

    def _preference(
        self,
        identifier: str,
        information: Mapping[str, Iterator[RequirementInformation[Requirement, Candidate]]],
        causes: frozenset[str],
    ) -> tuple[bool, int, str]:
        count = self.admitted(identifier, (i.requirement for i in information[identifier])).bit_count()
        return (identifier not in causes, count, identifier)

    def find_matches(
        self,
        identifier: str,
        requirements: Mapping[str, Iterator[Requirement]],
        incompatibilities: Mapping[str, Iterator[Candidate]],
    ) -> list[Candidate]:
        info = self.info(identifier)
        mask = self.admitted(identifier, requirements[identifier])
        for bad in incompatibilities[identifier]:
            index = info.index.get(bad.version)
            if index is not None:
                mask &= ~(1 << index)
        found = info.lists.get(mask)
        if found is None:
            found = [c for i, c in enumerate(info.candidates) if mask >> i & 1]
            if mask & info.locked_bit:  # the locked version goes first: it is preferred
                locked = info.candidates[info.locked_bit.bit_length() - 1]
                found.remove(locked)
                found.insert(0, locked)
            info.lists[mask] = found
        return found

    def is_satisfied_by(self, requirement: Requirement, candidate: Candidate) -> bool:
        # resolvelib asks this for every requirement of every pinned name in every round: memoise by
        # identity (requirements and candidates live as long as the catalogue and the provider).
        key = (id(requirement), id(candidate))
        found = self.satisfied.get(key)
        if found is None:
            found = requirement.constraint.contains(candidate.version, include_prereleases=self.include_prereleases)
            self.satisfied[key] = found
        return found

    def get_dependencies(self, candidate: Candidate) -> Sequence[Requirement]:
        self.seen[id(candidate)] = candidate
        return candidate.dependencies

    # Explanations -----------------------------------------------------------------------------------

    def why_skipped(self, candidate: Candidate, requirements: Sequence[Requirement] = ()) -> tuple[str, str] | None:
        """Why a rule keeps ``candidate`` out although the constraints (pre-releases aside) admit it,
        as ``(rule, text)`` with rule ``runtime``, ``yanked`` or ``prerelease``; None if no rule does."""
        if not runs_on(candidate.provisioning_version, self.runtime):
            pv = candidate.provisioning_version
            assert pv is not None
            return "runtime", f"needs provisioning {describe_constraint(pv)}, the runtime is {self.runtime}"
        if candidate.yanked and not (
            self.locked.get(candidate.name) == candidate.version
            or candidate.version in self.pinned.get(candidate.name, ())
        ):
            return "yanked", f"yanked; ask for {candidate.name} ={candidate.version} to use it anyway"
        if (
            candidate.version.is_prerelease
            and not self.include_prereleases
            and not all(r.constraint.contains(candidate.version) for r in requirements)
        ):
            return "prerelease", "a pre-release; name a pre-release in the constraint, or allow pre-releases"
        return None


def _cause_names(causes: Sequence[RequirementInformation[Requirement, Candidate]]) -> frozenset[str]:
    if not causes:
        return frozenset()
    names = {c.requirement.name for c in causes}
    names.update(c.parent.name for c in causes if c.parent is not None)
    return frozenset(names)


# --------------------------------------------------------------------------------------------------
# resolve()
# --------------------------------------------------------------------------------------------------


def resolve(
    requirements: Sequence[Requirement | str],
    catalogue: Catalogue,
    *,
    runtime_version: SemVer | str | None = None,
    include_prereleases: bool = False,
    locked: Mapping[str, SemVer | str] | None = None,
    max_rounds: int = 2000,
    max_requirements: int = 200,
    max_extensions: int = MAX_EXTENSIONS,
) -> Resolution:
    """Resolve ``requirements`` (``Requirement`` objects or ``"NAME CONSTRAINT"`` strings) against
    ``catalogue``. ``ResolutionError`` (``resolution_failed``) with structured ``details`` when there
    is no answer, the input is invalid, or the problem is too complex."""
    roots = _parse_roots(requirements, max_requirements)
    runtime = _parse_runtime(runtime_version)
    pins = _parse_locked(locked)
    _check_known_names(roots, catalogue)

    def attempt(cycles: Mapping[str, frozenset[str]] | None) -> tuple[_Provider, dict[str, Candidate], list[str]]:
        provider = _Provider(
            catalogue,
            include_prereleases=include_prereleases,
            runtime=runtime,
            locked=pins,
            pinned=_exact_pins(roots),
            max_extensions=max_extensions,
            cycles=cycles,
        )
        chosen, order = _search(provider, roots, max_rounds)
        return provider, chosen, order

    try:
        provider, chosen, order = attempt(None)
    except _Failed as failed:
        # resolvelib's backjumping assumes no cycles: it never unpins a name involved in a conflict,
        # even when that name's own version (through a cycle) brought the conflicting requirement in,
        # so it can say "impossible" when an answer exists. When the names looked at form cycles, try
        # once more with the versions that depend back into their cycle tried last.
        cycles = _cycles(failed.provider)
        if not cycles or failed.error.details[0]["reason"] not in _RETRIED:
            raise failed.error from None
        try:
            provider, chosen, order = attempt(cycles)
        except _Failed as again:
            cyclic = again.error.details[0]["reason"] == "cycle"
            raise (again.error if cyclic else failed.error) from None
        except ResolutionError:  # too complex the second time: the first explanation stands
            raise failed.error from None
    resolved = {name: chosen[name] for name in order}
    requirers = _requirers(resolved, roots)
    return Resolution(
        resolved=resolved,
        install_order=order,
        locked_ignored=_locked_ignored(provider, resolved, requirers),
        skipped=_skipped(provider, resolved, requirers),
    )


# Failures worth a second attempt when cycles are about. Not "cycle": an answer was found, and an
# answer whose newest versions depend on each other in a cycle is reported as such.
_RETRIED = frozenset({"conflict", "no_matching_version", "unknown"})


class _Failed(Exception):
    """One attempt failed: the error to report, and the provider (what the attempt looked at)."""

    def __init__(self, error: ResolutionError, provider: _Provider) -> None:
        super().__init__(error.message)
        self.error = error
        self.provider = provider


def _search(
    provider: _Provider, roots: Sequence[Requirement], max_rounds: int
) -> tuple[dict[str, Candidate], list[str]]:
    """One resolvelib search: the chosen candidates and their install order, or ``_Failed``."""
    search: _Search[Requirement, Candidate, str] = _Search(provider, BaseReporter())
    try:
        state = search.resolve(roots, max_rounds=max_rounds)
    except ResolutionImpossible as exc:
        raise _Failed(_explain_impossible(provider, roots, list(exc.causes)), provider) from None
    except ResolutionTooDeep:
        raise _too_complex(f"gave up after {max_rounds} rounds", rounds=max_rounds) from None
    except _TooManyExtensions:
        limit = provider.max_extensions
        raise _too_complex(f"more than {limit} extensions are involved", max_extensions=limit) from None
    chosen = _reachable(state.mapping, roots)
    try:
        return chosen, install_order(chosen)
    except ResolutionError as exc:
        raise _Failed(exc, provider) from None


def _cycles(provider: _Provider) -> dict[str, frozenset[str]]:
    """For each name looked at that lies on a dependency cycle (between any of their versions), the
    names of its strongly connected component (Tarjan's algorithm, without recursion)."""
    graph = {
        name: sorted({r.name for c in info.candidates for r in c.dependencies if r.name in provider.names})
        for name, info in provider.names.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: dict[str, frozenset[str]] = {}
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            name, position = work.pop()
            if position == 0:
                index[name] = low[name] = len(index)
                stack.append(name)
                on_stack.add(name)
            targets = graph[name]
            if position < len(targets):
                work.append((name, position + 1))
                target = targets[position]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[name] = min(low[name], index[target])
                continue
            if low[name] == index[name]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == name:
                        break
                if len(component) > 1 or name in graph[name]:
                    out.update((member, frozenset(component)) for member in component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[name])
    return out


def _parse_roots(requirements: Sequence[Requirement | str], limit: int) -> list[Requirement]:
    if isinstance(requirements, str | bytes):
        raise ResolutionError(
            "requirements must be a list of requirements, not one string: write ['etcd >=3.5']",
            path="requirements",
            details=[{"reason": "invalid_requirement", "path": "requirements"}],
        )
    items = list(requirements)
    if len(items) > limit:
        raise ResolutionError(
            f"too many requirements: {len(items)} given, at most {limit} are allowed in one resolution",
            path="requirements",
            details=[{"reason": "too_many_requirements", "count": len(items), "limit": limit}],
        )
    roots = []
    for position, item in enumerate(items):
        if isinstance(item, Requirement):
            roots.append(item)
            continue
        path = f"requirements[{position}]"
        try:
            roots.append(parse_requirement(item))
        except ExtensionError as exc:
            raise ResolutionError(
                exc.message,
                path=path,
                details=[{"reason": "invalid_requirement", "path": path, "requirement": item, "message": exc.message}],
            ) from None
    return roots


def _exact_pins(roots: Sequence[Requirement]) -> dict[str, set[SemVer]]:
    """The versions the request pins exactly (``etcd =3.5.12``), which may be yanked ones."""
    pins: dict[str, set[SemVer]] = {}
    for requirement in roots:
        exact = requirement.constraint.exact
        if exact is not None:
            pins.setdefault(requirement.name, set()).add(exact)
    return pins


def _parse_runtime(runtime_version: SemVer | str | None) -> SemVer | None:
    if runtime_version is None or isinstance(runtime_version, SemVer):
        return runtime_version
    try:
        return parse_version(runtime_version)
    except ExtensionError as exc:
        raise ResolutionError(
            exc.message,
            path="runtime_version",
            details=[{"reason": "invalid_runtime_version", "path": "runtime_version", "message": exc.message}],
        ) from None


def _parse_locked(locked: Mapping[str, SemVer | str] | None) -> dict[str, SemVer]:
    pins: dict[str, SemVer] = {}
    for name, version in (locked or {}).items():
        if isinstance(version, SemVer):
            pins[name] = version
            continue
        path = f"locked.{name}"
        try:
            pins[name] = parse_version(version)
        except ExtensionError as exc:
            raise ResolutionError(
                exc.message,
                path=path,
                details=[{"reason": "invalid_locked_version", "path": path, "message": exc.message}],
            ) from None
    return pins


def _suggestions(name: str, catalogue: Catalogue) -> list[str]:
    return difflib.get_close_matches(name, sorted(catalogue.names()), n=3, cutoff=0.7)


def _unknown_detail(name: str, catalogue: Catalogue, requirement: Requirement, parent: Candidate | None) -> dict:
    suggestions = _suggestions(name, catalogue)
    message = f"no extension named {name!r}"
    if suggestions:
        message += "; did you mean " + " or ".join(repr(s) for s in suggestions) + "?"
    if parent is not None:
        message += f" ({parent} requires {describe_requirement(requirement)})"
    return {
        "reason": "unknown",
        "name": name,
        "requirement": describe_requirement(requirement),
        "required_by": None if parent is None else str(parent),
        "suggestions": suggestions,
        "message": message,
    }


def _check_known_names(roots: Sequence[Requirement], catalogue: Catalogue) -> None:
    details = []
    reported = set()
    for requirement in roots:
        if requirement.name not in reported and not catalogue.versions(requirement.name):
            reported.add(requirement.name)
            details.append(_unknown_detail(requirement.name, catalogue, requirement, None))
    if details:
        raise ResolutionError("; ".join(d["message"] for d in details), details=details)


def _too_complex(why: str, **fields: int) -> ResolutionError:
    message = f"resolution is too complex: {why}; pin some versions or split the request"
    return ResolutionError(message, details=[{"reason": "too_complex", "message": message, **fields}])


def _reachable(mapping: Mapping[str, Candidate], roots: Sequence[Requirement]) -> dict[str, Candidate]:
    """The pinned candidates that the root requirements reach (resolvelib may hold stale pins)."""
    chosen: dict[str, Candidate] = {}
    queue = deque(r.name for r in roots)
    while queue:
        name = queue.popleft()
        if name in chosen:
            continue
        candidate = mapping[name]
        chosen[name] = candidate
        queue.extend(r.name for r in candidate.dependencies if r.name not in chosen)
    return chosen


def _requirers(
    resolved: Mapping[str, Candidate], roots: Sequence[Requirement]
) -> dict[str, list[tuple[Requirement, Candidate | None]]]:
    """For each resolved name, every requirement on it and who made it (None for a root)."""
    out: dict[str, list[tuple[Requirement, Candidate | None]]] = {name: [] for name in resolved}
    for requirement in roots:
        out[requirement.name].append((requirement, None))
    for candidate in resolved.values():
        for requirement in candidate.dependencies:
            out[requirement.name].append((requirement, candidate))
    return out


def _locked_ignored(
    provider: _Provider,
    resolved: Mapping[str, Candidate],
    requirers: Mapping[str, list[tuple[Requirement, Candidate | None]]],
) -> list[dict[str, str]]:
    out = []
    for name, version in sorted(provider.locked.items()):
        chosen = resolved.get(name)
        if chosen is None or chosen.version == version:
            continue
        info = provider.info(name)
        index = info.index.get(version)
        if index is None:
            reason = f"{name} {version} does not exist (any more)"
        elif not runs_on(info.candidates[index].provisioning_version, provider.runtime):
            why = provider.why_skipped(info.candidates[index])
            reason = f"{name} {version} {why[1] if why else 'does not suit the runtime'}"
        else:
            against = [
                _line(r, p)
                for r, p in requirers[name]
                if not r.constraint.contains(version, include_prereleases=provider.include_prereleases)
            ]
            if against:
                reason = f"{name} {version} does not satisfy: " + "; ".join(against)
            else:
                reason = f"keeping {name} {version} conflicts with the other requirements"
        out.append({"name": name, "locked": str(version), "chosen": str(chosen.version), "reason": reason})
    return out


def _skipped(
    provider: _Provider,
    resolved: Mapping[str, Candidate],
    requirers: Mapping[str, list[tuple[Requirement, Candidate | None]]],
) -> list[dict[str, str]]:
    out = []
    for name in sorted(resolved):
        chosen = resolved[name]
        info = provider.names.get(name)
        if info is None:  # pragma: no cover - every resolved name was looked up
            continue
        requirements = [r for r, _ in requirers[name]]
        for candidate in info.newest_first:
            if candidate.version <= chosen.version:
                break
            if not all(r.constraint.contains(candidate.version, include_prereleases=True) for r in requirements):
                continue
            why = provider.why_skipped(candidate, requirements)
            if why is not None:
                out.append({"name": name, "version": str(candidate.version), "rule": why[0], "why": why[1]})
    return out


# --------------------------------------------------------------------------------------------------
# install_order()
# --------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------
# Explaining ResolutionImpossible
# --------------------------------------------------------------------------------------------------


def _explain_impossible(
    provider: _Provider,
    roots: Sequence[Requirement],
    causes: Sequence[RequirementInformation[Requirement, Candidate]],
) -> ResolutionError:
    """Turn resolvelib's causes (requirements on one or more names that together admit no
    candidate, with the candidate that made each) into a message and ``details``."""
    groups: dict[str, list[tuple[Requirement, Candidate | None]]] = {}
    seen_pairs = set()
    for cause in causes:
        key = (id(cause.requirement), id(cause.parent))
        if key in seen_pairs:
            continue
        seen_pairs.add(key)
        groups.setdefault(cause.requirement.name, []).append((cause.requirement, cause.parent))
    chains = _Chains(provider, roots)
    details: list[dict[str, Any]] = []
    fragments: list[str] = []
    for name, items in groups.items():
        found, fragment = _explain_name(provider, chains, name, items)
        details.extend(found)
        fragments.append(fragment)
    if not details:  # pragma: no cover - resolvelib always gives causes
        fragments = ["no set of versions satisfies every requirement"]
        details = [{"reason": "conflict", "message": fragments[0]}]
    asked = ", ".join(describe_requirement(r) for r in roots)
    return ResolutionError(f"cannot resolve {asked}: " + "; ".join(fragments), details=details)


def _versions_text(versions: Iterable[str]) -> str:
    """``1.0.0, 1.1.0``; a long list keeps its ends (the details keep all of it)."""
    listed = list(versions)
    if len(listed) > 12:
        return ", ".join([*listed[:3], "...", *listed[-8:]]) + f" ({len(listed)} versions)"
    return ", ".join(listed) if listed else "none"


def _skipped_text(skipped: Sequence[Mapping[str, str]]) -> str:
    return "; skipped: " + ", ".join(f"{s['version']} ({s['why']})" for s in skipped) if skipped else ""


def _explain_name(
    provider: _Provider,
    chains: _Chains,
    name: str,
    items: Sequence[tuple[Requirement, Candidate | None]],
) -> tuple[list[dict[str, Any]], str]:
    """The details about one name, and the part of the message about it."""
    info = provider.info(name)
    if not info.candidates:
        details = [_unknown_detail(name, provider.catalogue, r, p) for r, p in items]
        return details, "; ".join(dict.fromkeys(d["message"] for d in details))
    available = [str(c.version) for c in reversed(info.newest_first)]
    described: list[dict[str, Any]] = []
    for requirement, parent in items:
        chain = chains.chain(requirement, parent)
        described.append(
            {
                "requirement": describe_requirement(requirement),
                "required_by": None if parent is None else str(parent),
                "chain": chain,
                "path": "you asked for " + " -> ".join(chain),
            }
        )
    # Requirements that no usable version satisfies, each on its own.
    alone = [
        (item, about) for item, about in zip(items, described, strict=True) if not provider.admitted(name, [item[0]])
    ]
    if alone:
        details = []
        all_skipped: dict[str, dict[str, str]] = {}
        for (requirement, parent), about in alone:
            skipped = _skipped_versions(provider, info, [requirement])
            all_skipped.update((s["version"], s) for s in skipped)
            line = _grouped_lines([(requirement, parent)], [about])[0]
            details.append(
                {
                    "reason": "no_matching_version",
                    "name": name,
                    **about,
                    "available": available,
                    "skipped": skipped,
                    "message": f"{line}, but no version of {name} matches (available: {_versions_text(available)}"
                    f"{_skipped_text(skipped)})",
                }
            )
        if len(details) == 1:
            return details, details[0]["message"]
        lines = _grouped_lines([item for item, _ in alone], [about for _, about in alone])
        fragment = "; ".join(lines) + f"; no version of {name} matches any of these (available: "
        fragment += f"{_versions_text(available)}{_skipped_text(list(all_skipped.values()))})"
        return details, fragment
    # Requirements that each match something, but not together.
    requirements = [r for r, _ in items]
    together = provider.admitted(name, requirements)
    message = "; ".join(_grouped_lines(items, described))
    ruled_out = [str(c.version) for c in info.newest_first if together >> info.index[c.version] & 1]
    if ruled_out:
        message += (
            f"; the versions of {name} that satisfy all of these ({_versions_text(ruled_out)}) "
            "conflict with other requirements"
        )
    else:
        message += f"; no version of {name} satisfies all of these (available: {_versions_text(available)}"
        message += f"{_skipped_text(_skipped_versions(provider, info, requirements))})"
    detail = {
        "reason": "conflict",
        "name": name,
        "requirements": described,
        "available": available,
        "skipped": _skipped_versions(provider, info, requirements),
        "ruled_out": ruled_out,
        "message": message,
    }
    return [detail], message


def _grouped_lines(
    items: Sequence[tuple[Requirement, Candidate | None]], described: Sequence[Mapping[str, Any]]
) -> list[str]:
    """One line per requirement, versions of the same parent with the same requirement merged:
    ``kubernetes 1.28.0 and 1.27.0 require etcd ^3.5``."""
    merged: dict[tuple[str, str, str], list[str]] = {}
    for (requirement, parent), about in zip(items, described, strict=True):
        if parent is None:
            merged.setdefault((_line(requirement, None), "", ""), [])
            continue
        key = (parent.name, describe_requirement(requirement), _via(about["chain"], parent))
        merged.setdefault(key, []).append(str(parent.version))
    lines = []
    for (first, requirement_text, via), versions in merged.items():
        if not versions:
            lines.append(first)
        elif len(versions) == 1:
            lines.append(f"{first} {versions[0]} requires {requirement_text}{via}")
        else:
            listed = ", ".join(versions[:-1]) + f" and {versions[-1]}"
            lines.append(f"{first} {listed} require {requirement_text}{via}")
    return lines


def _via(chain: Sequence[str], parent: Candidate | None) -> str:
    """`` (via a 1.0.0 -> b 2.0.0)`` when the parent is not directly what a root asked for."""
    middle = list(chain[1:-2])
    if len(middle) > 4:  # the details keep the whole chain; the message keeps its ends
        middle = [*middle[:2], "...", middle[-1]]
    return f" (via {' -> '.join(middle)})" if parent is not None and middle else ""


def _skipped_versions(provider: _Provider, info: _Name, requirements: Sequence[Requirement]) -> list[dict[str, str]]:
    """The versions every requirement admits (pre-releases aside) that a rule excludes, newest first."""
    out = []
    for candidate in info.newest_first:
        if all(r.constraint.contains(candidate.version, include_prereleases=True) for r in requirements):
            why = provider.why_skipped(candidate, requirements)
            if why is not None:
                out.append({"version": str(candidate.version), "rule": why[0], "why": why[1]})
    return out


class _Chains:
    """Shortest chains from a root requirement to a candidate, through the candidates the search
    looked at: ``["kubern-ha", "kubern-ha 2.0.0", "kubernetes 1.28.0", "etcd >=3.5, <4.0"]``."""

    def __init__(self, provider: _Provider, roots: Sequence[Requirement]) -> None:
        self.provider = provider
        self.roots = roots
        by_name: dict[str, list[Candidate]] = {}
        for candidate in provider.seen.values():
            by_name.setdefault(candidate.name, []).append(candidate)
        for found in by_name.values():
            found.sort(key=_version_of, reverse=True)
        self.by_name = by_name
        self._paths: dict[int, list[str]] | None = None

    def _search(self) -> dict[int, list[str]]:
        """Breadth first from the roots: for each candidate reached, the chain that reaches it."""
        paths: dict[int, list[str]] = {}
        queue: deque[Candidate] = deque()

        def visit(requirement: Requirement, before: list[str]) -> None:
            for candidate in self.by_name.get(requirement.name, ()):
                if id(candidate) not in paths and requirement.constraint.contains(
                    candidate.version, include_prereleases=True
                ):
                    paths[id(candidate)] = [*before, str(candidate)]
                    queue.append(candidate)

        for root in self.roots:
            visit(root, [describe_requirement(root)])
        while queue:
            candidate = queue.popleft()
            for requirement in candidate.dependencies:
                visit(requirement, paths[id(candidate)])
        return paths

    def chain(self, requirement: Requirement, parent: Candidate | None) -> list[str]:
        if parent is None:
            return [describe_requirement(requirement)]
        if self._paths is None:
            self._paths = self._search()
        before = self._paths.get(id(parent)) or ["…", str(parent)]
        return [*before, describe_requirement(requirement)]
