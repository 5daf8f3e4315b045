"""Which version of an extension counts as its latest, and which of its versions provide a name.

One definition for the registry (its install plan) and the client (its lookup and
``taskserv|cluster|providers create``): the latest version is the newest non-yanked release, else
the newest non-yanked pre-release, as the registry's catalogue counts it; a version provides NAME
as a kind when its index entry lists NAME under ``provides.<kind>``.
"""

from __future__ import annotations

from collections.abc import Sequence

from extensions.resolver.model import Candidate
from extensions.versions import SemVer

__all__ = ["counted", "latest_version", "provides", "providing_since"]


def counted(versions: Sequence[Candidate]) -> list[Candidate]:
    """The versions the latest is chosen from: the non-yanked releases, else the non-yanked pre-releases."""
    live = [v for v in versions if not v.yanked]
    return [v for v in live if not v.version.is_prerelease] or live


def latest_version(versions: Sequence[Candidate]) -> Candidate | None:
    """The newest of `counted` (None when every version is yanked, or there is none)."""
    pool = counted(versions)
    return max(pool, key=lambda v: v.version) if pool else None


def provides(candidate: Candidate, kind: str, name: str) -> bool:
    """Whether ``candidate`` provides NAME as a ``kind`` (plural: ``taskservs``...)."""
    return name in candidate.extra.get("provides", {}).get(kind, ())


def providing_since(versions: Sequence[Candidate], kind: str, name: str) -> SemVer | None:
    """The first version of the unbroken run of `counted` versions, up to the newest, that provide
    NAME as a ``kind``: yanked ones are passed over, pre-releases count only when there is no
    release. None when the newest does not provide it."""
    since = None
    for candidate in sorted(counted(versions), key=lambda v: v.version, reverse=True):
        if not provides(candidate, kind, name):
            break
        since = candidate.version
    return since
