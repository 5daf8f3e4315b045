"""The runtime loader (SPEC 5): `clients.runtime.ExtensionManager` over discovery directories and a
live registry. The cache, policy, discovery and error tests run on extensions written to tmp_path;
the registry tests use the session's registry with every bundled example published."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from clients.errors import UsageError
from clients.registry_client import IntegrityError, RegistryClient
from clients.runtime import (
    DEFAULT_CACHE_SIZE,
    DependencyError,
    ExtensionManager,
    ExtensionNotFoundError,
    LoadCheckError,
    LoadPolicy,
    NotLoadedError,
    PolicyError,
    VersionNotFoundError,
    default_search_paths,
)

if TYPE_CHECKING:
    from tests.live_registry import LiveRegistry


ROOT = Path(__file__).resolve().parents[2]
BUNDLED = ROOT / "extensions"  # {type}s/{name}/{version}/: the versioned discovery layout


def make_ext(
    directory: Path,
    name: str,
    version: str = "1.0.0",
    *,
    type: str = "taskserv",
    deps: Sequence[str] = (),
    provisioning: str = ">=1.0.0",
    description: str | None = None,
    nu: str | None = None,
    versioned: bool = True,
) -> Path:
    """An installed extension: {dir}/{type}s/{name}/{version}/ (or without {version}/)."""
    root = directory / f"{type}s" / name / (version if versioned else "")
    root.mkdir(parents=True, exist_ok=True)
    deps_toml = ", ".join(json.dumps(d) for d in deps)
    (root / "extension.toml").write_text(
        f'[extension]\nname = "{name}"\nversion = "{version}"\n'
        f'description = "{description or f"{name} {version} for tests"}"\ntype = "{type}"\n'
        'author = "Test Author <t@example.com>"\nrepository = "https://example.com/repo"\n\n'
        f'[compatibility]\nprovisioning_version = "{provisioning}"\n\n'
        f'[provides]\n{type}s = ["{name}"]\n\n[dependencies]\nextensions = [{deps_toml}]\n',
        encoding="utf-8",
    )
    if nu is not None:
        (root / "nulib").mkdir(exist_ok=True)
        (root / "nulib" / f"{name}.nu").write_text(nu, encoding="utf-8")
    return root


Factory = Callable[..., ExtensionManager]


@pytest.fixture
def manager_for(tmp_path: Path) -> Factory:
    """A manager over the given discovery directories: no registry, nothing persisted, no Nushell."""

    def build(*dirs: Path, **kwargs: object) -> ExtensionManager:
        options: dict[str, object] = {
            "home": tmp_path / "home",
            "client": None,
            "runtime_version": None,
            "search_paths": list(dirs),
            "policy": LoadPolicy(),
            "persist": False,
            "check_nushell": False,
        }
        options.update(kwargs)
        return ExtensionManager(**options)  # type: ignore[arg-type]

    return build


def keys(manager: ExtensionManager) -> list[str]:
    return [e.key for e in manager.list_loaded_extensions()]


# --- the LRU cache ------------------------------------------------------------------------------------


def test_the_cache_holds_100_extensions_and_evicts_the_101st_oldest(tmp_path: Path, manager_for: Factory) -> None:
    exts = tmp_path / "exts"
    names = [f"ext-{i:03d}" for i in range(DEFAULT_CACHE_SIZE + 1)]
    for name in names:
        make_ext(exts, name)
    manager = manager_for(exts)
    assert manager.cache_size == 100
    for name in names:
        manager.load_extension("taskserv", name)
    assert len(manager.list_loaded_extensions()) == 100
    assert manager.metrics.evictions == 1
    assert not manager.is_extension_loaded("taskserv", names[0])
    assert keys(manager) == [f"taskserv:{n}:1.0.0" for n in names[1:]]


def test_the_least_recently_used_entry_is_evicted_and_a_hit_refreshes_recency(
    tmp_path: Path, manager_for: Factory
) -> None:
    exts = tmp_path / "exts"
    for name in ("aa", "bb", "cc", "dd", "ee"):
        make_ext(exts, name)
    manager = manager_for(exts, cache_size=3)
    for name in ("aa", "bb", "cc"):
        manager.load_extension("taskserv", name, "1.0.0")
    assert manager.load("taskserv", "aa", "1.0.0").cached  # aa is now the most recently used
    manager.load_extension("taskserv", "dd", "1.0.0")  # evicts bb, the least recently used
    assert keys(manager) == ["taskserv:cc:1.0.0", "taskserv:aa:1.0.0", "taskserv:dd:1.0.0"]
    manager.load_extension("taskserv", "ee", "1.0.0")  # evicts cc
    assert keys(manager) == ["taskserv:aa:1.0.0", "taskserv:dd:1.0.0", "taskserv:ee:1.0.0"]
    assert manager.metrics.evictions == 2
    assert not manager.is_extension_loaded("taskserv", "bb")
    assert not manager.load("taskserv", "bb", "1.0.0").cached  # read again: a miss
    assert keys(manager)[-1] == "taskserv:bb:1.0.0"


def test_hit_ratio_counts_hits_among_all_loads_and_load_times_only_cold_loads(
    tmp_path: Path, manager_for: Factory
) -> None:
    exts = tmp_path / "exts"
    make_ext(exts, "aa")
    make_ext(exts, "bb")
    manager = manager_for(exts)
    assert manager.metrics.hit_ratio == 0.0
    manager.load_extension("taskserv", "aa", "1.0.0")
    manager.load_extension("taskserv", "aa", "1.0.0")
    manager.load_extension("taskserv", "aa", "1.0.0")
    manager.load_extension("taskserv", "bb", "1.0.0")
    metrics = manager.metrics
    assert (metrics.loads, metrics.cache_hits, metrics.cache_misses) == (4, 2, 2)
    assert metrics.hit_ratio == 0.5
    assert len(metrics.load_times) == 2 and all(t > 0 for t in metrics.load_times)
    report = metrics.to_dict()
    assert report["hit_ratio"] == 0.5 and report["load_time_ms"]["count"] == 2
    assert report["load_time_ms"]["p50"] is not None and report["evictions"] == 0


def test_a_failed_load_counts_as_a_load_and_a_failure(tmp_path: Path, manager_for: Factory) -> None:
    manager = manager_for(tmp_path / "empty")
    with pytest.raises(ExtensionNotFoundError):
        manager.load_extension("taskserv", "nothing-here")
    assert (manager.metrics.loads, manager.metrics.failures, manager.metrics.cache_hits) == (1, 1, 0)


def test_a_cached_load_takes_well_under_a_millisecond(tmp_path: Path, manager_for: Factory) -> None:
    exts = tmp_path / "exts"
    make_ext(exts, "aa", deps=["bb"])
    make_ext(exts, "bb")
    manager = manager_for(exts)
    manager.load_extension("taskserv", "aa")
    samples = []
    for _ in range(200):
        start = time.perf_counter()
        manager.load_extension("taskserv", "aa")
        samples.append(time.perf_counter() - start)
    assert sorted(samples)[100] < 0.001
    assert manager.metrics.cache_hits == 200


def test_a_load_without_version_is_remembered_so_the_next_one_is_a_hit(tmp_path: Path, manager_for: Factory) -> None:
    exts = tmp_path / "exts"
    make_ext(exts, "aa", "1.0.0")
    make_ext(exts, "aa", "1.2.0")
    manager = manager_for(exts)
    first = manager.load("taskserv", "aa")
    assert (first.cached, first.extension.metadata.version) == (False, "1.2.0")
    again = manager.load("taskserv", "aa")
    assert again.cached and again.extension is first.extension
    assert manager.load("taskserv", "aa", "^1.2").extension.key == "taskserv:aa:1.2.0"
    exact = manager.load("taskserv", "aa", "1.2.0")
    assert exact.cached


def test_dependencies_are_loaded_first_and_a_hit_keeps_them_recent(tmp_path: Path, manager_for: Factory) -> None:
    exts = tmp_path / "exts"
    make_ext(exts, "app", deps=["lib ^1"])
    make_ext(exts, "lib", "1.4.0", deps=["base"])
    make_ext(exts, "base")
    make_ext(exts, "other")
    make_ext(exts, "more")
    manager = manager_for(exts, cache_size=4)
    result = manager.load("taskserv", "app")
    assert [e.key for e in result.loaded] == ["taskserv:base:1.0.0", "taskserv:lib:1.4.0", "taskserv:app:1.0.0"]
    assert keys(manager) == ["taskserv:base:1.0.0", "taskserv:lib:1.4.0", "taskserv:app:1.0.0"]
    assert result.extension.metadata.dependencies == ("lib",)
    assert result.extension.dependency_keys == ("taskserv:lib:1.4.0",)
    assert manager.metrics.dependency_loads == 2 and manager.metrics.loads == 1
    manager.load_extension("taskserv", "other")
    assert manager.load("taskserv", "app").cached  # refreshes lib and app, not base (lib's own dependency)
    manager.load_extension("taskserv", "more")  # evicts base, the least recently used
    assert keys(manager) == ["taskserv:other:1.0.0", "taskserv:lib:1.4.0", "taskserv:app:1.0.0", "taskserv:more:1.0.0"]


def test_an_extension_with_its_dependencies_stays_whole_even_beyond_the_cache_size(
    tmp_path: Path, manager_for: Factory
) -> None:
    exts = tmp_path / "exts"
    make_ext(exts, "app", deps=["lib"])
    make_ext(exts, "lib")
    make_ext(exts, "solo")
    manager = manager_for(exts, cache_size=1)
    manager.load_extension("taskserv", "app")
    assert keys(manager) == ["taskserv:lib:1.0.0", "taskserv:app:1.0.0"]
    manager.load_extension("taskserv", "solo")
    assert keys(manager) == ["taskserv:solo:1.0.0"]
    assert manager.metrics.evictions == 2


def test_reload_reads_the_extension_again_and_bumps_loaded_at(tmp_path: Path, manager_for: Factory) -> None:
    exts = tmp_path / "exts"
    root = make_ext(exts, "aa", description="before")
    manager = manager_for(exts)
    first = manager.load_extension("taskserv", "aa")
    text = (root / "extension.toml").read_text().replace("before", "after")
    (root / "extension.toml").write_text(text)
    assert manager.load_extension("taskserv", "aa").metadata.description == "before"  # a hit reads nothing
    reloaded = manager.reload_extension("taskserv", "aa")
    assert reloaded.metadata.description == "after"
    assert reloaded.loaded_at > first.loaded_at
    assert manager.load_extension("taskserv", "aa") is reloaded
    assert manager.metrics.reloads == 1
    assert keys(manager) == ["taskserv:aa:1.0.0"]


def test_reloading_an_extension_that_is_not_loaded_is_refused(tmp_path: Path, manager_for: Factory) -> None:
    exts = tmp_path / "exts"
    make_ext(exts, "aa")
    manager = manager_for(exts)
    with pytest.raises(NotLoadedError) as caught:
        manager.reload_extension("taskserv", "aa")
    assert caught.value.code == "not_found"
    assert caught.value.details[0]["reason"] == "not_loaded"
    assert "module load taskserv aa" in caught.value.message


def test_reload_of_an_extension_loaded_in_two_versions_reloads_each_or_the_one_asked_for(
    tmp_path: Path, manager_for: Factory
) -> None:
    exts = tmp_path / "exts"
    make_ext(exts, "chrony", "4.5.0")
    make_ext(exts, "chrony", "4.5.2")
    manager = manager_for(exts)
    manager.load_extension("taskserv", "chrony", "4.5.2")
    old = manager.load_extension("taskserv", "chrony", "4.5.0")
    assert keys(manager) == ["taskserv:chrony:4.5.2", "taskserv:chrony:4.5.0"]

    both = manager.reload("taskserv", "chrony")
    assert [e.key for e in both.reloaded] == ["taskserv:chrony:4.5.0", "taskserv:chrony:4.5.2"]
    assert both.reload_message() == "Extension chrony reloaded (4.5.0, 4.5.2)"
    assert both.extension.key == "taskserv:chrony:4.5.0"  # the most recently used one
    assert all(e.loaded_at > old.loaded_at for e in both.reloaded)
    assert manager.metrics.reloads == 1

    one = manager.reload("taskserv", "chrony", "4.5.2")
    assert [e.key for e in one.reloaded] == ["taskserv:chrony:4.5.2"]
    assert one.reload_message() == "Extension chrony reloaded"
    assert manager.reload_extension("taskserv", "chrony", "=4.5.0").metadata.version == "4.5.0"

    with pytest.raises(NotLoadedError) as caught:
        manager.reload("taskserv", "chrony", "4.5.1")
    assert caught.value.message == (
        "taskserv chrony 4.5.1 is not loaded, so it cannot be reloaded "
        "(loaded versions: 4.5.0, 4.5.2; leave out --version to reload them all)"
    )
    assert caught.value.details[0]["loaded_versions"] == ["4.5.0", "4.5.2"]
    with pytest.raises(UsageError, match="version '\\^4' is not a version"):
        manager.reload("taskserv", "chrony", "^4")


def test_clear_cache_forgets_every_extension(tmp_path: Path, manager_for: Factory) -> None:
    exts = tmp_path / "exts"
    make_ext(exts, "aa")
    manager = manager_for(exts)
    manager.load_extension("taskserv", "aa")
    assert manager.is_extension_loaded("taskserv", "aa")
    assert not manager.is_extension_loaded("provider", "aa")
    manager.clear_cache()
    assert not manager.is_extension_loaded("taskserv", "aa")
    assert manager.list_loaded_extensions() == []
    assert not manager.load("taskserv", "aa").cached


# --- policy -------------------------------------------------------------------------------------------


@pytest.fixture
def policy_exts(tmp_path: Path) -> Path:
    exts = tmp_path / "exts"
    make_ext(exts, "app", deps=["lib"])
    make_ext(exts, "lib")
    make_ext(exts, "aws", type="provider")
    return exts


def test_full_mode_loads_anything_but_blocked_names(policy_exts: Path, manager_for: Factory) -> None:
    policy = LoadPolicy.from_env({"PROVISIONING_BLOCKED_EXTENSIONS": "aws"})
    manager = manager_for(policy_exts, policy=policy)
    assert manager.load_extension("taskserv", "app").metadata.name == "app"
    with pytest.raises(PolicyError) as caught:
        manager.load_extension("provider", "aws")
    assert caught.value.code == "forbidden"
    assert caught.value.details[0] | {"required_by": None} == {
        "reason": "blocked",
        "mode": "full",
        "type": "provider",
        "name": "aws",
        "required_by": None,
    }


def test_restricted_mode_loads_only_allowed_names_dependencies_included(
    policy_exts: Path, manager_for: Factory
) -> None:
    only_app = LoadPolicy.from_env(
        {"PROVISIONING_EXTENSION_MODE": "restricted", "PROVISIONING_ALLOWED_EXTENSIONS": "app"}
    )
    manager = manager_for(policy_exts, policy=only_app)
    with pytest.raises(PolicyError) as caught:
        manager.load_extension("taskserv", "app")
    assert caught.value.details[0]["reason"] == "not_allowed"
    assert caught.value.details[0]["name"] == "lib"
    assert caught.value.details[0]["required_by"] == "taskserv app 1.0.0"
    assert manager.list_loaded_extensions() == []  # checked before anything was loaded
    both = LoadPolicy.from_env(
        {"PROVISIONING_EXTENSION_MODE": "restricted", "PROVISIONING_ALLOWED_EXTENSIONS": "taskserv:app, lib"}
    )
    manager = manager_for(policy_exts, policy=both)
    assert manager.load_extension("taskserv", "app").metadata.name == "app"
    with pytest.raises(PolicyError):
        manager.load_extension("provider", "aws")
    every_taskserv = LoadPolicy.from_env(
        {"PROVISIONING_EXTENSION_MODE": "restricted", "PROVISIONING_ALLOWED_EXTENSIONS": "taskserv:*"}
    )
    assert manager_for(policy_exts, policy=every_taskserv).load_extension("taskserv", "app").metadata.name == "app"


def test_restricted_mode_with_an_empty_list_and_blocked_over_allowed(policy_exts: Path, manager_for: Factory) -> None:
    nothing = LoadPolicy.from_env({"PROVISIONING_EXTENSION_MODE": "restricted"})
    with pytest.raises(PolicyError, match="it lists nothing"):
        manager_for(policy_exts, policy=nothing).load_extension("taskserv", "lib")
    blocked = LoadPolicy.from_env(
        {
            "PROVISIONING_EXTENSION_MODE": "restricted",
            "PROVISIONING_ALLOWED_EXTENSIONS": "lib app",
            "PROVISIONING_BLOCKED_EXTENSIONS": "taskserv:lib",
        }
    )
    with pytest.raises(PolicyError) as caught:
        manager_for(policy_exts, policy=blocked).load_extension("taskserv", "app")
    assert (caught.value.details[0]["reason"], caught.value.details[0]["name"]) == ("blocked", "lib")


def test_disabled_mode_loads_nothing_but_lists_and_clears(policy_exts: Path, manager_for: Factory) -> None:
    manager = manager_for(policy_exts, policy=LoadPolicy.from_env({"PROVISIONING_EXTENSION_MODE": "disabled"}))
    with pytest.raises(PolicyError) as caught:
        manager.load_extension("taskserv", "lib")
    assert caught.value.details[0]["reason"] == "disabled"
    assert manager.list_loaded_extensions() == []
    manager.clear_cache()


def test_a_cached_extension_is_refused_by_a_runtime_whose_policy_blocks_it(
    policy_exts: Path, manager_for: Factory
) -> None:
    manager_for(policy_exts, persist=True).load_extension("taskserv", "app")
    strict = manager_for(
        policy_exts, persist=True, policy=LoadPolicy.from_env({"PROVISIONING_BLOCKED_EXTENSIONS": "lib"})
    )
    assert strict.is_extension_loaded("taskserv", "app")
    with pytest.raises(PolicyError, match=r"required by taskserv:app:1\.0\.0"):
        strict.load_extension("taskserv", "app", "1.0.0")
    with pytest.raises(PolicyError):
        strict.reload_extension("taskserv", "lib")


@pytest.mark.parametrize(
    ("environ", "where"),
    [
        ({"PROVISIONING_EXTENSION_MODE": "open"}, "PROVISIONING_EXTENSION_MODE"),
        ({"PROVISIONING_ALLOWED_EXTENSIONS": "etcd, Bad_Name"}, "PROVISIONING_ALLOWED_EXTENSIONS[1]"),
        ({"PROVISIONING_BLOCKED_EXTENSIONS": "widget:etcd"}, "PROVISIONING_BLOCKED_EXTENSIONS[0]"),
        ({"PROVISIONING_BLOCKED_EXTENSIONS": "*"}, "PROVISIONING_BLOCKED_EXTENSIONS[0]"),
    ],
)
def test_a_bad_policy_setting_is_a_usage_error_naming_it(environ: dict[str, str], where: str) -> None:
    with pytest.raises(UsageError) as caught:
        LoadPolicy.from_env(environ)
    assert caught.value.message.startswith(where)


def test_the_default_policy_is_full_with_empty_lists() -> None:
    assert LoadPolicy.from_env({}) == LoadPolicy("full", frozenset(), frozenset())


# --- discovery ----------------------------------------------------------------------------------------


def test_the_discovery_directories_come_in_the_spec_order(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    paths = default_search_paths(
        cwd=tmp_path / "project",
        user_home=tmp_path / "me",
        environ={"PROVISIONING_EXTENSIONS_PATH": f"{one}{os.pathsep}{os.pathsep}{two}"},
    )
    assert paths == [
        tmp_path / "project" / ".provisioning" / "extensions",
        tmp_path / "me" / ".provisioning-extensions",
        Path("/opt/provisioning-extensions"),
        one,
        two,
    ]


def test_the_same_extension_in_two_directories_is_taken_from_the_earlier(tmp_path: Path, manager_for: Factory) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    make_ext(first, "aa", "1.0.0")
    make_ext(second, "aa", "2.0.0")
    make_ext(second, "aa", "1.0.0", description="the later copy")
    manager = manager_for(first, second)
    ext = manager.load_extension("taskserv", "aa")
    assert ext.metadata.version == "1.0.0"  # the earlier directory wins, though the later has a newer one
    assert Path(ext.path) == first / "taskservs" / "aa" / "1.0.0"
    assert ext.source == "local"
    other = manager.load_extension("taskserv", "aa", "2.0.0")  # only in the later directory
    assert Path(other.path) == second / "taskservs" / "aa" / "2.0.0"


def test_the_discovery_path_and_the_directories_of_provisioning_extensions_path_are_searched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    make_ext(project / ".provisioning" / "extensions", "aa", description="the project's")
    make_ext(tmp_path / "later", "aa", description="the path's")
    make_ext(tmp_path / "later", "bb", description="only on the path")
    monkeypatch.chdir(project)
    monkeypatch.setenv("PROVISIONING_EXTENSIONS_PATH", str(tmp_path / "later"))
    manager = ExtensionManager(
        home=tmp_path / "home", client=None, runtime_version=None, policy=LoadPolicy(), persist=False
    )
    assert manager.search_paths[0] == project / ".provisioning" / "extensions"
    assert manager.search_paths[-1] == tmp_path / "later"
    assert manager.load_extension("taskserv", "aa").metadata.description == "the project's"
    assert manager.load_extension("taskserv", "bb").metadata.description == "only on the path"


def test_an_extension_directory_without_versions_is_found_too(tmp_path: Path, manager_for: Factory) -> None:
    exts = tmp_path / "exts"
    root = make_ext(exts, "flat", "0.3.0", versioned=False)
    ext = manager_for(exts).load_extension("taskserv", "flat")
    assert (ext.metadata.version, Path(ext.path)) == ("0.3.0", root)


def test_an_installed_extension_that_disagrees_with_its_directory_is_refused(
    tmp_path: Path, manager_for: Factory
) -> None:
    exts = tmp_path / "exts"
    root = make_ext(exts, "aa", "1.0.0")
    root.rename(root.parent / "1.0.1")
    with pytest.raises(Exception, match=r"does not match its directory: its version is 1\.0\.0, not 1\.0\.1") as caught:
        manager_for(exts).load_extension("taskserv", "aa")
    assert getattr(caught.value, "code", None) == "invalid_manifest"


# --- versions and the runtime's version -------------------------------------------------------------


@pytest.mark.parametrize(
    ("runtime", "expected"),
    [("1.1.0", "1.28.6"), ("1.2.0", "1.29.1"), (None, "1.29.1"), ("0.9.0", None)],
)
def test_no_version_means_the_newest_compatible_with_the_runtime(
    manager_for: Factory, runtime: str | None, expected: str | None
) -> None:
    manager = manager_for(BUNDLED, runtime_version=runtime)
    if expected is None:
        with pytest.raises(VersionNotFoundError) as caught:
            manager.load_extension("taskserv", "kubernetes")
        assert caught.value.available == ["1.28.6", "1.29.1"]
        assert "compatible with runtime 0.9.0" in caught.value.message
        return
    assert manager.load_extension("taskserv", "kubernetes").metadata.version == expected


def test_a_constraint_picks_the_newest_matching_version(manager_for: Factory) -> None:
    manager = manager_for(BUNDLED)
    assert manager.load_extension("taskserv", "kubernetes", "1.28").metadata.version == "1.28.6"
    assert manager.load_extension("taskserv", "kubernetes", "=1.29.1").metadata.version == "1.29.1"


# --- errors -------------------------------------------------------------------------------------------


def test_an_unknown_extension_is_not_found_with_close_names(manager_for: Factory) -> None:
    with pytest.raises(ExtensionNotFoundError) as caught:
        manager_for(BUNDLED).load_extension("taskserv", "kubernets")
    error = caught.value
    assert error.code == "not_found"
    assert error.suggestions[0] == "kubernetes"
    assert "did you mean 'kubernetes'" in error.message
    assert error.details[0]["reason"] == "extension_not_found"


def test_an_extension_of_another_type_is_not_found_and_says_its_type(manager_for: Factory) -> None:
    with pytest.raises(ExtensionNotFoundError, match="kubernetes is a taskserv") as caught:
        manager_for(BUNDLED).load_extension("provider", "kubernetes")
    assert caught.value.details[0]["reason"] == "wrong_type"


def test_a_missing_version_is_refused_listing_the_versions(manager_for: Factory) -> None:
    with pytest.raises(VersionNotFoundError) as caught:
        manager_for(BUNDLED).load_extension("taskserv", "kubernetes", "1.30.0")
    error = caught.value
    assert error.message == "taskserv kubernetes has no version 1.30.0 (available: 1.28.6, 1.29.1)"
    assert error.available == ["1.28.6", "1.29.1"]
    assert error.details[0]["reason"] == "version_not_found"


def test_a_version_the_runtime_cannot_run_is_refused_saying_why(manager_for: Factory) -> None:
    with pytest.raises(VersionNotFoundError) as caught:
        manager_for(BUNDLED, runtime_version="1.1.0").load_extension("taskserv", "kubernetes", "1.29.1")
    assert "1.29.1 needs provisioning >=1.2" in caught.value.message
    assert caught.value.details[0]["skipped"][0]["rule"] == "runtime"


def test_a_missing_dependency_is_a_dependency_error_naming_it(tmp_path: Path, manager_for: Factory) -> None:
    exts = tmp_path / "exts"
    make_ext(exts, "app", deps=["ghost ^1", "lib"])
    make_ext(exts, "lib")
    manager = manager_for(exts)
    with pytest.raises(DependencyError) as caught:
        manager.load_extension("taskserv", "app")
    error = caught.value
    assert error.code == "resolution_failed"
    assert error.missing == ["ghost"]
    assert "missing ghost" in error.message
    assert error.details[0]["reason"] == "unknown"
    assert manager.list_loaded_extensions() == []


def test_conflicting_dependencies_are_a_dependency_error_naming_them(tmp_path: Path, manager_for: Factory) -> None:
    exts = tmp_path / "exts"
    make_ext(exts, "app", deps=["left", "right"])
    make_ext(exts, "left", deps=["base ^1"])
    make_ext(exts, "right", deps=["base ^2"])
    make_ext(exts, "base", "1.5.0")
    make_ext(exts, "base", "2.1.0")
    with pytest.raises(DependencyError) as caught:
        manager_for(exts).load_extension("taskserv", "app")
    assert caught.value.conflicting == ["base"]
    assert "no version of base fits" in caught.value.message
    assert "available: 1.5.0, 2.1.0" in caught.value.message


def test_a_bad_name_or_type_is_a_usage_error(manager_for: Factory) -> None:
    manager = manager_for(BUNDLED)
    with pytest.raises(UsageError, match="did you mean 'cert-manager'"):
        manager.load_extension("taskserv", "cert_manager")
    with pytest.raises(UsageError, match="use one of provider, taskserv, cluster, template"):
        manager.load_extension("widget", "kubernetes")
    assert manager.load_extension("Taskservs", "etcd").metadata.extension_type == "taskserv"


def test_an_installed_package_tree_whose_files_changed_is_refused(tmp_path: Path, manager_for: Factory) -> None:
    from extensions.archive import build_package, safe_extract

    source = make_ext(tmp_path / "src", "aa")
    package = build_package(source, tmp_path / "dist")
    exts = tmp_path / "exts"
    safe_extract(package.path, exts / "taskservs" / "aa" / "1.0.0")
    manager = manager_for(exts)
    assert manager.load_extension("taskserv", "aa").metadata.name == "aa"
    (exts / "taskservs" / "aa" / "1.0.0" / "extra.nu").write_text("rm -rf /\n")
    with pytest.raises(IntegrityError, match=r"extra\.nu is not part of the package") as caught:
        manager.reload_extension("taskserv", "aa")
    assert caught.value.code == "integrity_error"


# --- Nushell ------------------------------------------------------------------------------------------


def test_the_nushell_module_must_parse_and_the_step_is_reported(tmp_path: Path, manager_for: Factory, nu: str) -> None:
    exts = tmp_path / "exts"
    make_ext(exts, "good", nu='export def hello []: nothing -> string { "hi" }\n')
    make_ext(exts, "bad", nu="export def broken [ {\n")
    manager = manager_for(exts, check_nushell=True, nu=nu)
    result = manager.load("taskserv", "good")
    assert [(c.check, c.path, c.status) for c in result.checks] == [("nushell", "nulib/good.nu", "passed")]
    with pytest.raises(LoadCheckError) as caught:
        manager.load("taskserv", "bad")
    assert caught.value.code == "check_failed"
    assert "nulib/bad.nu" in caught.value.message
    assert caught.value.details[0]["status"] == "failed"
    assert not manager.is_extension_loaded("taskserv", "bad")


def test_without_nushell_the_check_is_reported_as_skipped(
    tmp_path: Path, manager_for: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROVISIONING_NU", str(tmp_path / "no-nu"))
    exts = tmp_path / "exts"
    make_ext(exts, "bad", nu="export def broken [ {\n")
    result = manager_for(exts, check_nushell=True).load("taskserv", "bad")
    assert [(c.path, c.status, c.message) for c in result.checks] == [
        (
            "nulib",
            "skipped",
            f"PROVISIONING_NU={tmp_path / 'no-nu'} points at something that is not an executable: set it to the "
            "Nushell binary, or unset it to use nu from PATH",
        )
    ]


def test_the_bundled_kubernetes_parses_in_nushell(manager_for: Factory, nu: str) -> None:
    result = manager_for(BUNDLED, check_nushell=True, nu=nu, runtime_version="1.1.0").load("taskserv", "kubernetes")
    assert {c.path for c in result.checks} == {"nulib/containerd.nu", "nulib/etcd.nu", "nulib/kubernetes.nu"}
    assert {c.status for c in result.checks} == {"passed"}


# --- state shared between processes -----------------------------------------------------------------


def test_another_manager_on_the_same_home_sees_what_was_loaded(tmp_path: Path, manager_for: Factory) -> None:
    exts = tmp_path / "exts"
    make_ext(exts, "app", deps=["lib"])
    make_ext(exts, "lib")
    first = manager_for(exts, persist=True)
    loaded = first.load_extension("taskserv", "app")
    state = json.loads((tmp_path / "home" / "runtime" / "state.json").read_text())
    assert [e["key"] for e in state["extensions"]] == ["taskserv:lib:1.0.0", "taskserv:app:1.0.0"]
    second = manager_for(exts, persist=True)
    assert [e.to_dict() for e in second.list_loaded_extensions()] == [
        e.to_dict() for e in first.list_loaded_extensions()
    ]
    assert second.load("taskserv", "app", "1.0.0").cached
    reloaded = second.reload_extension("taskserv", "app")
    assert reloaded.loaded_at > loaded.loaded_at
    assert first.list_loaded_extensions()[-1].loaded_at == reloaded.loaded_at  # the first catches up
    second.clear_cache()
    assert first.list_loaded_extensions() == []


def test_a_loaded_extension_whose_directory_has_gone_is_dropped_from_the_state(
    tmp_path: Path, manager_for: Factory
) -> None:
    exts = tmp_path / "exts"
    make_ext(exts, "aa")
    make_ext(exts, "bb")
    first = manager_for(exts, persist=True)
    first.load_extension("taskserv", "aa")
    first.load_extension("taskserv", "bb")
    shutil.rmtree(exts / "taskservs" / "aa")
    assert keys(manager_for(exts, persist=True)) == ["taskserv:bb:1.0.0"]


# --- against a live registry ------------------------------------------------------------------------


@pytest.fixture
def registry_manager(examples_registry: LiveRegistry, tmp_path: Path) -> Iterator[Callable[..., ExtensionManager]]:
    clients: list[RegistryClient] = []

    def build(**kwargs: object) -> ExtensionManager:
        client = RegistryClient(
            examples_registry.url, cache_dir=tmp_path / "home" / "cache", trust_home=tmp_path / "home"
        )
        clients.append(client)
        options: dict[str, object] = {
            "home": tmp_path / "home",
            "client": client,
            "runtime_version": None,
            "search_paths": [],
            "policy": LoadPolicy(),
            "check_nushell": False,
        }
        options.update(kwargs)
        return ExtensionManager(**options)  # type: ignore[arg-type]

    yield build
    for client in clients:
        client.close()


@pytest.mark.parametrize(("runtime", "expected"), [("1.1.0", "1.28.6"), ("1.2.0", "1.29.1")])
def test_from_the_registry_no_version_means_the_newest_compatible(
    registry_manager: Callable[..., ExtensionManager], tmp_path: Path, runtime: str, expected: str
) -> None:
    manager = registry_manager(runtime_version=runtime)
    result = manager.load("taskserv", "kubernetes")
    ext = result.extension
    assert (ext.metadata.version, ext.source) == (expected, "registry")
    assert Path(ext.path) == tmp_path / "home" / "store" / "trees" / "taskserv" / "kubernetes" / expected
    assert len(ext.sha256) == 64
    assert ext.metadata.dependencies == ("containerd", "etcd")
    assert [e.metadata.name for e in result.loaded] == ["containerd", "etcd", "kubernetes"]
    assert (Path(ext.path) / "extension.toml").is_file()


def test_from_the_registry_dependencies_come_first_for_a_cluster(
    registry_manager: Callable[..., ExtensionManager],
) -> None:
    result = registry_manager(runtime_version="1.1.0").load("cluster", "kubernetes-ha")
    order = [e.key for e in result.loaded]
    assert order[-1] == "cluster:kubernetes-ha:1.0.0"
    assert order.index("taskserv:kubernetes:1.28.6") > order.index("taskserv:etcd:3.5.12")
    assert order.index("taskserv:cilium:1.14.6") > order.index("taskserv:kubernetes:1.28.6")


def test_an_installed_extension_wins_over_the_registry(
    registry_manager: Callable[..., ExtensionManager], tmp_path: Path
) -> None:
    exts = tmp_path / "exts"
    shutil.copytree(BUNDLED / "taskservs" / "etcd" / "3.5.9", exts / "taskservs" / "etcd" / "3.5.9")
    manager = registry_manager(search_paths=[exts])
    ext = manager.load_extension("taskserv", "etcd")
    assert (ext.metadata.version, ext.source) == ("3.5.9", "local")  # the registry has 3.5.12
    newer = manager.load_extension("taskserv", "etcd", "3.5.12")  # not installed: from the registry
    assert newer.source == "registry"


def test_from_the_registry_unknown_names_and_versions_are_specific_errors(
    registry_manager: Callable[..., ExtensionManager],
) -> None:
    manager = registry_manager()
    with pytest.raises(ExtensionNotFoundError) as unknown:
        manager.load_extension("taskserv", "postgress")
    assert "postgresql" in unknown.value.suggestions
    with pytest.raises(VersionNotFoundError) as version:
        manager.load_extension("taskserv", "etcd", "3.4.0")
    assert version.value.available == ["3.5.9", "3.5.12"]


def test_a_tampered_store_tree_is_an_integrity_failure(
    registry_manager: Callable[..., ExtensionManager], tmp_path: Path
) -> None:
    manager = registry_manager()
    ext = manager.load_extension("taskserv", "etcd", "3.5.12")
    tree = Path(ext.path)
    target = next(p for p in sorted(tree.rglob("*.nu")))
    target.write_text(target.read_text() + "\n# changed\n")
    with pytest.raises(IntegrityError) as caught:
        manager.reload_extension("taskserv", "etcd")
    assert caught.value.code == "integrity_error"
    assert f"{target} was changed" in caught.value.message
    assert caught.value.details[0]["reason"] == "integrity"
    shutil.rmtree(tree)  # the remedy the message gives: the store unpacks a fresh copy
    assert manager.reload_extension("taskserv", "etcd").metadata.version == "3.5.12"
    assert not target.read_text().endswith("# changed\n")


def test_a_tampered_stored_package_is_an_integrity_failure(
    registry_manager: Callable[..., ExtensionManager], tmp_path: Path
) -> None:
    manager = registry_manager()
    ext = manager.load_extension("taskserv", "redis")
    package = next((tmp_path / "home" / "store" / "packages").rglob(f"{ext.sha256}.tar.gz"))
    data = bytearray(package.read_bytes())
    data[-10] ^= 0xFF
    package.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match="does not match its sha256"):
        manager.reload_extension("taskserv", "redis")
