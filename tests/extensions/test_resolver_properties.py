"""Property tests for `extensions.resolver` against a brute-force search: on random small catalogues
(2 to 5 names x 1 to 4 versions, random constraints from the SPEC 2.3 grammar, yanked versions,
pre-releases, runtime compatibility, locked pins), every answer satisfies every constraint and
rule, and "impossible" is only said when no assignment of versions works."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from extensions.errors import ResolutionError
from extensions.resolver import Candidate, MemoryCatalogue, describe_constraint, install_order, resolve
from extensions.versions import Constraint, Requirement, Version
from tests.extensions.brute_resolver import newest_in_breadth_first_order, solutions, violations

SETTINGS = settings(max_examples=300, deadline=None)

NAMES = ["aa", "bb", "cc", "dd", "ee"]
VERSIONS = ["0.1.0", "0.1.1", "1.0.0", "1.1.0", "1.2.0-rc.1", "1.2.0", "2.0.0-beta.1", "2.0.0", "2.1.3"]
CONSTRAINTS = [
    "*",
    "^1.0",
    "^0.1",
    "~1.1.0",
    ">=1.1",
    ">1.0",
    "<2",
    "<=1.2",
    "1.*",
    "2.x",
    "=1.0.0",
    "=2.1.3",
    "=1.2.0-rc.1",
    ">=1.2.0-rc.1",
    ">=2.0.0-beta.1, <3",
    "!=1.1.0",
    "!=1.1",
    "^1 || ^2",
    ">=0.1, <1.2",
    "0.1.1",
    "~0.1.0 || =2.0.0",
]
PROVISIONING = [None, None, None, None, ">=1.0", "<1.5", "^2"]
# Roots and dependencies ask for "*" half of the time, so that many problems have answers.
LOOSE = st.sampled_from(["*"]) | st.sampled_from(CONSTRAINTS)
RUNTIMES = [None, "1.0.0", "1.4.0", "2.1.0"]


@dataclass
class Problem:
    catalogue: dict[str, list[Candidate]]
    roots: list[Requirement]
    runtime: Version | None
    include_prereleases: bool
    locked: dict[str, Version]


@st.composite
def problems(draw: st.DrawFn, *, acyclic: bool = True) -> Problem:
    count = draw(st.integers(min_value=2, max_value=5))
    names = NAMES[:count]
    catalogue: dict[str, list[Candidate]] = {}
    for position, name in enumerate(names):
        # Dependencies go to later names only (acyclic), or anywhere but the name itself.
        targets = names[position + 1 :] if acyclic else [n for n in NAMES[: count + 1] if n != name]
        versions = draw(st.lists(st.sampled_from(VERSIONS), min_size=1, max_size=4, unique=True))
        found = []
        for text in versions:
            deps = draw(
                st.lists(
                    st.tuples(st.sampled_from(targets), LOOSE),
                    max_size=min(3, len(targets)),
                    unique_by=lambda d: d[0],
                )
                if targets
                else st.just([])
            )
            pv = draw(st.sampled_from(PROVISIONING))
            found.append(
                Candidate(
                    name=name,
                    version=Version.parse(text),
                    dependencies=tuple(Requirement(n, Constraint.parse(c)) for n, c in deps),
                    yanked=draw(st.integers(0, 7)) == 0,
                    provisioning_version=None if pv is None else Constraint.parse(pv),
                )
            )
        catalogue[name] = found
    # Roots may name one name that is not in the catalogue.
    root_names = st.sampled_from(names) | st.sampled_from(names) | st.sampled_from(NAMES[: count + 1])
    roots = draw(
        st.lists(
            st.tuples(root_names, LOOSE).map(lambda t: Requirement(t[0], Constraint.parse(t[1]))),
            min_size=1,
            max_size=4,
        )
    )
    runtime = draw(st.sampled_from(RUNTIMES))
    locked = draw(st.dictionaries(st.sampled_from(names), st.sampled_from(VERSIONS).map(Version.parse), max_size=2))
    return Problem(catalogue, roots, None if runtime is None else Version.parse(runtime), draw(st.booleans()), locked)


@st.composite
def diamonds(draw: st.DrawFn) -> Problem:
    """``aa`` and ``bb`` (the roots) both depend on ``cc``, which (like them, maybe) depends on
    ``dd``: conflicts and backtracking are common."""
    deps_of = {"aa": ["cc", "dd"], "bb": ["cc", "dd"], "cc": ["dd"], "dd": []}
    catalogue: dict[str, list[Candidate]] = {}
    for name, targets in deps_of.items():
        versions = draw(st.lists(st.sampled_from(VERSIONS), min_size=1, max_size=4, unique=True))
        found = []
        for text in versions:
            deps = [
                Requirement(target, Constraint.parse(draw(LOOSE)))
                for i, target in enumerate(targets)
                if i == 0 or draw(st.booleans())
            ]
            found.append(Candidate(name, Version.parse(text), tuple(deps), yanked=draw(st.integers(0, 5)) == 0))
        catalogue[name] = found
    roots = [Requirement("aa"), Requirement("bb")]
    locked = draw(
        st.dictionaries(st.sampled_from(list(deps_of)), st.sampled_from(VERSIONS).map(Version.parse), max_size=2)
    )
    return Problem(catalogue, roots, None, draw(st.booleans()), locked)


def _solve(problem: Problem, **extra: int) -> tuple[dict[str, Candidate] | None, ResolutionError | None]:
    catalogue = MemoryCatalogue(c for found in problem.catalogue.values() for c in found)
    try:
        result = resolve(
            problem.roots,
            catalogue,
            runtime_version=problem.runtime,
            include_prereleases=problem.include_prereleases,
            locked=problem.locked,
            **extra,
        )
    except ResolutionError as exc:
        return None, exc
    return result.resolved, None


def _brute(problem: Problem) -> list[dict[str, Candidate]]:
    return list(
        solutions(
            problem.roots,
            problem.catalogue,
            runtime=problem.runtime,
            include_prereleases=problem.include_prereleases,
            locked=problem.locked,
        )
    )


def _check_against_brute_force(problem: Problem) -> None:
    resolved, error = _solve(problem)
    found = _brute(problem)
    if error is not None:
        reasons = {d["reason"] for d in error.details}
        assert reasons <= {"conflict", "no_matching_version", "unknown", "excluded"}, error.details
        assert found == [], f"the resolver said {error.message!r}, but {found[0]} works"
        return
    assert resolved is not None
    assert (
        violations(
            problem.roots,
            resolved,
            runtime=problem.runtime,
            include_prereleases=problem.include_prereleases,
            locked=problem.locked,
        )
        == []
    )
    assert any({n: c.version for n, c in s.items()} == {n: c.version for n, c in resolved.items()} for s in found)


@SETTINGS
@given(problems())
def test_every_answer_satisfies_every_rule_and_impossible_means_impossible(problem: Problem) -> None:
    _check_against_brute_force(problem)


@SETTINGS
@given(diamonds())
def test_on_diamonds_answers_are_valid_and_impossible_means_impossible(problem: Problem) -> None:
    _check_against_brute_force(problem)


@SETTINGS
@given(problems())
def test_a_single_root_gets_the_newest_version_that_has_a_solution(problem: Problem) -> None:
    # With one root requirement, the version chosen for it is the newest one among all solutions
    # (resolvelib tries candidates newest first and backtracks only when a choice cannot work).
    roots = problem.roots[:1]
    single = Problem(problem.catalogue, roots, problem.runtime, problem.include_prereleases, {})
    resolved, _ = _solve(single)
    found = _brute(single)
    if resolved is None:
        assert found == []
        return
    name = roots[0].name
    assert resolved[name].version == max(s[name].version for s in found)


@SETTINGS
@given(problems())
def test_a_locked_version_is_kept_when_some_answer_keeps_it_with_one_root(problem: Problem) -> None:
    root = problem.roots[0]
    locked = {n: v for n, v in problem.locked.items() if n == root.name}
    single = Problem(problem.catalogue, [root], problem.runtime, problem.include_prereleases, locked)
    resolved, _ = _solve(single)
    if resolved is None or root.name not in locked:
        return
    keeps = [s for s in _brute(single) if s[root.name].version == locked[root.name]]
    if keeps:
        assert resolved[root.name].version == locked[root.name]


@SETTINGS
@given(problems(acyclic=False))
def test_with_cycles_allowed_it_answers_or_names_a_cycle_or_agrees_it_is_impossible(problem: Problem) -> None:
    resolved, error = _solve(problem)
    found = _brute(problem)
    if error is None:
        assert resolved is not None
        assert (
            violations(
                problem.roots,
                resolved,
                runtime=problem.runtime,
                include_prereleases=problem.include_prereleases,
                locked=problem.locked,
            )
            == []
        )
        return
    (detail, *_) = error.details
    if detail["reason"] == "cycle":
        cycle = detail["cycle"]
        assert cycle[0] == cycle[-1] and len(cycle) >= 2
        assert found, "a cycle was reported, so some answer exists"
    else:
        assert found == [], f"the resolver said {error.message!r}, but {found[0]} works"


@SETTINGS
@given(st.dictionaries(st.sampled_from(NAMES), st.lists(st.sampled_from(NAMES), max_size=3), min_size=1))
def test_install_order_puts_dependencies_first_and_breaks_ties_by_name(graph: dict[str, list[str]]) -> None:
    resolved = {
        name: Candidate(name, Version(1, 0, 0), tuple(Requirement(d) for d in deps if d != name))
        for name, deps in graph.items()
    }
    try:
        order = install_order(resolved)
    except ResolutionError as exc:
        cycle = exc.details[0]["cycle"]
        assert cycle[0] == cycle[-1]
        for a, b in itertools.pairwise(cycle):
            assert b in {r.name for r in resolved[a].dependencies}
        return
    assert sorted(order) == sorted(resolved)
    position = {name: i for i, name in enumerate(order)}
    for name, candidate in resolved.items():
        for dep in candidate.dependencies:
            if dep.name in resolved:
                assert position[dep.name] < position[name]
    # Each name comes as early as it can: when it was placed, no ready name sorted before it.
    placed: set[str] = set()
    for name in order:
        ready = [
            n
            for n in resolved
            if n not in placed and all(d.name in placed or d.name not in resolved for d in resolved[n].dependencies)
        ]
        assert name == min(ready)
        placed.add(name)


@SETTINGS
@given(st.sampled_from([*CONSTRAINTS, "^0.0.3", "~1", ">=1.2.3, <1.5", "<1.2.0-0", "^0.0", "<=1.2.0", ">1.2.0"]))
def test_describe_constraint_is_equivalent_to_the_constraint(text: str) -> None:
    constraint = Constraint.parse(text)
    assert Constraint.parse(describe_constraint(constraint)) == constraint


@SETTINGS
@given(problems())
def test_the_complete_solver_alone_honours_every_rule_and_its_preference(problem: Problem) -> None:
    # Without the fast path: the answer is valid under every rule (yanked, pre-releases, runtime,
    # locks), and it is the newest in breadth-first order from the roots, the locked version first.
    options = {"runtime": problem.runtime, "include_prereleases": problem.include_prereleases, "locked": problem.locked}
    expected = newest_in_breadth_first_order(problem.roots, problem.catalogue, **options)
    resolved, error = _solve(problem, fast_path_work=0)
    if error is not None:
        assert expected is None, f"said {error.message!r}, but {expected} works"
        return
    assert resolved is not None
    assert violations(problem.roots, resolved, **options) == []
    assert {n: c.version for n, c in resolved.items()} == expected
