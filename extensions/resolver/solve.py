"""``resolve()``: the request checked, the fast path tried, the complete solver behind it, all under one
budget; then what the answer left out (locked pins that could not be kept, newer versions a rule
skipped)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from extensions.errors import ExtensionError, ResolutionError, ResolutionTooComplex
from extensions.keypaths import key_path
from extensions.resolver.budget import DEFAULT_TIMEOUT, Budget, OutOfBudget
from extensions.resolver.complete import MAX_LITERALS, Answer, EncodingTooLarge, decide
from extensions.resolver.describe import shown_requirement
from extensions.resolver.explain import check_known_names, explain
from extensions.resolver.model import Candidate, Catalogue, Resolution, install_order
from extensions.resolver.provider import FAST_PATH_WORK, GaveUp, backtrack
from extensions.resolver.universe import TooManyExtensions, Universe
from extensions.versions import Requirement, SemVer, parse_requirement, parse_version, runs_on

MAX_EXTENSIONS = 1000


def resolve(
    requirements: Sequence[Requirement | str],
    catalogue: Catalogue,
    *,
    runtime_version: SemVer | str | None = None,
    include_prereleases: bool = False,
    locked: Mapping[str, SemVer | str] | None = None,
    max_rounds: int = 2000,
    max_requirements: int = 200,
    max_extensions: int = MAX_EXTENSIONS,
    timeout: float | None = DEFAULT_TIMEOUT,
    cancelled: Callable[[], bool] | None = None,
    fast_path_work: int = FAST_PATH_WORK,
) -> Resolution:
    """Resolve ``requirements`` (``Requirement`` objects or ``"NAME CONSTRAINT"`` strings) against
    ``catalogue``, within ``timeout`` seconds (None: no bound) and until ``cancelled()`` says the
    caller has gone. ``ResolutionError`` (``resolution_failed``) with structured ``details`` when
    there is no answer or the input is invalid; ``ResolutionTooComplex`` (``too_complex``) past a
    bound, saying what was tried. ``fast_path_work`` 0 skips the backtracking search."""
    budget = Budget(timeout, cancelled=cancelled)
    catalogue = _Waited(catalogue, budget)
    roots = _parse_roots(requirements, max_requirements)
    runtime = _parse_runtime(runtime_version)
    pins = _parse_locked(locked)
    check_known_names(roots, catalogue)
    universe = Universe(
        catalogue,
        include_prereleases=include_prereleases,
        runtime=runtime,
        locked=pins,
        pinned=_exact_pins(roots),
        max_extensions=max_extensions,
        budget=budget,
    )
    tried: list[str] = []
    try:
        try:
            if fast_path_work <= 0:
                raise GaveUp("skipped")
            chosen = backtrack(universe, roots, max_rounds=max_rounds, work_limit=fast_path_work)
        except GaveUp as gave_up:
            if gave_up.why != "skipped":
                tried.append(gave_up.tried())
            tried.append("the complete search")
            decided = decide(universe, roots)
            if not isinstance(decided, Answer):
                raise explain(universe, roots, decided) from None
            chosen = decided.chosen
    except OutOfBudget as exc:
        if not tried:
            tried.append("backtracking")
        raise _too_complex(budget, tried, universe, cancelled=exc.cancelled) from None
    except TooManyExtensions:
        raise _too_complex_size(f"more than {max_extensions} extensions are involved", max_extensions=max_extensions)
    except EncodingTooLarge:
        raise _too_complex_size(
            f"the complete search would need more than {MAX_LITERALS} terms", max_literals=MAX_LITERALS
        ) from None
    order = install_order(chosen)
    resolved = {name: chosen[name] for name in order}
    requirers = _requirers(resolved, roots)
    return Resolution(
        resolved=resolved,
        install_order=order,
        locked_ignored=_locked_ignored(universe, resolved, requirers),
        skipped=_skipped(universe, resolved, requirers),
    )


class _Waited:
    """``catalogue`` with the time its reads take kept off ``budget`` (the `budget` docstring)."""

    def __init__(self, catalogue: Catalogue, budget: Budget) -> None:
        self.catalogue = catalogue
        self.budget = budget

    def versions(self, name: str) -> Sequence[Candidate]:
        with self.budget.waiting():
            return self.catalogue.versions(name)

    def names(self) -> Iterable[str]:
        with self.budget.waiting():
            return list(self.catalogue.names())


def _too_complex(budget: Budget, tried: list[str], universe: Universe, *, cancelled: bool) -> ResolutionError:
    if cancelled:
        message = "resolution stopped: the caller went away"
        return ResolutionTooComplex(message, details=[{"reason": "cancelled", "message": message}])
    seconds = budget.seconds
    what = "; then ".join(tried)
    message = (
        f"resolution is too complex: no answer within {seconds:g} s ({what}, over {len(universe.names)} "
        "extensions); pin some versions or split the request"
    )
    detail: dict[str, Any] = {
        "reason": "too_complex",
        "message": message,
        "timeout": seconds,
        "tried": tried,
        "extensions": len(universe.names),
    }
    return ResolutionTooComplex(message, details=[detail])


def _too_complex_size(why: str, **fields: int) -> ResolutionError:
    message = f"resolution is too complex: {why}; pin some versions or split the request"
    return ResolutionTooComplex(message, details=[{"reason": "too_complex", "message": message, **fields}])


# --------------------------------------------------------------------------------------------------
# The request
# --------------------------------------------------------------------------------------------------


def _parse_roots(requirements: Sequence[Requirement | str], limit: int) -> list[Requirement]:
    if isinstance(requirements, str | bytes):
        raise ResolutionError(
            "requirements must be a list of requirements, not one string: write ['etcd >=3.5']",
            path="requirements",
            details=[{"reason": "invalid_requirement", "path": "requirements"}],
        )
    items = list(requirements)
    if len(items) > limit:
        raise ResolutionError(
            f"too many requirements: {len(items)} given, at most {limit} are allowed in one resolution",
            path="requirements",
            details=[{"reason": "too_many_requirements", "count": len(items), "limit": limit}],
        )
    roots = []
    for position, item in enumerate(items):
        if isinstance(item, Requirement):
            roots.append(item)
            continue
        path = f"requirements[{position}]"
        try:
            roots.append(parse_requirement(item))
        except ExtensionError as exc:
            raise ResolutionError(
                exc.message,
                path=path,
                details=[{"reason": "invalid_requirement", "path": path, "requirement": item, "message": exc.message}],
            ) from None
    return roots


def _exact_pins(roots: Sequence[Requirement]) -> dict[str, set[SemVer]]:
    """The versions the request pins exactly (``etcd =3.5.12``), which may be yanked ones."""
    pins: dict[str, set[SemVer]] = {}
    for requirement in roots:
        exact = requirement.constraint.exact
        if exact is not None:
            pins.setdefault(requirement.name, set()).add(exact)
    return pins


def _parse_runtime(runtime_version: SemVer | str | None) -> SemVer | None:
    if runtime_version is None or isinstance(runtime_version, SemVer):
        return runtime_version
    try:
        return parse_version(runtime_version)
    except ExtensionError as exc:
        raise ResolutionError(
            exc.message,
            path="runtime_version",
            details=[{"reason": "invalid_runtime_version", "path": "runtime_version", "message": exc.message}],
        ) from None


def _parse_locked(locked: Mapping[str, SemVer | str] | None) -> dict[str, SemVer]:
    pins: dict[str, SemVer] = {}
    for name, version in (locked or {}).items():
        if isinstance(version, SemVer):
            pins[name] = version
            continue
        path = key_path("locked", name)  # a name that is no bare key quoted, control characters escaped
        try:
            pins[name] = parse_version(version)
        except ExtensionError as exc:
            raise ResolutionError(
                exc.message,
                path=path,
                details=[{"reason": "invalid_locked_version", "path": path, "message": exc.message}],
            ) from None
    return pins


# --------------------------------------------------------------------------------------------------
# What the answer left out
# --------------------------------------------------------------------------------------------------


def _requirers(
    resolved: Mapping[str, Candidate], roots: Sequence[Requirement]
) -> dict[str, list[tuple[Requirement, Candidate | None]]]:
    """For each resolved name, every requirement on it and who made it (None for a root)."""
    out: dict[str, list[tuple[Requirement, Candidate | None]]] = {name: [] for name in resolved}
    for requirement in roots:
        out[requirement.name].append((requirement, None))
    for candidate in resolved.values():
        for requirement in candidate.dependencies:
            out[requirement.name].append((requirement, candidate))
    return out


def _line(requirement: Requirement, parent: Candidate | None) -> str:
    who = "you asked for" if parent is None else f"{parent} requires"
    return f"{who} {shown_requirement(requirement)}"


def _locked_ignored(
    universe: Universe,
    resolved: Mapping[str, Candidate],
    requirers: Mapping[str, list[tuple[Requirement, Candidate | None]]],
) -> list[dict[str, str]]:
    out = []
    for name, version in sorted(universe.locked.items()):
        chosen = resolved.get(name)
        if chosen is None or chosen.version == version:
            continue
        info = universe.info(name)
        index = info.index.get(version)
        if index is None:
            reason = f"{name} {version} does not exist (any more)"
        elif not runs_on(info.candidates[index].provisioning_version, universe.runtime):
            why = universe.why_skipped(info.candidates[index])
            reason = f"{name} {version} {why[1] if why else 'does not suit the runtime'}"
        else:
            against = [
                _line(r, p)
                for r, p in requirers[name]
                if not r.constraint.contains(version, include_prereleases=universe.include_prereleases)
            ]
            if against:
                reason = f"{name} {version} does not satisfy: " + "; ".join(against)
            else:
                reason = f"keeping {name} {version} conflicts with the other requirements"
        out.append({"name": name, "locked": str(version), "chosen": str(chosen.version), "reason": reason})
    return out


def _skipped(
    universe: Universe,
    resolved: Mapping[str, Candidate],
    requirers: Mapping[str, list[tuple[Requirement, Candidate | None]]],
) -> list[dict[str, str]]:
    out = []
    for name in sorted(resolved):
        chosen = resolved[name]
        info = universe.info(name)
        requirements = [r for r, _ in requirers[name]]
        for candidate in info.candidates:
            if candidate.version <= chosen.version:
                break
            if not all(r.constraint.contains(candidate.version, include_prereleases=True) for r in requirements):
                continue
            why = universe.why_skipped(candidate, requirements)
            if why is not None:
                out.append({"name": name, "version": str(candidate.version), "rule": why[0], "why": why[1]})
    return out
