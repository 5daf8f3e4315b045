"""`extensions.versions.SemVer`: strict SemVer 2.0.0 parsing, precedence, equality (SPEC 2.2)."""

from __future__ import annotations

import copy
import itertools
import pickle

import pytest

from extensions.errors import VersionError
from extensions.versions import Constraint, SemVer, Version, parse_version, runs_on

# The precedence example of SemVer 2.0.0 section 11, in ascending order.
SEMVER_SPEC_ORDER = [
    "1.0.0-alpha",
    "1.0.0-alpha.1",
    "1.0.0-alpha.beta",
    "1.0.0-beta",
    "1.0.0-beta.2",
    "1.0.0-beta.11",
    "1.0.0-rc.1",
    "1.0.0",
]


@pytest.mark.parametrize(
    ("text", "major", "minor", "patch", "prerelease", "build"),
    [
        ("0.0.0", 0, 0, 0, (), ()),
        ("1.2.3", 1, 2, 3, (), ()),
        ("10.20.30", 10, 20, 30, (), ()),
        ("1.0.0-alpha", 1, 0, 0, ("alpha",), ()),
        ("1.0.0-alpha.1", 1, 0, 0, ("alpha", 1), ()),
        ("1.0.0-0.3.7", 1, 0, 0, (0, 3, 7), ()),
        ("1.0.0-x.7.z.92", 1, 0, 0, ("x", 7, "z", 92), ()),
        ("1.0.0-x-y-z.--", 1, 0, 0, ("x-y-z", "--"), ()),
        ("1.0.0-0a", 1, 0, 0, ("0a",), ()),
        ("1.0.0-alpha+001", 1, 0, 0, ("alpha",), ("001",)),
        ("1.0.0+20130313144700", 1, 0, 0, (), ("20130313144700",)),
        ("1.0.0-beta+exp.sha.5114f85", 1, 0, 0, ("beta",), ("exp", "sha", "5114f85")),
        ("1.0.0+21AF26D3----117B344092BD", 1, 0, 0, (), ("21AF26D3----117B344092BD",)),
        ("99999999999999999999.0.0", 99999999999999999999, 0, 0, (), ()),
    ],
)
def test_it_parses_strict_semver(
    text: str, major: int, minor: int, patch: int, prerelease: tuple[int | str, ...], build: tuple[str, ...]
) -> None:
    v = Version.parse(text)
    assert (v.major, v.minor, v.patch, v.prerelease, v.build) == (major, minor, patch, prerelease, build)
    assert str(v) == text
    assert v.is_prerelease is bool(prerelease)
    assert parse_version(text) == v


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("1.2", "e.g. 1.2.0"),
        ("1", "e.g. 1.0.0"),
        ("1.0", "e.g. 1.0.0"),
        ("1.2.3.4", "use MAJOR.MINOR.PATCH"),
        ("01.2.3", "'01' has a leading zero"),
        ("1.02.3", "'02' has a leading zero"),
        ("1.2.03", "'03' has a leading zero"),
        ("1.0.0-01", "'01' has a leading zero"),
        ("v1.0.0", "drop the 'v' prefix"),
        ("V1.0.0", "drop the 'V' prefix"),
        ("1.0.0-", "the pre-release after '-' is empty"),
        ("1.0.0+", "the build metadata after '+' is empty"),
        ("1.0.0-alpha..1", "empty identifier"),
        ("1.0.0-alpha.", "empty identifier"),
        ("1.0.0+a..b", "empty identifier"),
        ("1.0.0-al_pha", "'al_pha' may only use [0-9A-Za-z-]"),
        ("1.0.0+a+b", "'a+b' may only use [0-9A-Za-z-]"),
        ("1.0.0-béta", "non-ASCII"),
        ("\u0661.\u0662.\u0663", "non-ASCII"),  # Arabic-Indic digits: digits to str.isdigit, not to SemVer
        ("", "it is empty"),
        (" 1.0.0", "whitespace"),
        ("1.0.0\n", "whitespace"),
        ("1.a.0", "'a' is not a number"),
        ("-1.0.0", "'' is not a number"),
        ("latest", "'latest' is not a number"),
        ("1" * 300 + ".0.0", "longer than 256 characters"),
    ],
)
def test_it_refuses_a_version_that_is_not_strict_semver(text: str, fragment: str) -> None:
    with pytest.raises(VersionError) as info:
        Version.parse(text)
    message = str(info.value)
    assert message.startswith(f"{text!r} is not a valid version: ") or "longer than" in message
    assert fragment in message
    assert "MAJOR.MINOR.PATCH as in SemVer 2.0.0" in message
    assert info.value.code == "invalid_manifest"


