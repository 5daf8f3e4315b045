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
