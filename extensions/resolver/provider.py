"""The fast path: resolvelib's backtracking search (STYLE habit 15) with this package's provider.

It finds the answer of nearly every request in a few milliseconds, and its answers are the ones
users have always had. It is not complete (its backjumping gives up, or spins, on some shapes) and
it is bounded twice: by the resolution's deadline, checked inside the provider's callbacks (which
resolvelib's backjumping calls too, so it cannot spin past it), and by a work allowance counted in
those callbacks, so that the complete solver (`extensions.resolver.complete`) gets the rest of the
time. The work count is deterministic: the same request on the same data takes the same path on
every machine, which keeps the client's and the server's answers identical.

Speed: ``find_matches`` is an AND of the per-constraint masks (`extensions.resolver.universe`), and
the lists it returns are cached per mask. The provider picks the next name to pin itself
(``narrow_requirement_selection`` returns a single name), so resolvelib never sorts by preference.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence

from resolvelib import AbstractProvider, BaseReporter, ResolutionImpossible, ResolutionTooDeep
from resolvelib.resolvers import RequirementInformation
from resolvelib.resolvers import Resolution as _Search

from extensions.resolver.model import Candidate
from extensions.resolver.universe import Universe
from extensions.versions import Requirement

#: Work units the fast path may spend (one per candidate list asked for, plus one per 16 rejected
#: candidates resolvelib hands back), plus ``WORK_PER_NAME`` for each name it has looked at: ordinary
#: requests on a catalogue of 300 names x 10 versions use 60 to 1,900 (0.3 s at most here); past
#: that, backtracking rarely finishes, and the complete solver answers in less time than it would
#: spend.
FAST_PATH_WORK = 3_000
WORK_PER_NAME = 8


class GaveUp(Exception):
    """The fast path has no answer: ``why`` is ``impossible`` (resolvelib proved none exists, which
    its backjumping gets wrong around cycles), ``rounds`` or ``work`` (an allowance ran out)."""

    def __init__(self, why: str, *, rounds: int = 0, work: int = 0) -> None:
        super().__init__(why)
        self.why = why
        self.rounds = rounds
        self.work = work

    def tried(self) -> str:
        """What the fast path did, for a ``too_complex`` message."""
        if self.why == "rounds":
            return f"backtracking gave up after {self.rounds} rounds"
        if self.why == "work":
            return f"backtracking stopped after {self.work} steps"
        return "backtracking found no answer"


class _Provider(AbstractProvider[Requirement, Candidate, str]):
    def __init__(self, universe: Universe, work_limit: int) -> None:
        self.universe = universe
        self.budget = universe.budget
        self.work = 0
        self.work_limit = work_limit
        self.satisfied: dict[tuple[int, int], bool] = {}

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
        return self._preference(identifier, information, _cause_names(backtrack_causes))

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
        count = self.universe.admitted(identifier, (i.requirement for i in information[identifier])).bit_count()
        return (identifier not in causes, count, identifier)

    def _spend(self, units: int) -> None:
        self.work += units
        limit = self.work_limit + WORK_PER_NAME * len(self.universe.names)
        if self.work > limit:
            raise GaveUp("work", work=limit)
        self.budget.check()

    def find_matches(
        self,
        identifier: str,
        requirements: Mapping[str, Iterator[Requirement]],
        incompatibilities: Mapping[str, Iterator[Candidate]],
    ) -> list[Candidate]:
        universe = self.universe
        info = universe.info(identifier)
        mask = universe.admitted(identifier, requirements[identifier])
        walked = 0
        for bad in incompatibilities[identifier]:
            walked += 1
            index = info.index.get(bad.version)
            if index is not None:
                mask &= ~(1 << index)
        self._spend(1 + walked // 16)
        return info.chosen(mask)

    def is_satisfied_by(self, requirement: Requirement, candidate: Candidate) -> bool:
        # resolvelib asks this for every requirement of every pinned name in every round: memoise by
        # identity (requirements and candidates live as long as the catalogue and the provider).
        key = (id(requirement), id(candidate))
        found = self.satisfied.get(key)
        if found is None:
            found = requirement.constraint.contains(
                candidate.version, include_prereleases=self.universe.include_prereleases
            )
            self.satisfied[key] = found
            if len(self.satisfied) % 1024 == 0:
                self.budget.check()
        return found

    def get_dependencies(self, candidate: Candidate) -> Sequence[Requirement]:
        return candidate.dependencies


def _cause_names(causes: Sequence[RequirementInformation[Requirement, Candidate]]) -> frozenset[str]:
    if not causes:
        return frozenset()
    names = {c.requirement.name for c in causes}
    names.update(c.parent.name for c in causes if c.parent is not None)
    return frozenset(names)


def backtrack(
    universe: Universe, roots: Sequence[Requirement], *, max_rounds: int, work_limit: int = FAST_PATH_WORK
) -> dict[str, Candidate]:
    """resolvelib's answer: the chosen candidate of each name the roots reach, or ``GaveUp``.
    ``OutOfBudget`` and ``TooManyExtensions`` pass through."""
    provider = _Provider(universe, work_limit)
    search: _Search[Requirement, Candidate, str] = _Search(provider, BaseReporter())
    try:
        state = search.resolve(roots, max_rounds=max_rounds)
    except ResolutionImpossible:
        raise GaveUp("impossible") from None
    except ResolutionTooDeep:
        raise GaveUp("rounds", rounds=max_rounds) from None
    return reachable(state.mapping, roots)


def reachable(mapping: Mapping[str, Candidate], roots: Sequence[Requirement]) -> dict[str, Candidate]:
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
