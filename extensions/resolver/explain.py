"""Explaining why no answer exists, from the complete solver's proof (a minimal set of requirements
that cannot hold together), so that the explanation accounts for every version of the names in
the conflict, not for the one path a backtracking search happened to take last.

The proof is replayed as a derivation people can follow, using only its requirements:

- a root requirement means its name must be installed, at a version it admits;
- a name that must be installed and has one version left brings that version's requirements in;
  one whose every remaining version requires the same name brings that name in, at a version one
  of them admits (``kubernetes 1.28.0 and 1.27.0 require etcd ^3.5``);
- a version that requires a name at versions none of which is left is out
  (``app 1.2.0 requires mid ^1.2, which no remaining version of mid satisfies``);
- when a name that must be installed has no version left, that is the conflict.

When that alone does not reach the conflict, each remaining version of the most constrained name
that must be installed is tried in turn ("if app 1.2.0: ..."), and each must end in a conflict. If
even that does not, the explanation lists the proof's requirements, grouped by name: they cannot
all hold, and every one of them is needed for that.

Constraints are shown as their authors wrote them (``shown_requirement``); ``details`` also give
the normal form (``normal``).
"""

from __future__ import annotations

import difflib
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from extensions.errors import ResolutionError
from extensions.resolver.complete import Cause, Proof
from extensions.resolver.describe import shown_requirement, versions_text
from extensions.resolver.model import Candidate, Catalogue
from extensions.resolver.universe import Universe
from extensions.versions import Requirement

#: Versions of one name tried one by one when propagation alone does not reach the conflict.
MAX_CASES = 16
#: Lines of one case shown in the message (the details hold all of them).
CASE_LINES = 6


# --------------------------------------------------------------------------------------------------
# Unknown names (also checked before any search)
# --------------------------------------------------------------------------------------------------


def suggestions(name: str, catalogue: Catalogue) -> list[str]:
    return difflib.get_close_matches(name, sorted(catalogue.names()), n=3, cutoff=0.7)


def unknown_detail(name: str, catalogue: Catalogue, requirement: Requirement, parent: Candidate | None) -> dict:
    close = suggestions(name, catalogue)
    message = f"no extension named {name!r}"
    if close:
        message += "; did you mean " + " or ".join(repr(s) for s in close) + "?"
    if parent is not None:
        message += f" ({parent} requires {shown_requirement(requirement)})"
    return {
        "reason": "unknown",
        "name": name,
        "requirement": shown_requirement(requirement),
        "normal": str(requirement),
        "required_by": None if parent is None else str(parent),
        "suggestions": close,
        "message": message,
    }


def check_known_names(roots: Sequence[Requirement], catalogue: Catalogue) -> None:
    """``ResolutionError`` naming every root requirement on a name the catalogue does not have."""
    details = []
    reported = set()
    for requirement in roots:
        if requirement.name not in reported and not catalogue.versions(requirement.name):
            reported.add(requirement.name)
            details.append(unknown_detail(requirement.name, catalogue, requirement, None))
    if details:
        raise ResolutionError("; ".join(d["message"] for d in details), details=details)


# --------------------------------------------------------------------------------------------------
# The derivation
# --------------------------------------------------------------------------------------------------


@dataclass
class _Line:
    """One step: ``text`` restricts ``name`` (``target``) or removes a version of ``name``."""

    text: str
    name: str
    causes: list[Cause]
    removed: int = 0  # the versions of ``name`` this step ruled out (a mask)


@dataclass
class _State:
    possible: dict[str, int]
    forced: set[str] = field(default_factory=set)
    lines: list[_Line] = field(default_factory=list)
    why_out: dict[str, dict[int, str]] = field(default_factory=dict)  # name -> index -> why
    conflict: str | None = None
    unknown: list[dict[str, Any]] = field(default_factory=list)

    def copy(self) -> _State:
        return _State(
            dict(self.possible),
            set(self.forced),
            list(self.lines),
            {n: dict(w) for n, w in self.why_out.items()},
            self.conflict,
            list(self.unknown),
        )


