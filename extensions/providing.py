"""Which version of an extension counts as its latest, and which of its versions provide a name.

One definition for the registry (its install plan) and the client (its lookup and
``taskserv|cluster|providers create``): the latest version is the newest non-yanked release, else
the newest non-yanked pre-release, as the registry's catalogue counts it; a version provides a type NAME
when its index entry lists NAME under ``provides.<kind>`` (the type's plural: ``taskservs``).
"""

from __future__ import annotations

from collections.abc import Sequence

from extensions.kinds import plural
from extensions.resolver.model import Candidate
from extensions.versions import SemVer

__all__ = ["counted", "latest_version", "offers", "provides", "providing_since"]


def counted(versions: Sequence[Candidate]) -> list[Candidate]:
    """The versions the latest is chosen from: the non-yanked releases, else the non-yanked pre-releases."""
    live = [v for v in versions if not v.yanked]
    return [v for v in live if not v.version.is_prerelease] or live


def latest_version(versions: Sequence[Candidate]) -> Candidate | None:
    """The newest of `counted` (None when every version is yanked, or there is none)."""
    pool = counted(versions)
    return max(pool, key=lambda v: v.version) if pool else None


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
