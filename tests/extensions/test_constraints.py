"""`extensions.versions.Constraint` and `parse_requirement`: the grammar of SPEC 2.3."""

from __future__ import annotations

import pickle

import pytest

from extensions.errors import ConstraintError, InvalidNameError, VersionError
from extensions.versions import (
    Constraint,
    Requirement,
    Version,
    parse_constraint,
    parse_requirement,
)

GRAMMAR_HINT = "use forms like ^1.2, ~1.2.3, >=1.2, <2, 1.*, =1.2.3, joined by ',' (and) or '||' (or)"


def admitted(constraint: str, versions: list[str], *, include_prereleases: bool = False) -> list[str]:
    c = Constraint.parse(constraint)
    return [v for v in versions if c.contains(v, include_prereleases=include_prereleases)]


# -- The SPEC 2.3 table, row by row: the normalised (expanded) form and the versions admitted. -------


@pytest.mark.parametrize(
    ("text", "normalised"),
    [
        # `*` or empty
        ("*", "*"),
        ("", "*"),
        ("   ", "*"),
        ("x", "*"),
        ("X", "*"),
        ("*.*", "*"),
        ("*.*.*", "*"),
        # exact, and partial exact meaning a wildcard
        ("1.2.3", "=1.2.3"),
        ("=1.2.3", "=1.2.3"),
        ("=1.2.3+build.5", "=1.2.3"),
        ("=1.2.3-rc.1", "=1.2.3-rc.1"),
        ("1.2", ">=1.2.0, <1.3.0-0"),
        ("=1.2", ">=1.2.0, <1.3.0-0"),
        ("1", ">=1.0.0, <2.0.0-0"),
        ("=0", ">=0.0.0, <1.0.0-0"),
        # comparators, with partial versions read as cargo and npm do
        (">1.2", ">=1.3.0"),
        (">1", ">=2.0.0"),
        (">1.2.3", ">1.2.3"),
        (">=1.2.3", ">=1.2.3"),
        (">=1.2", ">=1.2.0"),
        (">=1", ">=1.0.0"),
        ("<2", "<2.0.0-0"),
        ("<1.2", "<1.2.0-0"),
        ("<2.0.0", "<2.0.0"),
        ("<=2.0.0", "<=2.0.0"),
        ("<=1.2", "<1.3.0-0"),
        ("<=1", "<2.0.0-0"),
        ("!=1.4.0", "!=1.4.0"),
        ("!=1.2", "!=1.2.*"),
        ("!=1", "!=1.*"),
        ("!=1.2.*", "!=1.2.*"),
        (">=1.0.0-rc.1", ">=1.0.0-rc.1"),
        (">=1.0.0-rc.1+build", ">=1.0.0-rc.1"),
        # caret
        ("^1.2.3", ">=1.2.3, <2.0.0-0"),
        ("^1.2", ">=1.2.0, <2.0.0-0"),
        ("^1", ">=1.0.0, <2.0.0-0"),
        ("^0.2.3", ">=0.2.3, <0.3.0-0"),
        ("^0.2", ">=0.2.0, <0.3.0-0"),
        ("^0.0.3", ">=0.0.3, <0.0.4-0"),
        ("^0.0", ">=0.0.0, <0.1.0-0"),
        ("^0", ">=0.0.0, <1.0.0-0"),
        ("^0.0.0", ">=0.0.0, <0.0.1-0"),
        ("^1.2.3-beta.1", ">=1.2.3-beta.1, <2.0.0-0"),
        ("^1.x", ">=1.0.0, <2.0.0-0"),
        # tilde
        ("~1.2.3", ">=1.2.3, <1.3.0-0"),
        ("~1.2", ">=1.2.0, <1.3.0-0"),
        ("~1", ">=1.0.0, <2.0.0-0"),
        ("~0.0.3", ">=0.0.3, <0.1.0-0"),
        ("~1.2.3-rc.2", ">=1.2.3-rc.2, <1.3.0-0"),
        # wildcards
        ("1.*", ">=1.0.0, <2.0.0-0"),
        ("1.x", ">=1.0.0, <2.0.0-0"),
        ("1.X", ">=1.0.0, <2.0.0-0"),
        ("1.*.*", ">=1.0.0, <2.0.0-0"),
        ("1.2.*", ">=1.2.0, <1.3.0-0"),
        ("1.2.x", ">=1.2.0, <1.3.0-0"),
        ("1.2.X", ">=1.2.0, <1.3.0-0"),
        (">=1.2.x", ">=1.2.0"),
        # and, or
        (">=1.2, <2", ">=1.2.0, <2.0.0-0"),
        (">=1.2 <2", ">=1.2.0, <2.0.0-0"),
        (">= 1.2, < 2", ">=1.2.0, <2.0.0-0"),
        (">=1.2 , <2", ">=1.2.0, <2.0.0-0"),
        ("  >=1.2,<2  ", ">=1.2.0, <2.0.0-0"),
        ("<2, >=1.2", ">=1.2.0, <2.0.0-0"),
        (">=1.2\t<2", ">=1.2.0, <2.0.0-0"),
        (">=1.2, >=1.2.0, <2", ">=1.2.0, <2.0.0-0"),
        ("^1.2 || ^2.0", ">=1.2.0, <2.0.0-0 || >=2.0.0, <3.0.0-0"),
        ("^2.0||^1.2", ">=1.2.0, <2.0.0-0 || >=2.0.0, <3.0.0-0"),
        ("^1 || ^1", ">=1.0.0, <2.0.0-0"),
        ("* || >=1.0.0-rc.1", "* || >=1.0.0-rc.1"),
        (">=1.0.0, * <2.0.0", ">=1.0.0, <2.0.0"),
    ],
)
def test_it_expands_each_form_to_comparators(text: str, normalised: str) -> None:
    assert str(Constraint.parse(text)) == normalised