class _Explainer:
    def __init__(self, universe: Universe, roots: Sequence[Requirement], proof: Proof) -> None:
        self.universe = universe
        self.roots = roots
        self.causes = list(proof.causes)
        self.by_parent: dict[tuple[str, int], list[Requirement]] = {}
        self.names: list[str] = []
        seen: set[str] = set()
        for requirement, parent in self.causes:
            for name in (requirement.name, *([parent.name] if parent is not None else [])):
                if name not in seen:
                    seen.add(name)
                    self.names.append(name)
            if parent is not None:
                key = (parent.name, universe.info(parent.name).index[parent.version])
                self.by_parent.setdefault(key, []).append(requirement)
        self.chains = _Chains(roots, self.causes)

    # Text ---------------------------------------------------------------------------------------------

    def line(self, requirement: Requirement, parent: Candidate | None) -> str:
        if parent is None:
            return f"you asked for {shown_requirement(requirement)}"
        return f"{parent} requires {shown_requirement(requirement)}{self.chains.via(parent)}"

    def merged(self, name: str, indexes: list[int], requirement: Requirement) -> str:
        info = self.universe.info(name)
        versions = [str(info.candidates[i].version) for i in indexes]
        parent = info.candidates[indexes[0]]
        if len(versions) == 1:
            return self.line(requirement, parent)
        if len(versions) > 3 and len(versions) == info.allowed.bit_count():
            who = f"every version of {name} ({len(versions)})"
            return f"{who} requires {shown_requirement(requirement)}{self.chains.via(parent)}"
        if len(versions) > 6:
            versions = [*versions[:3], "...", *versions[-2:]]
        listed = ", ".join(versions[:-1]) + f" and {versions[-1]}"
        return f"{name} {listed} require {shown_requirement(requirement)}{self.chains.via(parent)}"

    # Propagation ---------------------------------------------------------------------------------------

    def start(self) -> _State:
        state = _State({n: self.universe.info(n).allowed for n in self.names})
        for requirement, parent in self.causes:
            if parent is None:
                state.forced.add(requirement.name)
                self.restrict(
                    state,
                    requirement.name,
                    self._mask(requirement),
                    self.line(requirement, None),
                    [(requirement, None)],
                )
        return state

    def _mask(self, requirement: Requirement) -> int:
        return self.universe.mask(self.universe.info(requirement.name), requirement.constraint)

    def restrict(self, state: _State, name: str, mask: int, text: str, causes: list[Cause]) -> bool:
        before = state.possible[name]
        after = before & mask
        if after == before and not (after == 0 and name in state.forced):
            return False
        state.possible[name] = after
        state.lines.append(_Line(text, name, causes, before & ~after))
        why = state.why_out.setdefault(name, {})
        for i in _bits(before & ~after):
            why.setdefault(i, f"excluded: {text}")
        if name in state.forced and after == 0:
            state.conflict = state.conflict or name
        return True

    def propagate(self, state: _State) -> None:
        """Apply the rules until nothing changes or a conflict shows: names brought in first (so that
        requirements meet on the name they share), versions ruled out when nothing else is left."""
        while state.conflict is None:
            self.universe.budget.check()
            if any(self._bring_in(state, n) for n in self.names if n in state.forced):
                continue
            if not any(self._eliminate(state, n) for n in self.names):
                return

    def _eliminate(self, state: _State, name: str) -> bool:
        """Rule out the versions of ``name`` that require a name at no version left."""
        changed = False
        info = self.universe.info(name)
        for i in _bits(state.possible[name]):
            for requirement in self.by_parent.get((name, i), ()):
                target = requirement.name
                admitted = self._mask(requirement)
                if admitted & state.possible.get(target, 0):
                    continue
                parent = info.candidates[i]
                if not self.universe.info(target).candidates:
                    unknown = unknown_detail(target, self.universe.catalogue, requirement, parent)
                    state.unknown.append(unknown)
                    text = unknown["message"]
                elif admitted == 0:
                    matches = self.no_version_text(target, [requirement])
                    text = f"{self.line(requirement, parent)}, but no version of {target} matches ({matches})"
                else:
                    text = f"{self.line(requirement, parent)}, which no remaining version of {target} satisfies"
                state.possible[name] &= ~(1 << i)
                state.lines.append(_Line(text, name, [(requirement, parent)], 1 << i))
                state.why_out.setdefault(name, {}).setdefault(i, f"requires {shown_requirement(requirement)}")
                changed = True
                if name in state.forced and state.possible[name] == 0:
                    state.conflict = state.conflict or name
                    return True
                break
        return changed

    def _bring_in(self, state: _State, name: str) -> bool:
        """A name that must be installed: the names every remaining version of it requires must be too."""
        indexes = list(_bits(state.possible[name]))
        if not indexes:
            return False
        info = self.universe.info(name)
        common: dict[str, list[tuple[int, Requirement]]] = {}
        for position, i in enumerate(indexes):
            for requirement in self.by_parent.get((name, i), ()):
                found = common.setdefault(requirement.name, [])
                if len(found) == position:  # one requirement per version, the first
                    found.append((i, requirement))
        changed = False
        for target, items in common.items():
            if len(items) != len(indexes) or target not in state.possible:
                continue
            state.forced.add(target)
            mask = 0
            for _, requirement in items:
                mask |= self._mask(requirement)
            texts = []
            by_text: dict[str, list[int]] = {}
            for i, requirement in items:
                by_text.setdefault(shown_requirement(requirement), []).append(i)
            for same in by_text.values():
                requirement = next(r for i, r in items if i == same[0])
                texts.append(self.merged(name, same, requirement))
            causes: list[Cause] = [(r, info.candidates[i]) for i, r in items]
            changed |= self.restrict(state, target, mask, "; ".join(texts), causes)
            if state.conflict is not None:
                return True
        return changed

    def cases(self, state: _State) -> tuple[str, list[tuple[int, _State]]] | None:
        """Try each version of the most constrained name that must be installed; the cases if each
        ends in a conflict."""
        choices = [
            (state.possible[n].bit_count(), position, n)
            for position, n in enumerate(self.names)
            if n in state.forced and state.possible[n].bit_count() >= 2
        ]
        for _, _, name in sorted(choices):
            if state.possible[name].bit_count() > MAX_CASES:
                break
            outcomes = []
            for i in _bits(state.possible[name]):
                case = state.copy()
                case.lines = []
                case.possible[name] = 1 << i
                self.propagate(case)
                if case.conflict is None:
                    break
                outcomes.append((i, case))
            else:
                return name, outcomes
        return None

    # The error ----------------------------------------------------------------------------------------

    def no_version_text(self, name: str, requirements: Sequence[Requirement]) -> str:
        info = self.universe.info(name)
        available = [str(c.version) for c in reversed(info.candidates)]
        skipped = self.universe.skipped_versions(name, requirements)
        text = f"available: {versions_text(available)}"
        if skipped:
            text += "; skipped: " + ", ".join(f"{s['version']} ({s['why']})" for s in skipped)
        return text

    def about(self, requirement: Requirement, parent: Candidate | None) -> dict[str, Any]:
        chain = self.chains.chain(requirement, parent)
        return {
            "requirement": shown_requirement(requirement),
            "normal": str(requirement),
            "required_by": None if parent is None else str(parent),
            "chain": chain,
            "path": "you asked for " + " -> ".join(chain),
        }

    def detail(self, state: _State, name: str) -> dict[str, Any]:
        """What the derivation found about ``name``: the requirements on it, and every version's fate."""
        info = self.universe.info(name)
        causes: list[Cause] = []
        for line in state.lines:
            if line.name == name and line.causes and line.causes[0][0].name == name:
                causes.extend(line.causes)
        requirements = [r for r, _ in causes]
        why = state.why_out.get(name, {})
        versions = []
        for i, candidate in enumerate(info.candidates):
            rule = self.universe.why_skipped(candidate, requirements)
            if not info.allowed >> i & 1 and rule is not None:
                versions.append({"version": str(candidate.version), "why": rule[1]})
            elif i in why:
                versions.append({"version": str(candidate.version), "why": why[i]})
        together = info.allowed
        for requirement in requirements:
            together &= self._mask(requirement)
        return {
            "name": name,
            "requirements": [self.about(r, p) for r, p in causes],
            "available": [str(c.version) for c in reversed(info.candidates)],
            "skipped": self.universe.skipped_versions(name, requirements),
            "ruled_out": [str(info.candidates[i].version) for i in _bits(together)],
            "versions": versions,
        }

    def error(self) -> ResolutionError:
        asked = ", ".join(shown_requirement(r) for r in self.roots)
        state = self.start()
        self.propagate(state)
        if state.conflict is not None:
            return self._conflict_error(asked, state)
        found = self.cases(state)
        if found is not None:
            return self._cases_error(asked, state, *found)
        return self._listing_error(asked)

    def _conflict_error(self, asked: str, state: _State) -> ResolutionError:
        name = state.conflict
        assert name is not None
        if not self.universe.info(name).candidates:  # a dependency on a name that does not exist
            unknown = [
                unknown_detail(name, self.universe.catalogue, r, p)
                for line in state.lines
                if line.name == name
                for r, p in line.causes
            ]
            state.unknown.extend(unknown)
            state.lines = [line for line in state.lines if line.name != name]
            text = "; ".join(_trimmed([line.text for line in state.lines] + [d["message"] for d in unknown]))
            return ResolutionError(f"cannot resolve {asked}: {text}", details=state.unknown)
        details = [*state.unknown, self._conflict_detail(state, name)]
        first = len(state.unknown)
        # a root requirement's line says again what the message begins with, unless it is part of the conflict
        before = [line.text for line in state.lines if line.name != name and not _from_root(line)]
        for other in dict.fromkeys(
            line.name for line in state.lines if line.removed and line.name != name and not _from_root(line)
        ):
            if state.possible[other] == 0 or other in state.why_out:
                details.append({"reason": "excluded", **self.detail(state, other), "message": ""})
        for extra in details[first + 1 :]:
            extra["message"] = f"versions of {extra['name']} ruled out: " + ", ".join(
                f"{v['version']} ({v['why']})" for v in extra["versions"]
            )
        details[first]["steps"] = [line.text for line in state.lines]
        text = "; ".join(_trimmed([*dict.fromkeys(before), details[first]["message"]]))
        return ResolutionError(f"cannot resolve {asked}: {text}", details=details)

    def _conflict_detail(self, state: _State, name: str) -> dict[str, Any]:
        found = self.detail(state, name)
        lines = [line for line in state.lines if line.name == name]
        restricting = [line for line in lines if line.causes and line.causes[0][0].name == name]
        single = restricting[0] if len(restricting) == 1 and len(restricting[0].causes) == 1 else None
        if (
            single is not None
            and not self._mask(single.causes[0][0])
            and not any(line.removed and line not in restricting for line in lines)
        ):
            requirement, parent = single.causes[0]
            message = f"{single.text}, but no version of {name} matches ({self.no_version_text(name, [requirement])})"
            about = self.about(requirement, parent)
            return {
                "reason": "no_matching_version",
                "name": name,
                **about,
                "available": found["available"],
                "skipped": found["skipped"],
                "versions": found["versions"],
                "message": message,
            }
        texts = [line.text for line in lines]
        if found["ruled_out"]:
            message = "; ".join(texts) + f"; so no version of {name} is left (available: "
            message += versions_text(found["available"]) + ")"
        else:
            requirements = [c[0] for line in restricting for c in line.causes]
            message = "; ".join(texts) + f"; no version of {name} satisfies all of these ("
            message += self.no_version_text(name, requirements) + ")"
        return {"reason": "conflict", **found, "message": message}

    def _cases_error(self, asked: str, state: _State, name: str, cases: list[tuple[int, _State]]) -> ResolutionError:
        info = self.universe.info(name)
        before = [line.text for line in state.lines]
        versions = []
        shown = []
        for position, (i, case) in enumerate(cases):
            steps = [line.text for line in case.lines]
            conflict = case.conflict
            assert conflict is not None
            ending = f"no version of {conflict} is left"
            versions.append({"version": str(info.candidates[i].version), "why": [*steps, ending]})
            if position == 0:
                listed = steps if len(steps) <= CASE_LINES else [*steps[: CASE_LINES - 2], "...", *steps[-2:]]
                shown.append(f"with {name} {info.candidates[i].version}: " + "; ".join([*listed, ending]))
        if len(cases) > 1:
            others = ", ".join(str(info.candidates[i].version) for i, _ in cases[1:])
            shown.append(f"and likewise with {name} {others} (each case is in the details)")
        message = "; ".join([*dict.fromkeys(before), f"every version of {name} left fails", *shown])
        detail = {"reason": "conflict", **self.detail(state, name), "cases": versions, "message": message}
        return ResolutionError(f"cannot resolve {asked}: {message}", details=[detail])

    def _listing_error(self, asked: str) -> ResolutionError:
        by_name: dict[str, list[Cause]] = {}
        for cause in self.causes:
            by_name.setdefault(cause[0].name, []).append(cause)
        details: list[dict[str, Any]] = []
        lines: list[str] = []
        for name, causes in by_name.items():
            info = self.universe.info(name)
            lines.append("; ".join(self.line(r, p) for r, p in causes))
            details.append(
                {
                    "reason": "conflict",
                    "name": name,
                    "requirements": [self.about(r, p) for r, p in causes],
                    "available": [str(c.version) for c in reversed(info.candidates)],
                    "skipped": self.universe.skipped_versions(name, [r for r, _ in causes]),
                    "ruled_out": [],
                    "versions": [],
                    "message": lines[-1],
                }
            )
        text = "; ".join(lines)
        message = f"cannot resolve {asked}: these requirements cannot all hold together: {text}"
        return ResolutionError(message, details=details)


