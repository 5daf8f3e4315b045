"""Which version of an extension is its latest, and which versions provide a name
(extensions.providing): the run of versions, up to the newest, that the registry's install plan and
the client's `type create NAME` point to."""

from __future__ import annotations

from extensions.providing import latest_version, providing_since
from extensions.resolver import Candidate
from extensions.versions import SemVer


def _version(number: str, *, provides: bool, yanked: bool = False) -> Candidate:
    extra = {"provides": {"taskservs": ["gateway"] if provides else []}}
    return Candidate(name="gateway-pack", version=SemVer.parse(number), yanked=yanked, extra=extra)


def test_the_run_up_to_the_newest_counts_not_an_earlier_one() -> None:
    versions = [
        _version("1.0.0", provides=False),
        _version("1.1.0", provides=True),
        _version("1.2.0", provides=False),  # dropped it
        _version("1.3.0", provides=True),
        _version("1.4.0", provides=True),
    ]
    assert providing_since(versions, "taskserv", "gateway") == SemVer.parse("1.3.0")


def test_releases_count_before_pre_releases_and_yanked_versions_not_at_all() -> None:
    versions = [
        _version("1.0.0", provides=False),
        _version("1.1.0-rc.1", provides=True),
        _version("1.1.0", provides=True),
        _version("1.2.0", provides=False, yanked=True),
    ]
    assert providing_since(versions, "taskserv", "gateway") == SemVer.parse("1.1.0")
    only_pre = [_version("1.0.0-rc.1", provides=False), _version("1.0.0-rc.2", provides=True)]
    assert providing_since(only_pre, "taskserv", "gateway") == SemVer.parse("1.0.0-rc.2")


def test_none_when_the_newest_does_not_provide_it() -> None:
    versions = [_version("1.0.0", provides=True), _version("2.0.0", provides=False)]
    assert providing_since(versions, "taskserv", "gateway") is None
    assert providing_since(versions, "cluster", "gateway") is None


def test_the_latest_is_the_newest_live_release_else_the_newest_live_pre_release() -> None:
    versions = [
        _version("1.0.0", provides=True),
        _version("1.1.0", provides=True, yanked=True),
        _version("2.0.0-rc.1", provides=True),
    ]
    latest = latest_version(versions)
    assert latest is not None and str(latest.version) == "1.0.0"
    pre = latest_version([_version("1.0.0-rc.1", provides=True), _version("1.0.0-rc.2", provides=True, yanked=True)])
    assert pre is not None and str(pre.version) == "1.0.0-rc.1"
    assert latest_version([_version("1.0.0", provides=True, yanked=True)]) is None
    assert latest_version([]) is None