VERSIONS = [
    "0.0.0",
    "0.0.3",
    "0.0.4",
    "0.1.0",
    "0.2.2",
    "0.2.3",
    "0.2.9",
    "0.3.0",
    "0.9.0",
    "1.0.0",
    "1.1.9",
    "1.2.0",
    "1.2.2",
    "1.2.3",
    "1.2.4",
    "1.2.99",
    "1.3.0",
    "1.4.0",
    "1.9.9",
    "2.0.0",
    "2.0.1",
    "2.5.0",
    "3.0.0",
]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("*", VERSIONS),
        ("1.2.3", ["1.2.3"]),
        ("=1.2.3", ["1.2.3"]),
        ("1.2", ["1.2.0", "1.2.2", "1.2.3", "1.2.4", "1.2.99"]),
        ("=1.2", ["1.2.0", "1.2.2", "1.2.3", "1.2.4", "1.2.99"]),
        (">1.2", ["1.3.0", "1.4.0", "1.9.9", "2.0.0", "2.0.1", "2.5.0", "3.0.0"]),
        (">1.2.3", ["1.2.4", "1.2.99", "1.3.0", "1.4.0", "1.9.9", "2.0.0", "2.0.1", "2.5.0", "3.0.0"]),
        (
            ">=1.2.3",
            ["1.2.3", "1.2.4", "1.2.99", "1.3.0", "1.4.0", "1.9.9", "2.0.0", "2.0.1", "2.5.0", "3.0.0"],
        ),
        (">=1.2", ["1.2.0", *VERSIONS[VERSIONS.index("1.2.2") :]]),
        ("<2", VERSIONS[: VERSIONS.index("2.0.0")]),
        ("<1.2", VERSIONS[: VERSIONS.index("1.2.0")]),
        ("<=1.2", VERSIONS[: VERSIONS.index("1.3.0")]),
        ("<=2.0.0", VERSIONS[: VERSIONS.index("2.0.1")]),
        ("!=1.4.0", [v for v in VERSIONS if v != "1.4.0"]),
        ("!=1.2", [v for v in VERSIONS if not v.startswith("1.2.")]),
        ("^1.2.3", ["1.2.3", "1.2.4", "1.2.99", "1.3.0", "1.4.0", "1.9.9"]),
        ("^0.2.3", ["0.2.3", "0.2.9"]),
        ("^0.0.3", ["0.0.3"]),
        ("^1.2", ["1.2.0", "1.2.2", "1.2.3", "1.2.4", "1.2.99", "1.3.0", "1.4.0", "1.9.9"]),
        ("^0.2", ["0.2.2", "0.2.3", "0.2.9"]),
        ("^0.0", ["0.0.0", "0.0.3", "0.0.4"]),
        ("^0", ["0.0.0", "0.0.3", "0.0.4", "0.1.0", "0.2.2", "0.2.3", "0.2.9", "0.3.0", "0.9.0"]),
        ("~1.2.3", ["1.2.3", "1.2.4", "1.2.99"]),
        ("~1.2", ["1.2.0", "1.2.2", "1.2.3", "1.2.4", "1.2.99"]),
        ("~1", ["1.0.0", "1.1.9", "1.2.0", "1.2.2", "1.2.3", "1.2.4", "1.2.99", "1.3.0", "1.4.0", "1.9.9"]),
        ("1.*", ["1.0.0", "1.1.9", "1.2.0", "1.2.2", "1.2.3", "1.2.4", "1.2.99", "1.3.0", "1.4.0", "1.9.9"]),
        ("1.2.*", ["1.2.0", "1.2.2", "1.2.3", "1.2.4", "1.2.99"]),
        ("1.x", ["1.0.0", "1.1.9", "1.2.0", "1.2.2", "1.2.3", "1.2.4", "1.2.99", "1.3.0", "1.4.0", "1.9.9"]),
        (">=1.2, <2", ["1.2.0", "1.2.2", "1.2.3", "1.2.4", "1.2.99", "1.3.0", "1.4.0", "1.9.9"]),
        (">=1.2 <2", ["1.2.0", "1.2.2", "1.2.3", "1.2.4", "1.2.99", "1.3.0", "1.4.0", "1.9.9"]),
        (">=1.2.3, <1.4, !=1.2.4", ["1.2.3", "1.2.99", "1.3.0"]),
        ("^0.2 || ^2", ["0.2.2", "0.2.3", "0.2.9", "2.0.0", "2.0.1", "2.5.0"]),
        ("=0.0.3 || =1.4.0 || >=3", ["0.0.3", "1.4.0", "3.0.0"]),
    ],
)
def test_it_admits_exactly_the_versions_of_each_form(text: str, expected: list[str]) -> None:
    assert admitted(text, VERSIONS) == expected