def _from_root(line: _Line) -> bool:
    return len(line.causes) == 1 and line.causes[0][1] is None


def _trimmed(lines: list[str], keep: int = 6) -> list[str]:
    """At most ``keep`` lines for the message, the first and the last ones (the details hold all)."""
    if len(lines) <= keep:
        return lines
    half = keep // 2
    return [*lines[:half], f"... ({len(lines) - keep} more steps, in the details)", *lines[-half:]]


def _bits(mask: int) -> list[int]:
    out = []
    i = 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return out


class _Chains:
    """Shortest chains from a root requirement to a candidate, through the proof's requirements:
    ``["kubern-ha", "kubern-ha 2.0.0", "kubernetes 1.28.0", "etcd >=3.5, <4"]``."""

    def __init__(self, roots: Sequence[Requirement], causes: Sequence[Cause]) -> None:
        self.roots = roots
        by_name: dict[str, list[Candidate]] = {}
        requirements: dict[int, list[Requirement]] = {}
        for requirement, parent in causes:
            if parent is not None:
                if id(parent) not in requirements:
                    by_name.setdefault(parent.name, []).append(parent)
                requirements.setdefault(id(parent), []).append(requirement)
        for found in by_name.values():
            found.sort(key=lambda c: c.version, reverse=True)
        self.by_name = by_name
        self.requirements = requirements
        self._paths: dict[int, list[str]] | None = None

    def _search(self) -> dict[int, list[str]]:
        paths: dict[int, list[str]] = {}
        queue: deque[Candidate] = deque()

        def visit(requirement: Requirement, before: list[str]) -> None:
            for candidate in self.by_name.get(requirement.name, ()):
                if id(candidate) not in paths and requirement.constraint.contains(
                    candidate.version, include_prereleases=True
                ):
                    paths[id(candidate)] = [*before, str(candidate)]
                    queue.append(candidate)

        for root in self.roots:
            visit(root, [shown_requirement(root)])
        while queue:
            candidate = queue.popleft()
            for requirement in self.requirements.get(id(candidate), ()):
                visit(requirement, paths[id(candidate)])
        return paths

    def path(self, parent: Candidate) -> list[str]:
        if self._paths is None:
            self._paths = self._search()
        return self._paths.get(id(parent)) or ["…", str(parent)]

    def chain(self, requirement: Requirement, parent: Candidate | None) -> list[str]:
        if parent is None:
            return [shown_requirement(requirement)]
        return [*self.path(parent), shown_requirement(requirement)]

    def via(self, parent: Candidate) -> str:
        """`` (via a 1.0.0 -> b 2.0.0)`` when the parent is not directly what a root asked for."""
        middle = self.path(parent)[1:-1]
        if len(middle) > 4:  # the details keep the whole chain; the message keeps its ends
            middle = [*middle[:2], "...", middle[-1]]
        return f" (via {' -> '.join(middle)})" if middle else ""


def explain(universe: Universe, roots: Sequence[Requirement], proof: Proof) -> ResolutionError:
    """The ``ResolutionError`` for a request the complete solver proved impossible."""
    return _Explainer(universe, roots, proof).error()
