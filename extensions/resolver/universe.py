"""What the rules let each name be, shared by both searches and by the explanations: per name, the
candidates newest first and, as bit masks over them, the ones the rules allow (runtime, yanked) and
the ones each constraint admits. Bit ``i`` of a mask stands for ``candidates[i]``.

Every constraint is evaluated once per name (``mask``), so the searches only AND integers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from extensions.resolver.budget import Budget
from extensions.resolver.describe import shown_constraint
from extensions.resolver.model import Candidate, Catalogue
from extensions.versions import Constraint, Requirement, SemVer, runs_on


class TooManyExtensions(Exception):
    """More than ``max_extensions`` names are involved."""


class NameInfo:
    """Everything precomputed about one name."""

    __slots__ = ("allowed", "candidates", "full", "index", "lists", "locked_bit", "masks")

    def __init__(
        self, versions: Sequence[Candidate], runtime: SemVer | None, locked: SemVer | None, pinned: Iterable[SemVer]
    ) -> None:
        unique: dict[SemVer, Candidate] = {}
        for candidate in sorted(versions, key=lambda c: c.version, reverse=True):
            unique.setdefault(candidate.version, candidate)
        #: newest first
        self.candidates: tuple[Candidate, ...] = tuple(unique.values())
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
        #: the locked version (tried first), if it suits the runtime
        self.locked_bit = 0
        if locked is not None and locked in self.index:
            self.locked_bit = (1 << self.index[locked]) & runtime_ok
        #: the candidates the rules let through: suiting the runtime, and not yanked unless revived
        self.allowed = runtime_ok & (~yanked | revived)
        self.masks: dict[Constraint, int] = {}
        self.lists: dict[int, list[Candidate]] = {}

    def chosen(self, mask: int) -> list[Candidate]:
        """The candidates of ``mask`` in the order they are tried: the locked one first, then newest
        first (cached per mask)."""
        found = self.lists.get(mask)
        if found is None:
            found = [c for i, c in enumerate(self.candidates) if mask >> i & 1]
            if mask & self.locked_bit:
                locked = self.candidates[self.locked_bit.bit_length() - 1]
                found.remove(locked)
                found.insert(0, locked)
            self.lists[mask] = found
        return found


class Universe:
    """The catalogue seen through the request's rules (``include_prereleases``, ``runtime``,
    ``locked``, exact ``pinned`` root versions); names are looked up once, at most ``max_extensions``."""

    def __init__(
        self,
        catalogue: Catalogue,
        *,
        include_prereleases: bool,
        runtime: SemVer | None,
        locked: Mapping[str, SemVer],
        pinned: Mapping[str, set[SemVer]],
        max_extensions: int,
        budget: Budget,
    ) -> None:
        self.catalogue = catalogue
        self.include_prereleases = include_prereleases
        self.runtime = runtime
        self.locked = locked
        self.pinned = pinned
        self.max_extensions = max_extensions
        self.budget = budget
        self.names: dict[str, NameInfo] = {}

    def info(self, name: str) -> NameInfo:
        info = self.names.get(name)
        if info is None:
            if len(self.names) >= self.max_extensions:
                raise TooManyExtensions
            self.budget.check()
            info = NameInfo(
                self.catalogue.versions(name), self.runtime, self.locked.get(name), self.pinned.get(name, ())
            )
            self.names[name] = info
        return info

    def mask(self, info: NameInfo, constraint: Constraint) -> int:
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

    def why_skipped(self, candidate: Candidate, requirements: Sequence[Requirement] = ()) -> tuple[str, str] | None:
        """Why a rule keeps ``candidate`` out although the constraints (pre-releases aside) admit it,
        as ``(rule, text)`` with rule ``runtime``, ``yanked`` or ``prerelease``; None if no rule does."""
        if not runs_on(candidate.provisioning_version, self.runtime):
            pv = candidate.provisioning_version
            assert pv is not None
            return "runtime", f"needs provisioning {shown_constraint(pv)}, the runtime is {self.runtime}"
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

    def skipped_versions(self, name: str, requirements: Sequence[Requirement]) -> list[dict[str, str]]:
        """The versions every requirement admits (pre-releases aside) that a rule excludes, newest first."""
        out = []
        for candidate in self.info(name).candidates:
            if all(r.constraint.contains(candidate.version, include_prereleases=True) for r in requirements):
                why = self.why_skipped(candidate, requirements)
                if why is not None:
                    out.append({"version": str(candidate.version), "rule": why[0], "why": why[1]})
        return out
