"""Property tests for `extensions.versions`: precedence against an independent SemVer implementation,
caret/tilde against their SPEC 2.3 expansions, round-trips of the normal form, and the exactness of
the satisfiability check."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable

import semver
from hypothesis import example, given, settings
from hypothesis import strategies as st

from extensions.versions import Constraint, Version

SETTINGS = settings(max_examples=200, deadline=None)

# -- Strategies ---------------------------------------------------------------------------------------

numbers = st.integers(min_value=0, max_value=4) | st.integers(min_value=0, max_value=30)
numeric_ident = st.integers(min_value=0, max_value=12).map(str)
alnum_ident = st.text(alphabet="abzAZ-09", min_size=1, max_size=4).filter(lambda s: not s.isdigit())
prerelease_ids = st.lists(numeric_ident | alnum_ident, min_size=0, max_size=3)
build_ids = st.lists(st.text(alphabet="abc019-", min_size=1, max_size=4), min_size=0, max_size=2)


@st.composite
def version_texts(draw: st.DrawFn) -> str:
    text = ".".join(str(draw(numbers)) for _ in range(3))
    pre = draw(prerelease_ids)
    if pre:
        text += "-" + ".".join(pre)
    build = draw(build_ids)
    if build:
        text += "+" + ".".join(build)
    return text


versions = version_texts().map(Version.parse)


@st.composite
def near_versions(draw: st.DrawFn) -> Version:
    """A version with small components and a few common pre-releases, to land near bounds."""
    small = st.integers(min_value=0, max_value=4)
    pre = draw(st.sampled_from(["", "", "", "0", "rc.1", "alpha", "1"]))
    return Version.parse(f"{draw(small)}.{draw(small)}.{draw(small)}" + (f"-{pre}" if pre else ""))


# -- (1) caret and tilde are their expansions in the SPEC 2.3 table ------------------------------------


def _expand(op: str, parts: list[int], pre: str) -> tuple[str, str]:
    """The SPEC 2.3 reading of ``op`` + the (possibly partial) version, written independently of the
    library: the lower bound and the upper bound (a release)."""
    major, minor, patch = [*parts, 0, 0][:3]
    lower = f"{major}.{minor}.{patch}" + (f"-{pre}" if pre else "")
    if op == "^":
        if major > 0 or len(parts) == 1:
            upper = (major + 1, 0, 0)
        elif minor > 0 or len(parts) == 2:
            upper = (0, minor + 1, 0)
        else:
            upper = (0, 0, patch + 1)
    else:  # "~"
        upper = (major + 1, 0, 0) if len(parts) == 1 else (major, minor + 1, 0)
    return lower, ".".join(map(str, upper))


@st.composite
def caret_tilde(draw: st.DrawFn) -> tuple[str, str, str]:
    op = draw(st.sampled_from(["^", "~"]))
    parts = draw(st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=3))
    pre = draw(st.sampled_from(["", "", "0", "rc.1", "alpha"])) if len(parts) == 3 else ""
    text = op + ".".join(map(str, parts)) + (f"-{pre}" if pre else "")
    lower, upper = _expand(op, parts, pre)
    return text, lower, upper


@SETTINGS
@given(caret_tilde(), st.lists(near_versions(), min_size=1, max_size=20))
def test_caret_and_tilde_admit_what_their_expansion_admits(case: tuple[str, str, str], sample: list[Version]) -> None:
    text, lower, upper = case
    constraint = Constraint.parse(text)
    # By default, as the table writes it ...
    as_in_table = Constraint.parse(f">={lower}, <{upper}")
    # ... and with pre-releases allowed, with the `-0` upper bound that keeps out the next version's.
    with_zero = Constraint.parse(f">={lower}, <{upper}-0")
    for v in sample:
        assert constraint.contains(v) == as_in_table.contains(v), (text, str(v))
        assert constraint.contains(v, include_prereleases=True) == with_zero.contains(v, include_prereleases=True), (
            text,
            str(v),
        )
        lo, hi = Version.parse(lower), Version.parse(upper)
        in_range = lo <= v < hi
        named = v.prerelease and (v.major, v.minor, v.patch) == (lo.major, lo.minor, lo.patch) and lo.prerelease
        assert constraint.contains(v) == (in_range and (not v.prerelease or bool(named))), (text, str(v))


# -- (2) ordering is SemVer precedence, a total order consistent with == and hash ----------------------


def _semver_compare(a: Version, b: Version) -> int:
    return semver.Version.parse(str(a)).compare(str(b))


@SETTINGS
@given(versions, versions)
def test_ordering_agrees_with_semver_precedence(a: Version, b: Version) -> None:
    expected = _semver_compare(a, b)
    assert (a < b) == (expected < 0)
    assert (a > b) == (expected > 0)
    assert (a == b) == (expected == 0)
    assert (a <= b) == (expected <= 0)
    assert (a >= b) == (expected >= 0)
    assert (a != b) == (expected != 0)
    assert [a < b, a == b, a > b].count(True) == 1  # trichotomy
    if a == b:
        assert hash(a) == hash(b)


@SETTINGS
@given(st.lists(versions, min_size=2, max_size=12))
def test_sorting_is_a_total_order(items: list[Version]) -> None:
    ordered = sorted(items)
    for x, y in itertools.pairwise(ordered):
        assert x <= y
        assert _semver_compare(x, y) <= 0
    for x, y, z in itertools.combinations(ordered, 3):
        assert x <= y <= z and x <= z  # transitive


@SETTINGS
@given(version_texts(), build_ids)
def test_build_metadata_never_changes_identity(text: str, other_build: list[str]) -> None:
    v = Version.parse(text)
    core = text.partition("+")[0]
    w = Version.parse(core + ("+" + ".".join(other_build) if other_build else ""))
    assert v == w and hash(v) == hash(w) and not v < w and not w < v
    assert Version.parse(str(v)) == v and str(Version.parse(str(v))) == str(v)


# -- (3) the normal form re-parses to the same constraint -------------------------------------------


@st.composite
def version_bodies(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["partial", "wildcard", "full"]))
    small = st.integers(min_value=0, max_value=3)
    if kind == "partial":
        return ".".join(str(draw(small)) for _ in range(draw(st.integers(1, 2))))
    if kind == "wildcard":
        wild = draw(st.sampled_from(["*", "x", "X"]))
        head = [str(draw(small)) for _ in range(draw(st.integers(1, 2)))]
        return ".".join(head + [wild] * draw(st.integers(1, 3 - len(head))))
    text = f"{draw(small)}.{draw(small)}.{draw(small)}"
    pre = draw(st.sampled_from(["", "", "0", "rc.1", "alpha.beta", "1"]))
    build = draw(st.sampled_from(["", "", "b.7"]))
    return text + (f"-{pre}" if pre else "") + (f"+{build}" if build else "")


@st.composite
def terms(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 12)) == 0:
        return draw(st.sampled_from(["*", "x"]))
    op = draw(st.sampled_from(["", "=", ">", ">=", "<", "<=", "!=", "^", "~"]))
    space = draw(st.sampled_from(["", "", " "])) if op else ""
    return op + space + draw(version_bodies())


@st.composite
def constraint_texts(draw: st.DrawFn) -> str:
    groups = []
    for _ in range(draw(st.integers(1, 3))):
        parts = draw(st.lists(terms(), min_size=1, max_size=4))
        joiners = draw(st.lists(st.sampled_from([", ", " ", ",", " , ", "  "]), min_size=3, max_size=3))
        group = parts[0]
        for joiner, part in zip(joiners, parts[1:], strict=False):
            group += joiner + part
        groups.append(group)
    return draw(st.sampled_from([" || ", "||"])).join(groups)


@SETTINGS
@given(constraint_texts(), st.lists(near_versions(), min_size=5, max_size=30))
def test_the_normal_form_reparses_to_an_equal_constraint(text: str, sample: list[Version]) -> None:
    c = Constraint.parse(text, check_satisfiable=False)
    again = Constraint.parse(str(c), check_satisfiable=False)
    assert again == c and hash(again) == hash(c) and str(again) == str(c)
    assert again.exact == c.exact
    assert again.names_prerelease == c.names_prerelease
    assert again.is_satisfiable() == c.is_satisfiable()
    for v in sample:
        for allow in (False, True):
            assert again.contains(v, include_prereleases=allow) == c.contains(v, include_prereleases=allow)
        assert not c.contains(v) or c.contains(v, include_prereleases=True)


# -- (4) the satisfiability check is exact --------------------------------------------------------------
#
# Comparators use versions with components in 0..2 and pre-releases in {none, 0, a, 1}, full or
# partial. Every AND-group is then a set of intervals whose ends are such versions or the bounds their
# expansions produce (a component bumped to at most 3, with or without `-0`). A non-empty piece starts
# at a closed end (one of those versions), just after an open end (the successor of a full version:
# `X.Y.Z` -> `X.Y.(Z+1)-0`, `X.Y.Z-p` -> `X.Y.Z-p.0`), or at 0.0.0-0, the smallest version. The grid
# below holds all of these, so some grid version satisfies a group exactly when any version does.

GRID_PRERELEASES: list[tuple[int | str, ...]] = [(), (0,), (0, 0), ("a",), ("a", 0), (1,), (1, 0)]
GRID = [
    Version(major, minor, patch, pre)
    for major, minor, patch in itertools.product(range(4), repeat=3)
    for pre in GRID_PRERELEASES
]


@st.composite
def small_constraints(draw: st.DrawFn) -> str:
    """One or two AND-groups of comparators on a pool of at most four versions around one base version
    (itself, its neighbours, pre-releases, partial spellings), so that comparators often meet at the
    same version or at neighbouring ones."""
    major, minor, patch = (draw(st.integers(0, 1)) for _ in range(3))
    variant = st.sampled_from(
        [
            f"{major}.{minor}.{patch}",
            f"{major}.{minor}.{patch + 1}",
            f"{major}.{minor + 1}.0",
            f"{major + 1}.0.0",
            f"{major}.{minor}",
            f"{major}",
        ]
    )
    pre = st.sampled_from(["", "", "", "-0", "-a", "-1"])
    version = st.tuples(variant, pre).map(lambda t: t[0] + t[1] if t[0].count(".") == 2 else t[0])
    pool = draw(st.lists(version, min_size=1, max_size=4))
    comparator = st.tuples(st.sampled_from(["", "=", ">", ">=", "<", "<=", "!=", "^", "~"]), st.sampled_from(pool))
    groups = draw(st.lists(st.lists(comparator, min_size=1, max_size=5), min_size=1, max_size=2))
    return " || ".join(", ".join(op + v for op, v in group) for group in groups)


@SETTINGS
@given(small_constraints())
@example(">1.0.0, <1.0.1")  # only 1.0.1's pre-releases lie between
@example(">1.0.0, <=1.0.1-0")
@example(">=1.0.0, >1.0.0, <=1.0.0")
@example(">=1.0.0, <=1.0.1-0, !=1.0.0, !=1.0.1-0")
@example(">1.0.0-a, <1.0.0-a.0")
def test_satisfiability_is_exact_on_a_dense_grid(text: str) -> None:
    c = Constraint.parse(text, check_satisfiable=False)
    witnesses = [v for v in GRID if c.contains(v, include_prereleases=True)]
    assert c.is_satisfiable() == bool(witnesses), (text, str(c), [str(w) for w in witnesses[:3]])
    if witnesses:
        assert Constraint.parse(text) == c
    else:
        try:
            Constraint.parse(text)
        except ValueError as exc:
            assert "can never match" in str(exc)
        else:  # pragma: no cover - the assertion above already failed
            raise AssertionError(f"{text!r} was accepted")


def _names(term: str) -> tuple[int, int, int] | None:
    """The MAJOR.MINOR.PATCH whose pre-releases a single comparator lets match, read from its text."""
    op = term.rstrip("0123456789.-a")
    version = term[len(op) :]
    core, dash, pre = version.partition("-")
    if not dash or (op == "<" and pre == "0"):
        return None
    major, minor, patch = map(int, core.split("."))
    return (major, minor, patch)


@SETTINGS
@given(small_constraints())
def test_a_constraint_is_the_or_of_and_groups_of_its_comparators(text: str) -> None:
    c = Constraint.parse(text, check_satisfiable=False)
    groups = [[t.strip() for t in group.split(",")] for group in text.split("||")]
    singles = [[Constraint.parse(t, check_satisfiable=False) for t in group] for group in groups]
    for v in GRID:
        in_groups = [all(one.contains(v, include_prereleases=True) for one in group) for group in singles]
        assert c.contains(v, include_prereleases=True) == any(in_groups), (text, str(v))
        triple = (v.major, v.minor, v.patch)
        allowed = [not v.prerelease or any(_names(t) == triple for t in group) for group in groups]
        expected = any(a and b for a, b in zip(in_groups, allowed, strict=True))
        assert c.contains(v) == expected, (text, str(v))


# -- (5) a single comparator compares exactly as SemVer precedence says ------------------------------

OPERATORS: dict[str, Callable[[int, int], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}


@SETTINGS
@given(st.sampled_from(sorted(OPERATORS)), versions, versions)
def test_a_full_version_comparator_follows_precedence(op: str, bound: Version, v: Version) -> None:
    c = Constraint.parse(f"{op}{bound}", check_satisfiable=False)
    expected = OPERATORS[op](_semver_compare(v, bound), 0)
    assert c.contains(v, include_prereleases=True) == expected
    same_release = (v.major, v.minor, v.patch) == (bound.major, bound.minor, bound.patch)
    named = bool(bound.prerelease) and same_release and not (op == "<" and bound.prerelease == (0,))
    assert c.contains(v) == (expected and (not v.prerelease or named))