def test_a_partial_upper_bound_excludes_the_next_versions_pre_releases_even_when_allowed() -> None:
    for text in ("^1.2", "~1", "1.*", "<2", "<=1", "1"):
        c = Constraint.parse(text)
        assert not c.contains("2.0.0-rc.1", include_prereleases=True), text
        assert not c.contains("2.0.0-0", include_prereleases=True), text
        assert c.contains("1.9.9", include_prereleases=True), text
    assert not Constraint.parse("~1.2").contains("1.3.0-alpha", include_prereleases=True)
    assert not Constraint.parse("<=1.2").contains("1.3.0-alpha", include_prereleases=True)


def test_a_full_upper_bound_admits_that_versions_pre_releases_only_when_allowed() -> None:
    c = Constraint.parse("<2.0.0")
    assert not c.contains("2.0.0-rc.1")
    assert c.contains("2.0.0-rc.1", include_prereleases=True)


def test_the_comparators_compare_as_written() -> None:
    assert admitted(">1.2.3", ["1.2.3", "1.2.4"]) == ["1.2.4"]
    assert admitted(">=1.2.3", ["1.2.2", "1.2.3"]) == ["1.2.3"]
    assert admitted("<1.2.3", ["1.2.2", "1.2.3"]) == ["1.2.2"]
    assert admitted("<=1.2.3", ["1.2.3", "1.2.4"]) == ["1.2.3"]
    assert admitted("=1.2.3", ["1.2.2", "1.2.3", "1.2.4"]) == ["1.2.3"]
    assert admitted("!=1.2.3", ["1.2.2", "1.2.3", "1.2.4"]) == ["1.2.2", "1.2.4"]


# -- Pre-releases --------------------------------------------------------------------------------------


def test_it_admits_no_pre_release_unless_one_is_named() -> None:
    for text in ("*", ">=1.0.0", "^1.2", "~1.2.3", "1.*", "<2", ">=1.2.3, <1.2.4"):
        assert not Constraint.parse(text).contains("1.2.4-rc.1"), text
        assert not Constraint.parse(text).contains("1.2.3-rc.1"), text


