"""Showing constraints and requirements to people: as their author wrote them (``etcd ^3.5``) where
that is known, else in a short form equivalent to the normal form (``>=3.5.0, <4.0.0-0`` is shown
``^3.5``); the normal form (``str()``) stays available for tools."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from extensions.errors import ExtensionError
from extensions.versions import Constraint, Requirement, SemVer


def describe_constraint(constraint: Constraint) -> str:
    """A short spelling of ``constraint`` for messages, equivalent to it (``^4.0`` rather than the
    normal form ``>=4.0.0, <5.0.0-0``). Falls back to ``str(constraint)`` when no shorter form is
    known to be equivalent."""
    if constraint.is_any:
        return "*"
    text = " || ".join(_describe_group(group) for group in constraint.groups)
    try:
        if Constraint.parse(text, check_satisfiable=False) == constraint:
            return text
    except ExtensionError:  # pragma: no cover - every spelling built above parses
        pass
    return str(constraint)  # pragma: no cover - the short forms are equivalent by construction


def describe_requirement(requirement: Requirement) -> str:
    """``etcd ^3.5`` (the short form of the constraint), or just ``etcd`` for any version."""
    if requirement.constraint.is_any:
        return requirement.name
    return f"{requirement.name} {describe_constraint(requirement.constraint)}"


def shown_constraint(constraint: Constraint) -> str:
    """The constraint as written (``>=1.2, <2``, ``1.*``), or its short form when only the normal
    form is known (documents that recorded normal forms)."""
    written = constraint.written
    if constraint.is_any:
        return "*"
    return describe_constraint(constraint) if written == str(constraint) else written


def shown_requirement(requirement: Requirement) -> str:
    """``etcd >=3.5, <4`` as written (see `shown_constraint`), or just ``etcd`` for any version."""
    if requirement.constraint.is_any:
        return requirement.name
    return f"{requirement.name} {shown_constraint(requirement.constraint)}"


def versions_text(versions: Iterable[str]) -> str:
    """``1.0.0, 1.1.0``; a long list keeps its ends (the details keep all of it)."""
    listed = list(versions)
    if len(listed) > 12:
        return ", ".join([*listed[:3], "...", *listed[-8:]]) + f" ({len(listed)} versions)"
    return ", ".join(listed) if listed else "none"


def _short(version: SemVer) -> str:
    """``X.Y`` for a release ``X.Y.0`` (which ``>=`` and ``^`` read the same way), else the version."""
    if not version.prerelease and version.patch == 0:
        return f"{version.major}.{version.minor}"
    return str(version)


def _describe_group(group: Sequence[Any]) -> str:
    if not group:
        return "*"
    lower = [c for c in group if c.op == ">="]
    upper = [c for c in group if c.op == "<"]
    if len(group) == 2 and len(lower) == 1 and len(upper) == 1:
        low, high = lower[0].version, upper[0].version
        if not low.prerelease and high.prerelease == (0,):
            if low.major > 0:
                caret = SemVer(low.major + 1, 0, 0, (0,))
            elif low.minor > 0:
                caret = SemVer(0, low.minor + 1, 0, (0,))
            else:
                caret = SemVer(0, 0, low.patch + 1, (0,))
            if high == caret:
                return "^" + (_short(low) if (low.major, low.minor) != (0, 0) else str(low))
            if high == SemVer(low.major, low.minor + 1, 0, (0,)):
                return "~" + _short(low)
    parts = []
    for c in group:
        if c.op == ">=" and not c.version.prerelease and c.version.patch == 0:
            parts.append(">=" + _short(c.version))
        elif c.op == "<" and c.version.prerelease == (0,) and c.version.patch == 0:
            parts.append(f"<{c.version.major}.{c.version.minor}")
        else:
            parts.append(str(c))
    return ", ".join(parts)
