"""A brute-force resolver for tests: try every assignment of versions to names and keep those that
satisfy the rules of `extensions.resolver` (written independently of it), to check its answers and
its "impossible" on small catalogues."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence

from extensions.resolver import Candidate
from extensions.versions import Requirement, Version


def reachable(roots: Sequence[Requirement], chosen: Mapping[str, Candidate | None]) -> dict[str, Candidate] | None:
    """The candidates the roots reach through `chosen`, or None if a reached name has no candidate."""
    out: dict[str, Candidate] = {}
    stack = [r.name for r in roots]
    while stack:
        name = stack.pop()
        if name in out:
            continue
        candidate = chosen.get(name)
        if candidate is None:
            return None
        out[name] = candidate
        stack.extend(r.name for r in candidate.dependencies)
    return out


def violations(
    roots: Sequence[Requirement],
    solution: Mapping[str, Candidate],
    *,
    runtime: Version | None = None,
    include_prereleases: bool = False,
    locked: Mapping[str, Version] | None = None,
) -> list[str]:
    """Every rule `solution` breaks (empty if it is a valid answer for `roots`)."""
    problems = []
    locked = locked or {}
    requirements: list[tuple[Requirement, str]] = [(r, "root") for r in roots]
    for candidate in solution.values():
        requirements.extend((r, str(candidate)) for r in candidate.dependencies)
    for requirement, who in requirements:
        chosen = solution.get(requirement.name)
        if chosen is None:
            problems.append(f"{who} requires {requirement}, which is missing")
        elif not requirement.constraint.contains(chosen.version, include_prereleases=include_prereleases):
            problems.append(f"{who} requires {requirement}, but {chosen} was chosen")
    for name, candidate in solution.items():
        pv = candidate.provisioning_version
        if runtime is not None and pv is not None and not pv.contains(runtime, include_prereleases=True):
            problems.append(f"{candidate} does not suit runtime {runtime}")
        if candidate.yanked and locked.get(name) != candidate.version:
            pinned = any(r.name == name and r.constraint.exact == candidate.version for r in roots)
            if not pinned:
                problems.append(f"{candidate} is yanked and neither pinned exactly by the request nor locked")
    reached = reachable(roots, solution)
    if reached is None or set(reached) != set(solution):
        problems.append("the solution holds names the roots do not reach")
    return problems


def solutions(
    roots: Sequence[Requirement],
    catalogue: Mapping[str, Sequence[Candidate]],
    *,
    runtime: Version | None = None,
    include_prereleases: bool = False,
    locked: Mapping[str, Version] | None = None,
) -> Iterator[dict[str, Candidate]]:
    """Every valid answer (each once), by trying every assignment."""
    names = sorted(catalogue)
    seen = set()
    options = [[None, *catalogue[name]] for name in names]
    for combination in itertools.product(*options):
        chosen = dict(zip(names, combination, strict=True))
        solution = reachable(roots, chosen)
        if solution is None:
            continue
        key = frozenset((n, c.version) for n, c in solution.items())
        if key in seen:
            continue
        seen.add(key)
        if not violations(roots, solution, runtime=runtime, include_prereleases=include_prereleases, locked=locked):
            yield solution


def _usable(
    candidate: Candidate,
    roots: Sequence[Requirement],
    *,
    runtime: Version | None,
    locked: Mapping[str, Version],
) -> bool:
    """The rules on one candidate alone: runtime compatibility, and yanked only if pinned or locked."""
    pv = candidate.provisioning_version
    if runtime is not None and pv is not None and not pv.contains(runtime, include_prereleases=True):
        return False
    if candidate.yanked and locked.get(candidate.name) != candidate.version:
        return any(r.name == candidate.name and r.constraint.exact == candidate.version for r in roots)
    return True


def search(
    roots: Sequence[Requirement],
    catalogue: Mapping[str, Sequence[Candidate]],
    *,
    runtime: Version | None = None,
    include_prereleases: bool = False,
    locked: Mapping[str, Version] | None = None,
    fixed: Mapping[str, Version] | None = None,
) -> dict[str, Candidate] | None:
    """An exact oracle for catalogues too big to enumerate: a depth-first search over the names the
    answer needs, each tried at every version that fits what is already chosen; some valid answer
    (with ``fixed`` names at those versions), or None when none exists."""
    locked = locked or {}
    fixed = fixed or {}

    def fits(candidate: Candidate, chosen: Mapping[str, Candidate], pending: Sequence[Requirement]) -> bool:
        if candidate.name in fixed and candidate.version != fixed[candidate.name]:
            return False
        if not _usable(candidate, roots, runtime=runtime, locked=locked):
            return False
        for requirement in pending:
            if requirement.name == candidate.name and not requirement.constraint.contains(
                candidate.version, include_prereleases=include_prereleases
            ):
                return False
        for requirement in candidate.dependencies:  # what it needs of names already chosen
            other = chosen.get(requirement.name)
            if other is not None and not requirement.constraint.contains(
                other.version, include_prereleases=include_prereleases
            ):
                return False
        return True

    def step(chosen: dict[str, Candidate], pending: list[Requirement]) -> dict[str, Candidate] | None:
        open_names = [r.name for r in pending if r.name not in chosen]
        if not open_names:
            return dict(chosen)
        name = open_names[0]
        for candidate in catalogue.get(name, ()):
            if fits(candidate, chosen, pending):
                chosen[name] = candidate
                found = step(chosen, [*pending, *candidate.dependencies])
                del chosen[name]
                if found is not None:
                    return found
        return None

    found = step({}, list(roots))
    if found is not None:
        assert not violations(roots, found, runtime=runtime, include_prereleases=include_prereleases, locked=locked)
    return found


def newest_in_breadth_first_order(
    roots: Sequence[Requirement],
    catalogue: Mapping[str, Sequence[Candidate]],
    *,
    runtime: Version | None = None,
    include_prereleases: bool = False,
    locked: Mapping[str, Version] | None = None,
) -> dict[str, Version] | None:
    """The answer the complete solver promises (extensions.resolver.complete), by its definition:
    names fixed in breadth-first order from the roots, each to its first version (the locked one,
    then newest first) with which some answer still exists. None when no answer exists."""
    locked = locked or {}
    if search(roots, catalogue, runtime=runtime, include_prereleases=include_prereleases, locked=locked) is None:
        return None
    fixed: dict[str, Version] = {}
    queue = [r.name for r in roots]
    while queue:
        name = queue.pop(0)
        if name in fixed:
            continue
        ordered = sorted(catalogue.get(name, ()), key=lambda c: c.version, reverse=True)
        ordered.sort(key=lambda c: c.version != locked.get(name))
        for candidate in ordered:
            trial = {**fixed, name: candidate.version}
            found = search(
                roots, catalogue, runtime=runtime, include_prereleases=include_prereleases, locked=locked, fixed=trial
            )
            if found is not None and name in found:
                fixed[name] = candidate.version
                queue.extend(r.name for r in candidate.dependencies)
                break
    return fixed