def test_it_admits_pre_releases_of_the_named_major_minor_patch_only() -> None:
    c = Constraint.parse(">=1.2.3-beta.1")
    assert c.contains("1.2.3-beta.2")
    assert c.contains("1.2.3-rc.1")
    assert c.contains("1.2.3")
    assert c.contains("1.2.4")
    assert not c.contains("1.2.3-alpha")  # named, but below the bound
    assert not c.contains("1.2.4-beta.1")  # not the named major.minor.patch
    assert not c.contains("2.0.0-rc.1")


def test_it_admits_every_pre_release_in_range_when_the_caller_allows_them() -> None:
    c = Constraint.parse(">=1.2.3-beta.1")
    assert c.contains("1.2.4-beta.1", include_prereleases=True)
    assert c.contains("2.0.0-rc.1", include_prereleases=True)
    assert not c.contains("1.2.3-alpha", include_prereleases=True)
    assert Constraint.parse("^1.2").contains("1.5.0-rc.1", include_prereleases=True)
    assert not Constraint.parse("^1.2").contains("1.2.0-rc.1", include_prereleases=True)
    assert Constraint.ANY.contains("3.0.0-alpha", include_prereleases=True)


def test_the_pre_release_rule_applies_per_alternative() -> None:
    c = Constraint.parse(">=1.0.0-rc.1, <1.1 || ^2")
    assert c.contains("1.0.0-rc.2")
    assert not c.contains("2.1.0-rc.1")
    c = Constraint.parse("^1 || =2.0.0-rc.1")
    assert c.contains("2.0.0-rc.1")
    assert not c.contains("1.5.0-rc.1")
    assert not c.contains("2.0.0-rc.2")


def test_caret_and_tilde_of_a_pre_release_admit_its_siblings() -> None:
    assert admitted("^1.2.3-beta.1", ["1.2.3-beta.0", "1.2.3-beta.2", "1.3.0-beta.1", "1.9.0"]) == [
        "1.2.3-beta.2",
        "1.9.0",
    ]
    assert admitted("~1.2.3-rc.1", ["1.2.3-rc.2", "1.2.3", "1.2.4-rc.1", "1.3.0"]) == ["1.2.3-rc.2", "1.2.3"]


def test_an_exact_pre_release_admits_just_itself() -> None:
    assert admitted("=1.0.0-rc.1", ["1.0.0-rc.1", "1.0.0-rc.1+b", "1.0.0-rc.2", "1.0.0"]) == [
        "1.0.0-rc.1",
        "1.0.0-rc.1+b",
    ]


def test_it_reports_whether_a_pre_release_is_named() -> None:
    assert Constraint.parse(">=1.0.0-rc.1").names_prerelease is True
    assert Constraint.parse("^1 || =2.0.0-beta").names_prerelease is True
    assert Constraint.parse("^1.2").names_prerelease is False
    assert Constraint.parse(">=1.2.0, <2.0.0-0").names_prerelease is False  # an expansion's own bound
    assert Constraint.parse("<=2.0.0-0").names_prerelease is True
    assert Constraint.ANY.names_prerelease is False


# -- Build metadata, equality, normal form ------------------------------------------------------------


def test_it_ignores_build_metadata_when_matching() -> None:
    assert Constraint.parse("=1.0.0+a").contains("1.0.0+b")
    assert Constraint.parse("=1.0.0+a") == Constraint.parse("=1.0.0+b") == Constraint.parse("1.0.0")
    assert Constraint.parse(">1.0.0+a").contains("1.0.1")
    assert not Constraint.parse(">1.0.0+a").contains("1.0.0+z")


def test_equivalent_spellings_are_equal_and_hash_alike() -> None:
    spellings = [">=1.2,<2", ">=1.2 , <2", ">=1.2 <2", ">= 1.2, < 2", "<2 >=1.2", "^1.2", ">=1.2.0, <2.0.0-0"]
    constraints = [Constraint.parse(s) for s in spellings]
    assert len(set(constraints)) == 1
    assert all(c == constraints[0] for c in constraints)
    assert str(constraints[0]) == ">=1.2.0, <2.0.0-0"
    assert repr(constraints[0]) == "Constraint('>=1.2.0, <2.0.0-0')"
    assert Constraint.parse("^1.2") != Constraint.parse("^1.3")
    assert Constraint.parse("<2") != Constraint.parse("<2.0.0")
    assert Constraint.parse("^1.2") != ">=1.2.0, <2.0.0-0"


