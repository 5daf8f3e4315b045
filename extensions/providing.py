"""Which version of an extension counts as its latest, and which of its versions provide a name.

One definition for the registry (its catalogue and install plan) and the client (its lookup and
``taskserv|cluster|providers create``): the latest version is the newest non-yanked release, else
the newest non-yanked pre-release; a version provides a type NAME when its index entry lists NAME
under ``provides.<kind>`` (the type's plural: ``taskservs``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from extensions.kinds import plural
from extensions.resolver.model import Candidate
from extensions.versions import SemVer

__all__ = [
    "counted",
    "counted_of",
    "latest_of",
    "latest_version",
    "offers",
    "provides",
    "providing_since",
]

T = TypeVar("T")


def counted_of(items: Iterable[T], *, version: Callable[[T], SemVer], yanked: Callable[[T], bool]) -> list[T]:
    """The items the latest is chosen from, whatever they are (the registry's version rows, the
    resolver's candidates): the non-yanked releases, else the non-yanked pre-releases."""
    live = [item for item in items if not yanked(item)]
    return [item for item in live if not version(item).is_prerelease] or live


def latest_of(items: Iterable[T], *, version: Callable[[T], SemVer], yanked: Callable[[T], bool]) -> T | None:
    """The newest of `counted_of` (None when every one is yanked, or there is none)."""
    pool = counted_of(items, version=version, yanked=yanked)
    return max(pool, key=version) if pool else None


def counted(versions: Sequence[Candidate]) -> list[Candidate]:
    """`counted_of` the candidates."""
    return counted_of(versions, version=lambda c: c.version, yanked=lambda c: c.yanked)


def latest_version(versions: Sequence[Candidate]) -> Candidate | None:
    """`latest_of` the candidates."""
    return latest_of(versions, version=lambda c: c.version, yanked=lambda c: c.yanked)


def provides(candidate: Candidate, type: str, name: str) -> bool:
    """Whether ``candidate`` provides ``type`` NAME (``type`` singular: ``taskserv``...; KeyError
    for a word that is not a type)."""
    return name in candidate.extra.get("provides", {}).get(plural(type), ())


def offers(candidate: Candidate, type: str, name: str) -> bool:
    """Whether installing ``candidate`` is installing ``type`` NAME: it provides it, or it is itself
    an extension of that type named NAME (the lookup's second rule)."""
    return provides(candidate, type, name) or (candidate.name == name and candidate.type == type)


def providing_since(versions: Sequence[Candidate], type: str, name: str) -> SemVer | None:
    """The first version of the unbroken run of `counted` versions, up to the newest, that `offers`
    ``type`` NAME: yanked ones are passed over, pre-releases count only when there is no
    release. None when the newest does not provide it."""
    since = None
    for candidate in sorted(counted(versions), key=lambda v: v.version, reverse=True):
        if not offers(candidate, type, name):
            break
        since = candidate.version
    return since
