"""The complete method behind the fast path: the request as a SAT problem, decided by MiniSat 2.2
(through python-sat), so every request within the budget gets a valid answer when one exists, or a
proof that none does.

The encoding covers every name the roots reach through any version the rules allow: one variable
per allowed candidate; at most one candidate per name; each root requirement is a clause of the
candidates it admits; each dependency of a candidate is ``not candidate, or one of the candidates
it admits``. A dependency on a name with no allowed candidate admits none, so its candidate is out.

Which answer, of all the valid ones: the *newest in breadth-first order*. The names are fixed one
at a time, in the order a breadth-first walk from the roots meets them (the roots in the order
given, then each fixed candidate's dependencies in their order), each to the first of its
candidates (the locked version first, then newest first) that still leaves the problem
satisfiable. So the first root gets the newest version for which any answer exists, the next name
the newest that fits with that, and so on; names no fixed candidate needs are not installed. The
answer depends only on which assignments are valid, never on how the SAT solver searched, so the
client and the server (and any two versions of the solver) agree. It is the answer resolvelib gives
wherever resolvelib gives one without backtracking.

A proof of impossibility is a set of requirements (root requirements, and "candidate C requires R")
that cannot all hold together, made minimal (removing any one of them makes the rest satisfiable)
while the budget lasts: `extensions.resolver.explain` turns it into words.

The solver is run in steps of a bounded number of conflicts, and the deadline is checked between
them, so it holds the interpreter for milliseconds at a time and stops within one step of the end
of the budget.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from pysat.solvers import Solver

from extensions.resolver.budget import Budget, OutOfBudget
from extensions.resolver.model import Candidate
from extensions.resolver.universe import Universe
from extensions.versions import Requirement

SOLVER = "minisat22"
#: Conflicts per solver step (a few milliseconds); the deadline is checked between steps.
CONFLICTS_PER_STEP = 2_000
#: Literals the encoding may hold; a request that needs more is too complex (memory stays bounded).
MAX_LITERALS = 4_000_000

#: A requirement and who made it: a candidate, or None for a root requirement.
Cause = tuple[Requirement, Candidate | None]


class EncodingTooLarge(Exception):
    """The encoding would exceed ``MAX_LITERALS``."""


@dataclass(frozen=True)
class Proof:
    """No answer exists: ``causes`` cannot all hold together (``minimal``: none of them can be left
    out, which the budget may not have allowed establishing)."""

    causes: tuple[Cause, ...]
    minimal: bool


@dataclass(frozen=True)
class Answer:
    """The chosen candidate of every name the answer needs, in the order they were fixed."""

    chosen: dict[str, Candidate]


class _Encoding:
    """The clauses of one request (see the module docstring)."""

    def __init__(self, universe: Universe, roots: Sequence[Requirement]) -> None:
        self.universe = universe
        self.budget = universe.budget
        self.variables: dict[str, dict[int, int]] = {}  # name -> candidate index -> variable
        self.candidate: dict[int, Candidate] = {}
        self.hard: list[list[int]] = []  # at most one candidate per name
        self.soft: list[tuple[Cause, list[int]]] = []  # one clause per requirement, with its cause
        self.top = 0
        self.literals = 0
        self._admitted: dict[tuple[str, object], list[int]] = {}
        queue: deque[str] = deque()
        for root in roots:
            self._add((root, None), [], self._admits(root, queue))
        while queue:
            name = queue.popleft()
            for _index, variable in self.variables[name].items():
                candidate = self.candidate[variable]
                for requirement in candidate.dependencies:
                    self._add((requirement, candidate), [-variable], self._admits(requirement, queue))
        self.names = list(self.variables)

    def _new(self) -> int:
        self.top += 1
        return self.top

    def _add(self, cause: Cause, head: list[int], admitted: list[int]) -> None:
        self.literals += len(head) + len(admitted)
        if self.literals > MAX_LITERALS:
            raise EncodingTooLarge
        self.soft.append((cause, [*head, *admitted]))

    def _admits(self, requirement: Requirement, queue: deque[str]) -> list[int]:
        """The variables of the candidates ``requirement`` admits (its name encoded on first sight)."""
        key = (requirement.name, requirement.constraint)
        found = self._admitted.get(key)
        if found is not None:
            return found
        name = requirement.name
        if name not in self.variables:
            self._encode_name(name)
            queue.append(name)
        info = self.universe.info(name)
        mask = self.universe.mask(info, requirement.constraint)
        found = [v for i, v in self.variables[name].items() if mask >> i & 1]
        self._admitted[key] = found
        return found

    def _encode_name(self, name: str) -> None:
        self.budget.check()
        info = self.universe.info(name)
        variables: dict[int, int] = {}
        for index, candidate in enumerate(info.candidates):
            if info.allowed >> index & 1:
                variable = self._new()
                variables[index] = variable
                self.candidate[variable] = candidate
        self.variables[name] = variables
        self._at_most_one(list(variables.values()))

    def _at_most_one(self, xs: list[int]) -> None:
        if len(xs) <= 6:
            self.hard.extend([-a, -b] for i, a in enumerate(xs) for b in xs[i + 1 :])
            self.literals += len(xs) * (len(xs) - 1)
            return
        # Sinz's sequential counter: s_i is true once one of x_1..x_i is.
        counters = [self._new() for _ in xs[:-1]]
        self.hard.append([-xs[0], counters[0]])
        for i in range(1, len(xs) - 1):
            self.hard.extend(([-xs[i], counters[i]], [-counters[i - 1], counters[i]], [-xs[i], -counters[i - 1]]))
        self.hard.append([-xs[-1], -counters[-1]])
        self.literals += 6 * len(xs)
        if self.literals > MAX_LITERALS:
            raise EncodingTooLarge


def _solve(solver: Solver, assumptions: list[int], budget: Budget) -> bool:
    """Whether the clauses hold with ``assumptions``, in bounded steps (``OutOfBudget`` between them)."""
    while True:
        budget.check()
        solver.conf_budget(CONFLICTS_PER_STEP)
        result = solver.solve_limited(assumptions=assumptions)
        if result is not None:
            return bool(result)


def decide(universe: Universe, roots: Sequence[Requirement]) -> Answer | Proof:
    """The newest answer in breadth-first order, or a proof that none exists. ``OutOfBudget``,
    ``TooManyExtensions`` and ``EncodingTooLarge`` pass through."""
    budget = universe.budget
    encoding = _Encoding(universe, roots)
    with Solver(name=SOLVER, bootstrap_with=encoding.hard) as solver:
        for _, clause in encoding.soft:
            solver.add_clause(clause)
        if not _solve(solver, [], budget):
            return _proof(encoding, budget)
        model = solver.get_model() or []
        fixed: list[int] = []
        chosen: dict[str, Candidate] = {}
        queue = deque(r.name for r in roots)
        while queue:
            name = queue.popleft()
            if name in chosen:
                continue
            info = universe.info(name)
            variables = encoding.variables[name]
            order = info.chosen(sum(1 << i for i in variables))
            for candidate in order:
                variable = variables[info.index[candidate.version]]
                if model[variable - 1] > 0 or _solve(solver, [*fixed, variable], budget):
                    if model[variable - 1] <= 0:
                        model = solver.get_model() or []
                    fixed.append(variable)
                    chosen[name] = candidate
                    break
            else:  # pragma: no cover - the name is needed by a fixed candidate, so some version fits
                raise AssertionError(f"no candidate of {name} fits a satisfiable assignment")
            queue.extend(r.name for r in chosen[name].dependencies if r.name not in chosen)
    return Answer(chosen)


def _proof(encoding: _Encoding, budget: Budget) -> Proof:
    """A minimal set of requirements that cannot hold together (deletion-based, while the budget
    lasts; what remains when it ends is still a proof, just perhaps not minimal)."""
    selectors: list[int] = []
    cause_of: dict[int, Cause] = {}
    with Solver(name=SOLVER, bootstrap_with=encoding.hard) as solver:
        for cause, clause in encoding.soft:
            selector = encoding._new()
            selectors.append(selector)
            cause_of[selector] = cause
            solver.add_clause([-selector, *clause])
        position = {s: i for i, s in enumerate(selectors)}
        minimal = False
        core = selectors
        try:
            if _solve(solver, selectors, budget):  # pragma: no cover - the plain clauses were unsatisfiable
                raise AssertionError("the requirements hold together after all")
            core = sorted(solver.get_core() or selectors, key=position.__getitem__)
            i = 0
            while i < len(core):
                trial = core[:i] + core[i + 1 :]
                if _solve(solver, trial, budget):
                    i += 1  # core[i] is needed
                else:
                    kept = set(solver.get_core() or trial)
                    core = [s for s in trial if s in kept]
            minimal = True
        except OutOfBudget as exc:
            if exc.cancelled:
                raise
    return Proof(tuple(cause_of[s] for s in core), minimal)