def test_the_normal_form_parses_back_to_the_same_constraint() -> None:
    for text in ["^1.2 || ~0.3.1", "!=1.2, >=1", "=1.0.0-rc.1", "*", ">1.2.3, <=2.0.0", "1.x || 3"]:
        c = Constraint.parse(text)
        assert Constraint.parse(str(c)) == c
        assert str(Constraint.parse(str(c))) == str(c)


def test_any_is_the_star() -> None:
    assert str(Constraint.ANY) == "*"
    assert Constraint.ANY == Constraint.parse("") == Constraint.parse("*")
    assert Constraint.ANY.is_any
    assert not Constraint.parse(">=0.0.0").is_any
    assert Constraint.ANY.contains("0.0.0") and Constraint.ANY.contains("999.0.0")


def test_it_is_immutable_and_picklable() -> None:
    c = Constraint.parse("^1.2 || =3.0.0-rc.1")
    with pytest.raises(AttributeError):
        c._text = "*"  # type: ignore[misc]
    clone = pickle.loads(pickle.dumps(c))  # noqa: S301 - our own bytes
    assert clone == c and clone.contains("3.0.0-rc.1")


def test_it_caches_parsing() -> None:
    assert Constraint.parse(">=7.7.7, <8.8.8") is Constraint.parse(">=7.7.7, <8.8.8")


# -- exact, contains, filter -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "exact"),
    [
        ("=1.2.3", "1.2.3"),
        ("1.2.3", "1.2.3"),
        ("=1.2.3+b", "1.2.3"),
        ("=1.0.0-rc.1", "1.0.0-rc.1"),
        ("=1.2.3, >=1.0", "1.2.3"),
        ("=1.2", None),
        ("1.2", None),
        ("^1.2.3", None),
        (">=1.2.3, <=1.2.3", None),
        ("=1.2.3 || =1.2.4", None),
        ("*", None),
    ],
)
def test_it_reports_an_exact_pin(text: str, exact: str | None) -> None:
    found = Constraint.parse(text).exact
    assert (str(found) if found else None) == exact


def test_contains_accepts_a_version_or_a_string() -> None:
    c = Constraint.parse("^1.2")
    assert c.contains(Version.parse("1.3.0")) and c.contains("1.3.0")
    assert "1.3.0" in c and Version(1, 3, 0) in c and "2.0.0" not in c
    assert 1.3 not in c
    with pytest.raises(VersionError, match=r"'1\.3' is not a valid version"):
        c.contains("1.3")


def test_filter_returns_the_admitted_versions_sorted() -> None:
    c = Constraint.parse(">=1.2, <2")
    got = c.filter(["1.10.0", "2.0.0", Version.parse("1.2.0"), "1.9.0", "1.5.0-rc.1", "0.9.0"])
    assert got == [Version.parse("1.2.0"), Version.parse("1.9.0"), Version.parse("1.10.0")]
    with_pre = c.filter(["1.5.0-rc.1", "1.3.0"], include_prereleases=True)
    assert [str(v) for v in with_pre] == ["1.3.0", "1.5.0-rc.1"]
    assert c.filter([]) == []


# -- Unsatisfiable constraints ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (">2, <1", "no version is both >=3.0.0 and <1.0.0-0"),
        (">=1.5, <1.5", "no version is both >=1.5.0 and <1.5.0-0"),
        (">=1.5.0, <1.5.0", "no version is both >=1.5.0 and <1.5.0"),
        (">1.5.0, <=1.5.0", "no version is both >1.5.0 and <=1.5.0"),
        ("=1.0.0, !=1.0.0", "every version allowed by =1.0.0 is excluded by !=1.0.0"),
        ("^1.2, ^2", "no version is both >=2.0.0 and <2.0.0-0"),
        ("=1.0.0, =1.0.1", "no version is both =1.0.1 and =1.0.0"),
        ("1.2, !=1.2", "excluded by !=1.2.*"),
        (">1.0.0, <1.0.1-0", "no version is both >1.0.0 and <1.0.1-0"),
        (">=1.0.0, <=1.0.0, !=1.0.0", "every version allowed by >=1.0.0, <=1.0.0 is excluded by !=1.0.0"),
        ("<0.0.0-0", "no version is <0.0.0-0 (0.0.0-0 is the smallest version there is)"),
    ],
)
def test_it_refuses_a_constraint_that_can_never_match(text: str, reason: str) -> None:
    with pytest.raises(ConstraintError) as info:
        Constraint.parse(text)
    message = str(info.value)
    assert message.startswith(f"{text!r} can never match: ")
    assert reason in message
    c = Constraint.parse(text, check_satisfiable=False)
    assert c.is_satisfiable() is False
    assert not c.contains("1.0.0", include_prereleases=True)