def test_it_names_the_expected_spelling_in_the_error() -> None:
    with pytest.raises(VersionError) as info:
        Version.parse("1.2")
    assert str(info.value) == "'1.2' is not a valid version: use MAJOR.MINOR.PATCH as in SemVer 2.0.0, e.g. 1.2.0"


def test_it_suggests_the_version_without_leading_zeros_or_prefix() -> None:
    with pytest.raises(VersionError, match=r"e\.g\. 1\.2\.3$"):
        Version.parse("01.002.3")
    with pytest.raises(VersionError, match=r"e\.g\. 2\.0\.1$"):
        Version.parse("v2.0.1")


def test_it_refuses_a_non_string() -> None:
    with pytest.raises(VersionError, match="a version is a string"):
        Version.parse(1.2)  # type: ignore[arg-type]


def test_it_orders_the_semver_spec_example() -> None:
    versions = [Version.parse(t) for t in SEMVER_SPEC_ORDER]
    for lower, higher in itertools.pairwise(versions):
        assert lower < higher
        assert higher > lower
        assert lower <= higher and not higher <= lower
        assert lower != higher
    assert sorted(versions[i] for i in (3, 0, 7, 5, 1, 6, 2, 4)) == versions


@pytest.mark.parametrize(
    ("lower", "higher"),
    [
        ("1.0.0", "2.0.0"),
        ("2.0.0", "2.1.0"),
        ("2.1.0", "2.1.1"),
        ("1.9.0", "1.10.0"),
        ("1.0.0-rc.9", "1.0.0-rc.10"),  # numeric identifiers compare numerically
        ("1.0.0-2", "1.0.0-10"),
        ("1.0.0-999", "1.0.0-a"),  # numeric sorts before alphanumeric
        ("1.0.0-1a", "1.0.0-1b"),
        ("1.0.0-B", "1.0.0-a"),  # ASCII order: upper case first
        ("1.0.0-rc", "1.0.0-rc.0"),  # a longer set wins when the rest are equal
        ("1.0.0-rc.1", "1.0.0"),  # a release sorts after its pre-releases
        ("1.0.0", "1.0.1-0"),
        ("0.9.99", "1.0.0-0"),
    ],
)
def test_it_orders_by_semver_precedence(lower: str, higher: str) -> None:
    assert Version.parse(lower) < Version.parse(higher)
    assert Version.parse(higher) >= Version.parse(lower)


def test_it_ignores_build_metadata_in_equality_hash_and_order() -> None:
    a, b, plain = Version.parse("1.0.0+a"), Version.parse("1.0.0+b"), Version.parse("1.0.0")
    assert a == b == plain
    assert hash(a) == hash(b) == hash(plain)
    assert not a < b and not b < a and a <= b and a >= b
    assert len({a, b, plain}) == 1
    assert str(a) == "1.0.0+a" and str(b) == "1.0.0+b"  # but it is kept and printed


def test_it_keeps_numeric_and_textual_identifiers_apart() -> None:
    assert Version.parse("1.0.0-1") != Version.parse("1.0.0-a")
    assert Version.parse("1.0.0-1").prerelease == (1,)
    assert Version.parse("1.0.0-01a").prerelease == ("01a",)  # alphanumeric: leading zero allowed


