"""SemVer 2.0.0 versions and the version-constraint grammar (SPEC 2.2 and 2.3).

``SemVer`` is strict SemVer 2.0.0: ``MAJOR.MINOR.PATCH``, an optional ``-PRERELEASE`` and an optional
``+BUILD``, no leading zeros, no ``v`` prefix, no partial versions. Build metadata is kept (and printed)
but ignored by ``==``, ``hash`` and ordering. Each ``SemVer`` precomputes a sort key, so comparisons
are plain tuple comparisons.

``Constraint`` is the one grammar used everywhere (dependencies, compatibility, CLI arguments, the
resolve API)::

    *  (or empty)            any version
    1.2.3  =1.2.3            exactly 1.2.3        1.2  =1.2   means 1.2.*
    >1.2  >=1.2.3  <2  <=2.0.0  !=1.4.0           comparators; partial versions read as cargo and npm do
    ^1.2.3  ^0.2  ^0.0.3     caret (compatible)   ~1.2.3  ~1.2  ~1    tilde (same minor)
    1.*  1.2.*  1.x  1.2.X   wildcards
    A, B   or   A B          both hold            A || B              either holds

Every form is expanded to comparators on full versions; upper bounds coming from a partial version,
a caret, a tilde or a wildcard use ``-0`` (``^1.2`` is ``>=1.2.0, <2.0.0-0``), so that even with
pre-releases allowed ``^1.2`` does not admit ``2.0.0-rc.1``. ``str(constraint)`` prints that expanded,
sorted form, which is the same for every equivalent spelling of the same comparators.

Pre-releases follow npm's rule: a pre-release version is admitted only when, in the same AND-group,
a comparator names a pre-release of the same ``MAJOR.MINOR.PATCH`` (``>=1.2.3-beta.1`` admits
``1.2.3-beta.2`` but not ``1.2.4-beta.1``), or when the caller passes ``include_prereleases=True``.
An upper bound ``<X.Y.Z-0`` (the form expansions produce) names nothing: it admits no pre-release of
``X.Y.Z`` anyway.

A constraint that no version can satisfy, even with pre-releases allowed (``>2, <1``), is refused by
``Constraint.parse`` unless ``check_satisfiable=False``; the check is interval arithmetic over the
comparators, exact for any constraint.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar, Literal, NoReturn

from extensions.errors import ConstraintError, InvalidNameError, VersionError

__all__ = [
    "Comparator",
    "Constraint",
    "Requirement",
    "SemVer",
    "Version",
    "parse_constraint",
    "parse_requirement",
    "parse_version",
    "runs_on",
]

MAX_VERSION_LENGTH = 256
# The parser's own bound. Inputs are bounded where they arrive (extension.toml's schema: 1024
# characters), but the normal form of such a constraint, which is what the registry stores and index
# documents carry, can be several times longer (`^1` is `>=1.0.0, <2.0.0-0`) and must parse again.
MAX_CONSTRAINT_LENGTH = 16 * 1024

_NUM = r"0|[1-9][0-9]*"
_PRE_IDENT = r"0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*"
_BUILD_IDENT = r"[0-9A-Za-z-]+"
_VERSION_RE = re.compile(
    rf"(?P<major>{_NUM})\.(?P<minor>{_NUM})\.(?P<patch>{_NUM})"
    rf"(?:-(?P<pre>(?:{_PRE_IDENT})(?:\.(?:{_PRE_IDENT}))*))?"
    rf"(?:\+(?P<build>{_BUILD_IDENT}(?:\.{_BUILD_IDENT})*))?",
    re.ASCII,
)
_PRE_IDENT_RE = re.compile(_PRE_IDENT, re.ASCII)
_BUILD_IDENT_RE = re.compile(_BUILD_IDENT, re.ASCII)
_DIGITS_RE = re.compile(r"[0-9]+", re.ASCII)

_VERSION_HINT = "use MAJOR.MINOR.PATCH as in SemVer 2.0.0"
_CONSTRAINT_HINT = "use forms like ^1.2, ~1.2.3, >=1.2, <2, 1.*, =1.2.3, joined by ',' (and) or '||' (or)"

Op = Literal["=", "!=", ">", ">=", "<", "<="]
_OPS: frozenset[str] = frozenset({"=", "!=", ">", ">=", "<", "<=", "^", "~"})
_OP_CHARS = frozenset("<>=!^~")
_OP_RANK = {">": 0, ">=": 1, "=": 2, "!=": 3, "<=": 4, "<": 5}

# A pre-release identifier's sort key: numeric identifiers compare numerically and sort before
# alphanumeric ones, which compare in ASCII order (SemVer 2.0.0 section 11.4).
_IdentKey = tuple[int, int] | tuple[int, str]
_Key = tuple[int, int, int, int, tuple[_IdentKey, ...]]


# --------------------------------------------------------------------------------------------------
# Versions
# --------------------------------------------------------------------------------------------------


class SemVer:
    """A strict SemVer 2.0.0 version: immutable, hashable, totally ordered by SemVer precedence.

    ``build`` is kept and printed, but ignored by ``==``, ``hash`` and ordering: ``1.0.0+a`` and
    ``1.0.0+b`` are the same version.
    """

    __slots__ = ("_hash", "_key", "_text", "build", "major", "minor", "patch", "prerelease")

    major: int
    minor: int
    patch: int
    prerelease: tuple[int | str, ...]
    build: tuple[str, ...]
    _key: _Key
    _hash: int
    _text: str

    def __init__(
        self,
        major: int,
        minor: int,
        patch: int,
        prerelease: str | Sequence[int | str] = (),
        build: str | Sequence[str] = (),
    ) -> None:
        for label, number in (("major", major), ("minor", minor), ("patch", patch)):
            if type(number) is not int or number < 0:
                raise VersionError(
                    f"{label} version {number!r} is not valid: use a non-negative integer ({_VERSION_HINT})"
                )
        pre = _normalise_prerelease(prerelease)
        bld = _normalise_build(build)
        setattr_ = object.__setattr__
        setattr_(self, "major", major)
        setattr_(self, "minor", minor)
        setattr_(self, "patch", patch)
        setattr_(self, "prerelease", pre)
        setattr_(self, "build", bld)
        if pre:
            ident_keys = tuple((0, p) if type(p) is int else (1, p) for p in pre)
            key: _Key = (major, minor, patch, 0, ident_keys)  # type: ignore[assignment]
        else:
            key = (major, minor, patch, 1, ())
        setattr_(self, "_key", key)
        setattr_(self, "_hash", hash(key))
        text = f"{major}.{minor}.{patch}"
        if pre:
            text += "-" + ".".join(str(p) for p in pre)
        if bld:
            text += "+" + ".".join(bld)
        setattr_(self, "_text", text)

    @classmethod
    def parse(cls, text: str) -> SemVer:
        """Parse strict SemVer 2.0.0 text; ``VersionError`` (naming the problem) otherwise. Cached."""
        return parse_version(text)

    # Properties ------------------------------------------------------------------------------------

    @property
    def is_prerelease(self) -> bool:
        return bool(self.prerelease)

    @property
    def release(self) -> SemVer:
        """This version without pre-release and build metadata (``1.2.3-rc.1+b`` -> ``1.2.3``)."""
        if not self.prerelease and not self.build:
            return self
        return SemVer(self.major, self.minor, self.patch)

    def without_build(self) -> SemVer:
        """This version without build metadata (equal to it, but printed canonically)."""
        if not self.build:
            return self
        return SemVer(self.major, self.minor, self.patch, self.prerelease)

    def next_version(self) -> SemVer:
        """The smallest version greater than this one.

        ``1.2.3`` -> ``1.2.4-0``, ``1.0.0-rc`` -> ``1.0.0-rc.0``: nothing lies between them."""
        if self.prerelease:
            return SemVer(self.major, self.minor, self.patch, (*self.prerelease, 0))
        return SemVer(self.major, self.minor, self.patch + 1, (0,))

    # Dunder methods --------------------------------------------------------------------------------

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"SemVer is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"SemVer is immutable: cannot delete {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (SemVer, (self.major, self.minor, self.patch, self.prerelease, self.build))

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"SemVer({self._text!r})"

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SemVer):
            return self._key == other._key
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        if isinstance(other, SemVer):
            return self._key != other._key
        return NotImplemented

    def __lt__(self, other: SemVer) -> bool:
        if isinstance(other, SemVer):
            return self._key < other._key
        return NotImplemented

    def __le__(self, other: SemVer) -> bool:
        if isinstance(other, SemVer):
            return self._key <= other._key
        return NotImplemented

    def __gt__(self, other: SemVer) -> bool:
        if isinstance(other, SemVer):
            return self._key > other._key
        return NotImplemented

    def __ge__(self, other: SemVer) -> bool:
        if isinstance(other, SemVer):
            return self._key >= other._key
        return NotImplemented


#: Compatibility alias (the class was called ``Version``): new code says ``SemVer``, which cannot be
#: mistaken for the registry's ``registry.models.Version`` row. Old pickles name ``Version`` and load.
Version = SemVer


def _normalise_prerelease(prerelease: str | Sequence[int | str]) -> tuple[int | str, ...]:
    parts: Sequence[int | str] = prerelease.split(".") if isinstance(prerelease, str) else prerelease
    if isinstance(prerelease, str) and prerelease == "":
        return ()
    out: list[int | str] = []
    for part in parts:
        if type(part) is int:
            if part < 0:
                raise VersionError(f"pre-release identifier {part!r} is not valid: numbers must be >= 0")
            out.append(part)
        elif isinstance(part, str) and _PRE_IDENT_RE.fullmatch(part):
            out.append(int(part) if _DIGITS_RE.fullmatch(part) else part)
        else:
            raise VersionError(
                f"pre-release identifier {part!r} is not valid: use non-empty [0-9A-Za-z-] identifiers, "
                "numbers without leading zeros"
            )
    return tuple(out)


def _normalise_build(build: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(build, str):
        if build == "":
            return ()
        build = build.split(".")
    out = tuple(build)
    for part in out:
        if not isinstance(part, str) or not _BUILD_IDENT_RE.fullmatch(part):
            raise VersionError(f"build identifier {part!r} is not valid: use non-empty [0-9A-Za-z-] identifiers")
    return out


@lru_cache(maxsize=8192)
def _parse_version(text: str) -> SemVer:
    match = _VERSION_RE.fullmatch(text) if len(text) <= MAX_VERSION_LENGTH else None
    if match is None:
        reason, example = _diagnose_version(text)
        raise VersionError(f"{text!r} is not a valid version: {reason}{_VERSION_HINT}, e.g. {example}")
    pre = match.group("pre")
    build = match.group("build")
    return SemVer(
        int(match.group("major")),
        int(match.group("minor")),
        int(match.group("patch")),
        tuple(int(p) if _DIGITS_RE.fullmatch(p) else p for p in pre.split(".")) if pre else (),
        tuple(build.split(".")) if build else (),
    )


def _strip_leading_zeros(part: str) -> str:
    return (part.lstrip("0") or "0") if _DIGITS_RE.fullmatch(part) else part


def _diagnose_version(text: str) -> tuple[str, str]:
    """Why ``text`` is not SemVer 2.0.0 (as ``"reason; "`` or ``""``) and a valid example close to it."""
    default = "1.2.0"
    if text == "":
        return "it is empty; ", default
    if len(text) > MAX_VERSION_LENGTH:
        return f"it is longer than {MAX_VERSION_LENGTH} characters; ", default
    if not text.isascii():
        return "it contains non-ASCII characters; ", default
    if any(c.isspace() for c in text):
        return "it contains whitespace; ", _example(text.strip()) or default
    if text[0] in "vV" and text[1:2].isdigit():
        example = _example(text[1:]) or default
        return f"drop the {text[0]!r} prefix; ", example
    core, plus, build = text.partition("+")
    core, dash, pre = core.partition("-")
    if plus:
        if not build:
            return "the build metadata after '+' is empty; ", _example(text[:-1]) or default
        if any(not p for p in build.split(".")):
            return "the build metadata has an empty identifier; ", default
        bad = next((p for p in build.split(".") if not _BUILD_IDENT_RE.fullmatch(p)), None)
        if bad is not None:
            return f"build identifier {bad!r} may only use [0-9A-Za-z-]; ", default
    if dash:
        if not pre:
            return "the pre-release after '-' is empty; ", _example(core) or default
        for p in pre.split("."):
            if not p:
                return "the pre-release has an empty identifier; ", default
            if not _BUILD_IDENT_RE.fullmatch(p):
                return f"pre-release identifier {p!r} may only use [0-9A-Za-z-]; ", default
            if _DIGITS_RE.fullmatch(p) and p != _strip_leading_zeros(p):
                return f"numeric pre-release identifier {p!r} has a leading zero; ", default
    parts = core.split(".")
    for part in parts:
        if not _DIGITS_RE.fullmatch(part):
            return f"{part!r} is not a number; ", default
    numbers = [_strip_leading_zeros(p) for p in parts]
    if len(parts) != 3:
        padded = [*numbers, "0", "0"][:3] if len(parts) < 3 else numbers[:3]
        return "", _example(".".join(padded)) or default
    bad_zero = next((p for p in parts if p != _strip_leading_zeros(p)), None)
    if bad_zero is not None:
        return f"{bad_zero!r} has a leading zero; ", _example(".".join(numbers)) or default
    return "", default


def _example(text: str) -> str | None:
    return text if _VERSION_RE.fullmatch(text) else None


def parse_version(text: str) -> SemVer:
    """Parse strict SemVer 2.0.0 text (``VersionError`` otherwise). Cached."""
    if type(text) is not str:
        raise VersionError(f"{text!r} is not a valid version: a version is a string; {_VERSION_HINT}, e.g. 1.2.0")
    return _parse_version(text)


_MIN_VERSION = SemVer(0, 0, 0, (0,))


# --------------------------------------------------------------------------------------------------
# Constraints
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Comparator:
    """One comparison on full versions. ``!=`` with an ``upper`` excludes the range
    ``[version, upper)`` (the expansion of ``!=1.2``, printed ``!=1.2.*``)."""

    op: Op
    version: SemVer
    upper: SemVer | None = None

    @property
    def names_prerelease(self) -> bool:
        """Whether this comparator names a pre-release (which lets that ``X.Y.Z``'s pre-releases
        match). ``<X.Y.Z-0`` names nothing: no pre-release of ``X.Y.Z`` is below it."""
        v = self.version
        return bool(v.prerelease) and not (self.op == "<" and v.prerelease == (0,))

    def sort_key(self) -> tuple[_Key, int]:
        return (self.version._key, _OP_RANK[self.op])

    def __str__(self) -> str:
        if self.upper is not None:
            v = self.version
            if self.upper.minor == v.minor + 1:
                return f"!={v.major}.{v.minor}.*"
            return f"!={v.major}.*"
        return f"{self.op}{self.version}"


# One AND-group compiled for `contains`: (lower key or None, lower inclusive, upper key or None,
# upper inclusive, excluded point keys, excluded [a, b) key ranges, triples whose pre-releases match).
_Compiled = tuple[
    _Key | None,
    bool,
    _Key | None,
    bool,
    frozenset[_Key],
    tuple[tuple[_Key, _Key], ...],
    frozenset[tuple[int, int, int]],
]


@dataclass(frozen=True)
class _Interval:
    lower: Comparator | None  # the tightest ">", ">=" or "="
    upper: Comparator | None  # the tightest "<", "<=" or "="
    points: tuple[Comparator, ...]  # "!=" on one version
    ranges: tuple[Comparator, ...]  # "!=" on a wildcard range

    @property
    def lower_inclusive(self) -> bool:
        return self.lower is None or self.lower.op != ">"

    @property
    def upper_inclusive(self) -> bool:
        return self.upper is None or self.upper.op != "<"


def _interval(group: Sequence[Comparator]) -> _Interval:
    lower: Comparator | None = None
    upper: Comparator | None = None
    # The tightest bound: the greatest lower (smallest upper) version, a strict one winning a tie.
    for c in group:
        if c.op in (">", ">=", "=") and (
            lower is None or (c.version._key, c.op == ">") > (lower.version._key, lower.op == ">")
        ):
            lower = c
        if c.op in ("<", "<=", "=") and (
            upper is None or (c.version._key, c.op != "<") < (upper.version._key, upper.op != "<")
        ):
            upper = c
    points = tuple(c for c in group if c.op == "!=" and c.upper is None)
    ranges = tuple(c for c in group if c.op == "!=" and c.upper is not None)
    return _Interval(lower, upper, points, ranges)


def _witness(iv: _Interval) -> SemVer | None:
    """The smallest version in the interval not excluded by a ``!=`` (pre-releases allowed), or None.

    Exact: every version has an immediate successor (``SemVer.next_version``), and each step past an
    excluded point or range is taken at most once, so at most ``len(points) + len(ranges) + 1``
    candidates are looked at.
    """
    if iv.lower is None:
        candidate = _MIN_VERSION
    elif iv.lower.op == ">":
        candidate = iv.lower.version.next_version()
    else:
        candidate = iv.lower.version
    points = {c.version._key for c in iv.points}
    ranges = [(c.version, c.upper) for c in iv.ranges if c.upper is not None]
    for _ in range(len(points) + len(ranges) + 2):
        if iv.upper is not None:
            bound = iv.upper.version
            if candidate > bound or (candidate == bound and iv.upper.op == "<"):
                return None
        if candidate._key in points:
            candidate = candidate.next_version()
            continue
        hit = next((hi for lo, hi in ranges if lo <= candidate < hi), None)
        if hit is not None:
            candidate = hit
            continue
        return candidate
    raise AssertionError("unreachable: every exclusion is passed at most once")  # pragma: no cover


def _compile(group: Sequence[Comparator]) -> _Compiled:
    iv = _interval(group)
    return (
        iv.lower.version._key if iv.lower else None,
        iv.lower_inclusive,
        iv.upper.version._key if iv.upper else None,
        iv.upper_inclusive,
        frozenset(c.version._key for c in iv.points),
        tuple((c.version._key, c.upper._key) for c in iv.ranges if c.upper is not None),
        frozenset((c.version.major, c.version.minor, c.version.patch) for c in group if c.names_prerelease),
    )


class Constraint:
    """A parsed version constraint (SPEC 2.3): an OR of AND-groups of comparators on full versions.

    Immutable and hashable; two constraints are equal when their normalised spellings (``str()``)
    are, which is the case for every equivalent spelling of the same comparators.
    """

    __slots__ = ("_compiled", "_groups", "_hash", "_satisfiable", "_text", "_written")

    ANY: ClassVar[Constraint]

    _groups: tuple[tuple[Comparator, ...], ...]
    _compiled: tuple[_Compiled, ...]
    _text: str
    _hash: int
    _satisfiable: bool | None
    _written: str

    def __init__(self, groups: Iterable[Iterable[Comparator]] = ((),)) -> None:
        normal: set[tuple[Comparator, ...]] = set()
        for group in groups:
            normal.add(tuple(sorted(set(group), key=Comparator.sort_key)))
        if not normal:
            raise ConstraintError("a constraint needs at least one group of comparators; use '*' for any version")
        ordered = tuple(sorted(normal, key=lambda g: [c.sort_key() for c in g]))
        text = " || ".join(", ".join(str(c) for c in g) if g else "*" for g in ordered)
        setattr_ = object.__setattr__
        setattr_(self, "_groups", ordered)
        setattr_(self, "_compiled", tuple(_compile(g) for g in ordered))
        setattr_(self, "_text", text)
        setattr_(self, "_hash", hash(("Constraint", text)))
        setattr_(self, "_satisfiable", None)
        setattr_(self, "_written", text)

    @classmethod
    def parse(cls, text: str, *, check_satisfiable: bool = True) -> Constraint:
        """Parse the SPEC 2.3 grammar. ``ConstraintError`` naming the bad part and the allowed forms;
        with ``check_satisfiable`` (the default), also when no version can ever match. Cached."""
        if type(text) is not str:
            raise ConstraintError(f"{text!r} is not a valid constraint: a constraint is a string; {_CONSTRAINT_HINT}")
        constraint = _parse_constraint(text)
        if check_satisfiable and not constraint.is_satisfiable():
            raise ConstraintError(f"{text!r} can never match: {constraint._unsatisfiable_reason()}")
        return constraint

    # Matching --------------------------------------------------------------------------------------

    def contains(self, version: SemVer | str, *, include_prereleases: bool = False) -> bool:
        """Whether ``version`` satisfies the constraint (a str is parsed; ``VersionError`` if invalid).

        A pre-release only matches if its AND-group names a pre-release of the same
        ``MAJOR.MINOR.PATCH``, or with ``include_prereleases=True``."""
        if not isinstance(version, SemVer):
            version = parse_version(version)
        key = version._key
        strict_pre = bool(version.prerelease) and not include_prereleases
        for lo, lo_incl, hi, hi_incl, points, ranges, named in self._compiled:
            if strict_pre and (version.major, version.minor, version.patch) not in named:
                continue
            if lo is not None and (key < lo if lo_incl else key <= lo):
                continue
            if hi is not None and (key > hi if hi_incl else key >= hi):
                continue
            if points and key in points:
                continue
            if ranges and any(a <= key < b for a, b in ranges):
                continue
            return True
        return False

    def __contains__(self, version: object) -> bool:
        if isinstance(version, SemVer | str):
            return self.contains(version)
        return False

    def filter(self, versions: Iterable[SemVer | str], *, include_prereleases: bool = False) -> list[SemVer]:
        """The versions the constraint admits, sorted ascending (strs are parsed)."""
        parsed = (v if isinstance(v, SemVer) else parse_version(v) for v in versions)
        return sorted(v for v in parsed if self.contains(v, include_prereleases=include_prereleases))

    def is_satisfiable(self) -> bool:
        """Whether some version satisfies the constraint when pre-releases are allowed."""
        if self._satisfiable is None:
            result = any(_witness(_interval(g)) is not None for g in self._groups)
            object.__setattr__(self, "_satisfiable", result)
            return result
        return self._satisfiable

    def _unsatisfiable_reason(self) -> str:
        reasons = [_group_conflict(g) for g in self._groups]
        if len(reasons) == 1:
            return reasons[0]
        return "none of its alternatives can: " + "; ".join(
            f"'{', '.join(str(c) for c in g)}': {r}" for g, r in zip(self._groups, reasons, strict=True)
        )

    # Properties ------------------------------------------------------------------------------------

    @property
    def groups(self) -> tuple[tuple[Comparator, ...], ...]:
        """The normalised AND-groups (an empty group admits any version)."""
        return self._groups

    @property
    def exact(self) -> SemVer | None:
        """The version when the constraint pins exactly one full version (``=1.2.3``), else None."""
        if len(self._groups) != 1:
            return None
        group = self._groups[0]
        pinned = {c.version for c in group if c.op == "="}
        if len(pinned) != 1:
            return None
        (version,) = pinned
        return version if self.contains(version, include_prereleases=True) else None

    @property
    def names_prerelease(self) -> bool:
        """Whether any comparator names a pre-release (so that pre-releases may match)."""
        return any(c.names_prerelease for g in self._groups for c in g)

    @property
    def written(self) -> str:
        """The constraint as its author wrote it (``^1.7``; runs of spaces collapsed), for showing to
        people; ``str()`` is the normal form (``>=1.7.0, <2.0.0-0``). A constraint built from
        comparators rather than parsed is written in its normal form. Not part of equality."""
        return self._written

    @property
    def is_any(self) -> bool:
        """Whether this is ``*`` (every release matches)."""
        return self._groups == ((),)

    # Dunder methods --------------------------------------------------------------------------------

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"Constraint is immutable: cannot set {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Constraint, (self._groups,))

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Constraint({self._text!r})"

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Constraint):
            return self._text == other._text
        return NotImplemented


Constraint.ANY = Constraint()


def _group_conflict(group: Sequence[Comparator]) -> str:
    iv = _interval(group)
    lower, upper = iv.lower, iv.upper
    if lower is None and upper is not None and _witness(_Interval(None, upper, (), ())) is None:
        return f"no version is {upper} (0.0.0-0 is the smallest version there is)"
    if lower is not None and upper is not None:
        lo_v, hi_v = lower.version, upper.version
        empty_interval = lo_v > hi_v or (lo_v == hi_v and (lower.op == ">" or upper.op == "<"))
        if lower.op == ">" and not empty_interval:
            successor = lo_v.next_version()
            empty_interval = successor > hi_v or (successor == hi_v and upper.op == "<")
        if empty_interval:
            return f"no version is both {lower} and {upper}; loosen one of them"
    excluded = ", ".join(str(c) for c in (*iv.points, *iv.ranges))
    bounds = ", ".join(str(c) for c in dict.fromkeys((lower, upper)) if c is not None) or "*"
    return f"every version allowed by {bounds} is excluded by {excluded}; remove the exclusion"


# Parsing -----------------------------------------------------------------------------------------

_PARTIAL_RE = re.compile(
    r"(?P<major>0|[1-9][0-9]*|[*xX])(?:\.(?P<minor>0|[1-9][0-9]*|[*xX])(?:\.(?P<patch>0|[1-9][0-9]*|[*xX]))?)?",
    re.ASCII,
)
_WILDCARDS = frozenset({"*", "x", "X"})


class _TermError(Exception):
    """A problem with one term; turned into a ConstraintError naming the whole text."""


def _fail(text: str, term: str, reason: str) -> NoReturn:
    where = "" if term.strip() == text.strip() else f"in {term!r}, "
    raise ConstraintError(f"{text!r} is not a valid constraint: {where}{reason}; {_CONSTRAINT_HINT}")


@lru_cache(maxsize=4096)
def _parse_constraint(text: str) -> Constraint:
    if len(text) > MAX_CONSTRAINT_LENGTH:
        raise ConstraintError(
            f"the constraint starting {text[:40]!r} is longer than {MAX_CONSTRAINT_LENGTH} characters; "
            f"{_CONSTRAINT_HINT}"
        )
    if not text.strip():
        return Constraint.ANY
    if not text.isascii():
        bad = next(c for c in text if not c.isascii())
        _fail(text, text, f"{bad!r} is not allowed (only ASCII)")
    groups: list[list[Comparator]] = []
    for branch in text.split("||"):
        if not branch.strip():
            _fail(text, text, "an alternative around '||' is empty")
        groups.append(_parse_branch(text, branch))
    constraint = Constraint(groups)
    object.__setattr__(constraint, "_written", " ".join(text.split()))
    return constraint


def _parse_branch(text: str, branch: str) -> list[Comparator]:
    comparators: list[Comparator] = []
    parts = branch.split(",")
    for part in parts:
        if not part.strip():
            _fail(text, branch, "a comparator around ',' is empty")
        words = part.split()
        index = 0
        while index < len(words):
            word = words[index]
            if all(c in _OP_CHARS for c in word):  # an operator followed by a space: ">= 1.2"
                if index + 1 >= len(words):
                    _fail(text, word, f"the operator {word!r} needs a version after it")
                word += words[index + 1]
                index += 1
            index += 1
            try:
                comparators.extend(_parse_term(word))
            except _TermError as exc:
                _fail(text, word, str(exc))
    return comparators


def _parse_term(term: str) -> list[Comparator]:
    split = 0
    while split < len(term) and term[split] in _OP_CHARS:
        split += 1
    op, body = term[:split], term[split:]
    if op and op not in _OPS:
        hint = {"==": " (use '=')", "~>": " (use '~' or '^')", "=>": " (use '>=')", "=<": " (use '<=')"}
        raise _TermError(f"{op!r} is not an operator{hint.get(op, '')}")
    if not body:
        raise _TermError(f"the operator {op!r} needs a version after it")
    if body == "-":
        raise _TermError("hyphen ranges are not supported: write '>=1.2, <=2.0' instead of '1.2 - 2.0'")
    full = _full_version(body)
    if full is not None:
        return _expand_full(op, full)
    partial = _PARTIAL_RE.fullmatch(body)
    if partial is None:
        raise _TermError(_why_not_version(body))
    numbers: list[int | None] = []
    for name in ("major", "minor", "patch"):
        part = partial.group(name)
        if part is None or part in _WILDCARDS:
            numbers.append(None)
        elif numbers and numbers[-1] is None:
            raise _TermError(f"'{body}' is not a version: nothing but wildcards may follow a wildcard")
        else:
            numbers.append(int(part))
    major, minor, _patch = numbers  # a full version was handled above, so the patch is a wildcard
    if major is None:
        if op:
            raise _TermError(f"a wildcard major version takes no operator: write '*' alone, not {term!r}")
        return []
    return _expand_partial(op, major, minor)


def _full_version(body: str) -> SemVer | None:
    if _VERSION_RE.fullmatch(body) is None:
        return None
    if len(body) > MAX_VERSION_LENGTH:  # the one rule the pattern leaves to parse_version
        raise _TermError(f"the version starting {body[:40]!r} is longer than {MAX_VERSION_LENGTH} characters")
    return _parse_version(body).without_build()


def _why_not_version(body: str) -> str:
    core = body.partition("+")[0].partition("-")[0]
    parts = core.split(".")
    if len(parts) > 3 and all(_DIGITS_RE.fullmatch(p) for p in parts):
        return f"{body!r} is not a version (a version has at most three numbers, MAJOR.MINOR.PATCH)"
    if body[:1] in ("v", "V") and body[1:2].isdigit():
        return f"{body!r} is not a version (drop the {body[0]!r} prefix)"
    zero = next((p for p in parts if _DIGITS_RE.fullmatch(p) and p != _strip_leading_zeros(p)), None)
    if zero is not None:
        return f"{body!r} is not a version ({zero!r} has a leading zero)"
    if ("-" in body or "+" in body) and _PARTIAL_RE.fullmatch(core):
        if len(parts) < 3 or any(p in _WILDCARDS for p in parts):
            return f"{body!r} is not a version (a pre-release or build needs all of MAJOR.MINOR.PATCH)"
        reason, _ = _diagnose_version(body)
        return f"{body!r} is not a version ({reason.removesuffix('; ')})"
    return f"{body!r} is not a version"


def _caret_upper(major: int, minor: int | None, patch: int | None) -> SemVer:
    if major > 0 or minor is None:
        return SemVer(major + 1, 0, 0, (0,))
    if minor > 0 or patch is None:
        return SemVer(0, minor + 1, 0, (0,))
    return SemVer(0, 0, patch + 1, (0,))


def _expand_full(op: str, v: SemVer) -> list[Comparator]:
    if op in ("", "="):
        return [Comparator("=", v)]
    if op == "^":
        return [Comparator(">=", v), Comparator("<", _caret_upper(v.major, v.minor, v.patch))]
    if op == "~":
        return [Comparator(">=", v), Comparator("<", SemVer(v.major, v.minor + 1, 0, (0,)))]
    return [Comparator(op, v)]  # type: ignore[arg-type]


def _expand_partial(op: str, major: int, minor: int | None) -> list[Comparator]:
    """``op`` on a partial version ``MAJOR`` or ``MAJOR.MINOR`` (wildcards read as omitted parts):
    ``low`` is its first release, ``next_`` the first release after all of it."""
    low = SemVer(major, minor or 0, 0)
    next_ = SemVer(major + 1, 0, 0) if minor is None else SemVer(major, minor + 1, 0)
    below_next = SemVer(next_.major, next_.minor, 0, (0,))
    if op in ("", "="):
        return [Comparator(">=", low), Comparator("<", below_next)]
    if op == ">=":
        return [Comparator(">=", low)]
    if op == ">":
        return [Comparator(">=", next_)]
    if op == "<":
        return [Comparator("<", SemVer(low.major, low.minor, 0, (0,)))]
    if op == "<=":
        return [Comparator("<", below_next)]
    if op == "!=":
        return [Comparator("!=", low, below_next)]
    if op == "^":
        return [Comparator(">=", low), Comparator("<", _caret_upper(major, minor, None))]
    # "~": ~1.2 is >=1.2.0, <1.3.0-0 and ~1 is >=1.0.0, <2.0.0-0, which is `next_` of the partial
    return [Comparator(">=", low), Comparator("<", below_next)]


def parse_constraint(text: str) -> Constraint:
    """``Constraint.parse(text)``, refusing constraints that can never match."""
    return Constraint.parse(text)


# --------------------------------------------------------------------------------------------------
# Requirements
# --------------------------------------------------------------------------------------------------

_NAME_RE = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*", re.ASCII)
_NAME_END_RE = re.compile(r"[\s<>=!^~*,|]")


@dataclass(frozen=True)
class Requirement:
    """A dependency on an extension: ``NAME`` or ``NAME CONSTRAINT`` (``etcd >=3.5, <4``)."""

    name: str
    constraint: Constraint = Constraint.ANY

    def __str__(self) -> str:
        return self.name if self.constraint.is_any else f"{self.name} {self.constraint}"

    @property
    def written(self) -> str:
        """As its author wrote it (``etcd ^3.5``); ``str()`` is the normal form."""
        shown = self.constraint.written
        return self.name if self.constraint.is_any or not shown or shown == "*" else f"{self.name} {shown}"


def _suggest_name(name: str) -> str | None:
    candidate = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    candidate = re.sub(r"^[0-9-]+", "", candidate)
    if 2 <= len(candidate) <= 64 and _NAME_RE.fullmatch(candidate):
        return candidate
    return None


def parse_requirement(text: str) -> Requirement:
    """Parse ``NAME``, ``NAME CONSTRAINT`` or ``NAMECONSTRAINT`` (``etcd>=3.5``).

    ``InvalidNameError`` for a bad name, ``ConstraintError`` for a bad or unsatisfiable constraint."""
    stripped = text.strip() if isinstance(text, str) else ""
    if not stripped:
        raise InvalidNameError(
            f"{text!r} is not a valid requirement: write NAME or NAME CONSTRAINT, e.g. 'etcd >=3.5, <4'"
        )
    end = _NAME_END_RE.search(stripped)
    name = stripped[: end.start()] if end else stripped
    rest = stripped[end.start() :] if end else ""
    if not name:
        raise InvalidNameError(
            f"{text!r} is not a valid requirement: it must start with an extension name, as in 'etcd >=3.5, <4'"
        )
    if not (2 <= len(name) <= 64 and _NAME_RE.fullmatch(name)):
        suggestion = _suggest_name(name)
        hint = f" (did you mean {suggestion!r}?)" if suggestion and suggestion != name else ""
        raise InvalidNameError(
            f"{name!r} in requirement {text!r} is not a valid extension name{hint}: use 2 to 64 lower-case "
            "letters, digits and single '-' between them, starting with a letter",
            suggestion=suggestion,
        )
    constraint = Constraint.parse(rest.strip()) if rest.strip() else Constraint.ANY
    return Requirement(name, constraint)


def runs_on(provisioning_version: Constraint | None, runtime: SemVer | None) -> bool:
    """Whether an extension whose ``provisioning_version`` is the given constraint runs on a runtime
    of version ``runtime`` (no constraint, or no runtime version known: it does).

    A pre-release runtime is placed by SemVer precedence (``include_prereleases=True``): the
    pre-release rule of SPEC 2.3 says which *candidate* versions may be chosen, and a runtime's
    version is not chosen, it is what is running. So runtime ``1.5.0-rc.1`` satisfies ``>=1.0.0``
    (else nothing would load on a release candidate) but not ``>=1.5.0`` (it predates 1.5.0) nor
    ``^1.4`` when the runtime is ``2.0.0-rc.1`` (``^1.4`` is ``>=1.4.0, <2.0.0-0``)."""
    if provisioning_version is None or runtime is None:
        return True
    return provisioning_version.contains(runtime, include_prereleases=True)