def test_an_or_constraint_is_satisfiable_if_any_alternative_is() -> None:
    c = Constraint.parse(">2, <1 || ^1")
    assert c.is_satisfiable()
    assert c.contains("1.5.0")
    with pytest.raises(ConstraintError, match="none of its alternatives can"):
        Constraint.parse(">2, <1 || ^1, ^3")


@pytest.mark.parametrize(
    "text",
    [
        ">1.0.0, <1.0.1",  # only 1.0.1's pre-releases: a match when pre-releases are allowed
        ">=1.0.0, <=1.0.1, !=1.0.0, !=1.0.1",
        ">1.0.0, <=1.0.1-0",
        "=1.0.0, !=1.0.0+b, !=1.0.1 || =1.0.0",
        "!=1.0.0, !=1.0.1",
        "<0.0.0-0.0",  # 0.0.0-0 is the smallest version there is
        ">=1.2, <2, !=1.2, !=1.3, !=1.4",
    ],
)
def test_it_accepts_a_constraint_that_some_version_matches(text: str) -> None:
    assert Constraint.parse(text).is_satisfiable()


def test_parse_constraint_checks_satisfiability() -> None:
    assert parse_constraint("^1") == Constraint.parse("^1")
    with pytest.raises(ConstraintError, match="can never match"):
        parse_constraint(">2, <1")


# -- Invalid constraints ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (">>1", "'>>' is not an operator"),
        ("^", "the operator '^' needs a version after it"),
        (">=", "the operator '>=' needs a version after it"),
        ("1.2.3.4", "'1.2.3.4' is not a version"),
        (">=1.2.3.4", "'1.2.3.4' is not a version"),
        ("~>1", "'~>' is not an operator (use '~' or '^')"),
        ("==1.2.3", "'==' is not an operator (use '=')"),
        ("=>1.2", "'=>' is not an operator (use '>=')"),
        ("!1.2", "'!' is not an operator"),
        (">=a", "'a' is not a version"),
        ("latest", "'latest' is not a version"),
        (">=v1.2", "drop the 'v' prefix"),
        (">=01.2", "'01' has a leading zero"),
        ("^1.2-rc.1", "a pre-release or build needs all of MAJOR.MINOR.PATCH"),
        ("1.*.3", "nothing but wildcards may follow a wildcard"),
        (">=*", "a wildcard major version takes no operator"),
        ("^x", "a wildcard major version takes no operator"),
        ("1.2.3 - 2.0.0", "hyphen ranges are not supported"),
        (">=1.2,", "a comparator around ',' is empty"),
        (">=1.2,, <2", "a comparator around ',' is empty"),
        ("^1 ||", "an alternative around '||' is empty"),
        ("|| ^1", "an alternative around '||' is empty"),
        ("^1 | ^2", "'|' is not a version"),
        (">=1.2 && <2", "'&&' is not a version"),
        ("≥1.2", "'≥' is not allowed (only ASCII)"),
        ("1.0.0-", "'1.0.0-' is not a version (the pre-release after '-' is empty)"),
    ],
)
def test_it_refuses_an_invalid_constraint_naming_the_bad_part(text: str, fragment: str) -> None:
    with pytest.raises(ConstraintError) as info:
        Constraint.parse(text)
    message = str(info.value)
    assert message.startswith(f"{text!r} is not a valid constraint: ")
    assert fragment in message
    assert message.endswith(GRAMMAR_HINT)
    assert info.value.code == "invalid_manifest"


def test_it_words_an_invalid_constraint_as_documented() -> None:
    with pytest.raises(ConstraintError) as info:
        Constraint.parse(">=1.2.3.4")
    assert str(info.value) == (
        "'>=1.2.3.4' is not a valid constraint: '1.2.3.4' is not a version (a version has at most three "
        f"numbers, MAJOR.MINOR.PATCH); {GRAMMAR_HINT}"
    )