def test_it_is_not_equal_to_a_string() -> None:
    assert Version.parse("1.0.0") != "1.0.0"
    with pytest.raises(TypeError):
        _ = Version.parse("1.0.0") < "2.0.0"  # type: ignore[operator]


def test_it_builds_from_parts() -> None:
    assert Version(1, 2, 3) == Version.parse("1.2.3")
    assert str(Version(1, 2, 3, "rc.1", "b5")) == "1.2.3-rc.1+b5"
    assert Version(1, 2, 3, ("rc", "1")).prerelease == ("rc", 1)
    assert Version(1, 2, 3, ["rc", 1]) == Version.parse("1.2.3-rc.1")


@pytest.mark.parametrize(
    "args",
    [(-1, 0, 0), (1, 0, True), (1.0, 0, 0), (1, 0, 0, ("",)), (1, 0, 0, ("01",)), (1, 0, 0, (), ("a b",))],
)
def test_it_refuses_bad_parts(args: tuple[object, ...]) -> None:
    with pytest.raises(VersionError):
        Version(*args)  # type: ignore[arg-type]


def test_it_is_immutable() -> None:
    v = Version.parse("1.2.3")
    with pytest.raises(AttributeError):
        v.major = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del v.minor
    assert v == Version(1, 2, 3)


def test_it_survives_pickle_and_copy() -> None:
    v = Version.parse("1.2.3-rc.1+b")
    clones = (pickle.loads(pickle.dumps(v)), copy.copy(v), copy.deepcopy(v))  # noqa: S301 - our own bytes
    for clone in clones:
        assert clone == v and str(clone) == "1.2.3-rc.1+b"


def test_it_caches_parsing() -> None:
    assert Version.parse("4.5.6-cache.test") is Version.parse("4.5.6-cache.test")


def test_it_gives_the_next_version_and_the_release() -> None:
    assert Version.parse("1.2.3").next_version() == Version.parse("1.2.4-0")
    assert Version.parse("1.2.3-rc").next_version() == Version.parse("1.2.3-rc.0")
    assert str(Version.parse("1.2.3-rc.1+b").release) == "1.2.3"
    assert str(Version.parse("1.2.3-rc.1+b").without_build()) == "1.2.3-rc.1"
    assert repr(Version.parse("1.2.3+b")) == "SemVer('1.2.3+b')"


# -- runs_on: does an extension's provisioning_version admit the runtime ---------------------------


@pytest.mark.parametrize(
    ("constraint", "runtime", "runs"),
    [
        (">=1.0.0", "1.5.0", True),
        (">=1.0.0", "0.9.0", False),
        # A pre-release runtime is placed by precedence, whether or not the constraint names a pre-release:
        (">=1.0.0", "1.5.0-rc.1", True),
        (">=1.5.0", "1.5.0-rc.1", False),
        (">=1.5.0-rc.1", "1.5.0-rc.1", True),
        ("^1.4", "1.9.0-beta.2", True),
        ("^1.4", "2.0.0-rc.1", False),  # ^1.4 is <2.0.0-0: a 2.0 pre-release is not a 1.x runtime
        ("~1.4", "1.4.1-rc.1", True),
    ],
)
def test_runs_on_places_a_runtime_by_precedence(constraint: str, runtime: str, runs: bool) -> None:
    assert runs_on(Constraint.parse(constraint), Version.parse(runtime)) is runs
    # unlike choosing a candidate, where the pre-release rule applies:
    if Version.parse(runtime).is_prerelease and "-" not in constraint:
        assert not Constraint.parse(constraint).contains(runtime)


def test_runs_on_without_a_constraint_or_a_runtime_version_is_true() -> None:
    assert runs_on(None, Version.parse("1.0.0-rc.1"))
    assert runs_on(Constraint.parse(">=9"), None)


def test_version_is_a_compatibility_alias_of_semver() -> None:
    assert Version is SemVer