def test_it_points_at_the_bad_term_of_a_longer_constraint() -> None:
    with pytest.raises(ConstraintError, match=r"^'>=1.2, <2.x.1' is not a valid constraint: in '<2.x.1', "):
        Constraint.parse(">=1.2, <2.x.1")


def test_it_refuses_an_overlong_or_non_string_constraint() -> None:
    with pytest.raises(ConstraintError, match="longer than 16384 characters"):
        Constraint.parse(", ".join([">=1.0.0"] * 2400))
    with pytest.raises(ConstraintError, match="a constraint is a string"):
        Constraint.parse(2)  # type: ignore[arg-type]


def test_the_normal_form_of_a_manifest_sized_constraint_parses_again() -> None:
    wide = " || ".join(f"^{i}" for i in range(1, 300))[:1024].rsplit(" || ", 1)[0]
    assert len(wide) <= 1024
    normal = str(Constraint.parse(wide))
    assert len(normal) > 3 * len(wide)  # the normal form is much longer than what was written
    assert Constraint.parse(normal) == Constraint.parse(wide)


# -- Requirements -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name", "constraint", "printed"),
    [
        ("etcd", "etcd", "*", "etcd"),
        ("  etcd  ", "etcd", "*", "etcd"),
        ("etcd *", "etcd", "*", "etcd"),
        ("etcd >=3.5, <4", "etcd", ">=3.5.0, <4.0.0-0", "etcd >=3.5.0, <4.0.0-0"),
        ("etcd>=3.5", "etcd", ">=3.5.0", "etcd >=3.5.0"),
        ("containerd ^1.7", "containerd", ">=1.7.0, <2.0.0-0", "containerd >=1.7.0, <2.0.0-0"),
        ("kubernetes=1.28.0", "kubernetes", "=1.28.0", "kubernetes =1.28.0"),
        ("kubernetes 1.28.0", "kubernetes", "=1.28.0", "kubernetes =1.28.0"),
        ("cert-manager ~1.2 || ^2", "cert-manager", ">=1.2.0, <1.3.0-0 || >=2.0.0, <3.0.0-0", None),
        ("k8s^1", "k8s", ">=1.0.0, <2.0.0-0", "k8s >=1.0.0, <2.0.0-0"),
    ],
)
def test_it_parses_a_requirement(text: str, name: str, constraint: str, printed: str | None) -> None:
    req = parse_requirement(text)
    assert req == Requirement(name, Constraint.parse(constraint))
    assert str(req.constraint) == constraint
    assert str(req) == (printed or f"{name} {constraint}")
    assert parse_requirement(str(req)) == req


@pytest.mark.parametrize(
    ("text", "bad", "suggestion"),
    [
        ("cert_manager ^1", "cert_manager", "cert-manager"),
        ("Etcd >=3", "Etcd", "etcd"),
        ("e", "e", None),
        ("1etcd", "1etcd", "etcd"),
        ("etcd--x", "etcd--x", "etcd-x"),
        ("etcd- ^1", "etcd-", "etcd"),
        ("a" * 65, "a" * 65, None),
    ],
)
def test_it_refuses_a_requirement_with_a_bad_name(text: str, bad: str, suggestion: str | None) -> None:
    with pytest.raises(InvalidNameError) as info:
        parse_requirement(text)
    assert str(info.value).startswith(f"{bad!r} in requirement {text!r} is not a valid extension name")
    assert "2 to 64 lower-case letters, digits and single '-'" in str(info.value)
    assert info.value.suggestion == suggestion


def test_it_refuses_an_empty_requirement_or_one_without_a_name() -> None:
    with pytest.raises(InvalidNameError, match="write NAME or NAME CONSTRAINT"):
        parse_requirement("   ")
    with pytest.raises(InvalidNameError, match="must start with an extension name"):
        parse_requirement(">=1.2")


def test_it_refuses_a_requirement_with_a_bad_or_unsatisfiable_constraint() -> None:
    with pytest.raises(ConstraintError, match=r"'>>1' is not a valid constraint"):
        parse_requirement("etcd >>1")
    with pytest.raises(ConstraintError, match=r"can never match"):
        parse_requirement("etcd >2, <1")
