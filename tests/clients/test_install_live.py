"""`taskserv|cluster|providers create`, `extension sync`, `list`, `providers validate` against a live
registry (gunicorn processes started by the tests), driven as users drive them."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from clients import registry_client
from clients.lockfile import LockedExtension, Lockfile
from clients.store import Store
from tests.clients.client_tools import (
    EXAMPLES,
    MisbehavingProxy,
    Result,
    files_under,
    leftovers,
    run,
    start_cli,
)
from tests.factories import write_extension
from tests.hostile_archives import symlink_member

if TYPE_CHECKING:
    from tests.live_registry import LiveRegistry
    from tests.services import S3Bucket


Capsys = pytest.CaptureFixture[str]
KUBERNETES_SET = ["containerd", "etcd", "kubernetes"]


def index_entry(registry: LiveRegistry, name: str, version: str) -> dict[str, object]:
    document = httpx.get(f"{registry.url}/api/v1/index/{name}", timeout=30).json()["data"]
    return next(v for v in document["versions"] if v["version"] == version)


def create(capsys: Capsys, registry_url: str, home: Path, infra: Path, *extra: str) -> Result:
    return run(capsys, "--registry", registry_url, "--home", home, "taskserv", "create", *extra, "--infra", infra)


def sync(capsys: Capsys, home: Path, infra: Path, *extra: str) -> Result:
    return run(capsys, "--home", home, "extension", "sync", "--infra", infra, *extra)


def installed_names(infra: Path, kind: str = "taskservs") -> list[str]:
    root = infra / "extensions" / kind
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


def store_packages(home: Path) -> list[str]:
    return files_under(home / "store" / "packages")


@pytest.fixture
def k8s(capsys: Capsys, examples_registry: LiveRegistry, tmp_path: Path) -> tuple[Path, Path]:
    """kubernetes 1.28.6 (runtime 1.0.0) and its dependencies installed into tmp/infra with tmp/home."""
    home, infra = tmp_path / "home", tmp_path / "infra"
    result = create(capsys, examples_registry.url, home, infra, "kubernetes", "--runtime-version", "1.0.0")
    assert result.code == 0, result.err
    return home, infra


# --- create ------------------------------------------------------------------------------------------


def test_taskserv_create_installs_kubernetes_with_its_dependencies_and_writes_the_lock(
    capsys: Capsys, examples_registry: LiveRegistry, tmp_path: Path
) -> None:
    home, infra = tmp_path / "home", tmp_path / "infra"
    result = create(capsys, examples_registry.url, home, infra, "kubernetes", "--runtime-version", "1.0.0")
    assert result.code == 0, result.err
    assert installed_names(infra) == KUBERNETES_SET
    lock = Lockfile.load(infra / "extensions.lock")
    assert lock.registry == examples_registry.url
    versions = {"containerd": "1.7.13", "etcd": "3.5.12", "kubernetes": "1.28.6"}  # 1.29.1 needs runtime >=1.2
    assert lock.pins() == versions
    for entry in lock.extensions:
        assert entry.type == "taskserv"
        assert entry.sha256 == index_entry(examples_registry, entry.name, entry.version)["sha256"]
        assert entry.source == (
            f"{examples_registry.url}/api/v1/extensions/{entry.name}/versions/{entry.version}/download"
        )
        source = EXAMPLES / "taskservs" / entry.name / entry.version
        placed = infra / "extensions" / "taskservs" / entry.name
        assert (placed / "extension.toml").read_bytes() == (source / "extension.toml").read_bytes()
        assert json.loads((placed / "MANIFEST.json").read_text())["version"] == entry.version
    assert lock.get("kubernetes") == LockedExtension(
        name="kubernetes",
        version="1.28.6",
        type="taskserv",
        sha256=lock.get("kubernetes").sha256,  # type: ignore[union-attr]
        source=lock.get("kubernetes").source,  # type: ignore[union-attr]
        dependencies=("containerd ^1.7", "etcd ^3.5"),
    )
    assert "wrote" in result.out and "installed" in result.out
    assert "the host needs these system packages: " in result.out and "conntrack" in result.out
    assert store_packages(home) and leftovers(home, infra) == []


def test_running_create_again_changes_nothing(
    capsys: Capsys, examples_registry: LiveRegistry, k8s: tuple[Path, Path]
) -> None:
    home, infra = k8s
    lock = infra / "extensions.lock"
    before = {p: p.stat().st_mtime_ns for p in infra.rglob("*")}
    result = create(capsys, examples_registry.url, home, infra, "kubernetes", "--runtime-version", "1.0.0")
    assert result.code == 0, result.err
    assert f"nothing to do: {infra} already has exactly this" in result.out
    assert {p: p.stat().st_mtime_ns for p in infra.rglob("*")} == before
    assert lock.exists()


def test_create_keeps_what_the_lock_pins_and_updates_what_no_longer_fits(
    capsys: Capsys, examples_registry: LiveRegistry, k8s: tuple[Path, Path]
) -> None:
    home, infra = k8s
    # cilium 1.15.1 needs kubernetes >=1.29: the locked 1.28.6 cannot stay.
    result = run(capsys, "--registry", examples_registry.url, "--home", home, "--output", "json",
                 "taskserv", "create", "cilium", "--infra", infra)  # fmt: skip
    assert result.code == 0, result.err
    data = result.json()["data"]
    actions = {e["name"]: (e["version"], e["action"], e["previous"]) for e in data["extensions"]}
    assert actions == {
        "containerd": ("1.7.13", "unchanged", None),
        "etcd": ("3.5.12", "unchanged", None),
        "kubernetes": ("1.29.1", "upgraded", "1.28.6"),
        "cilium": ("1.15.1", "installed", None),
    }
    assert data["locked_ignored"][0]["name"] == "kubernetes"
    assert Lockfile.load(infra / "extensions.lock").pins()["kubernetes"] == "1.29.1"
    placed = infra / "extensions" / "taskservs" / "kubernetes"
    assert json.loads((placed / "MANIFEST.json").read_text())["version"] == "1.29.1"
    assert installed_names(infra) == ["cilium", *KUBERNETES_SET]
    assert leftovers(home, infra) == []


def test_an_explicit_request_is_kept_a_later_create_conflicting_with_it_installs_nothing(
    capsys: Capsys, examples_registry: LiveRegistry, tmp_path: Path
) -> None:
    home, infra = tmp_path / "home", tmp_path / "infra"
    first = create(capsys, examples_registry.url, home, infra, "containerd", "--version", "^2")
    assert first.code == 0, first.err
    lock = infra / "extensions.lock"
    before = lock.read_bytes()
    assert Lockfile.load(lock).requested == ["containerd ^2"]

    conflict = create(capsys, examples_registry.url, home, infra, "kubernetes")
    assert conflict.code == 1
    assert conflict.err.splitlines()[0] == (
        "error: cannot resolve kubernetes, containerd ^2: you asked for containerd ^2; kubernetes 1.29.1 and "
        "1.28.6 require containerd ^1.7; no version of containerd satisfies all of these (available: 1.7.13, 2.0.2) "
        f"({lock} keeps the earlier requests containerd ^2: to change one, create it again with another --version); "
        f"nothing was installed into {infra}"
    )
    assert lock.read_bytes() == before
    assert installed_names(infra) == ["containerd"]
    placed = infra / "extensions" / "taskservs" / "containerd" / "MANIFEST.json"
    assert json.loads(placed.read_text())["version"] == "2.0.2"

    # Asking for containerd again replaces the request; the version change is said as it is.
    changed = run(capsys, "--registry", examples_registry.url, "--home", home, "--output", "json",
                  "taskserv", "create", "containerd", "--version", "^1.7", "--infra", infra)  # fmt: skip
    assert changed.code == 0, changed.err
    placed_now = changed.json()["data"]["extensions"]
    assert [(e["name"], e["version"], e["action"], e["previous"]) for e in placed_now] == [
        ("containerd", "1.7.13", "downgraded", "2.0.2")
    ]
    table = create(capsys, examples_registry.url, home, infra, "containerd", "--version", "^2")
    assert [line.split()[:6] for line in table.out.splitlines()[1:2]] == [
        ["containerd", "2.0.2", "taskserv", "upgraded", "from", "1.7.13"]
    ]
    both = create(capsys, examples_registry.url, home, infra, "containerd", "--version", "^1.7")
    assert both.code == 0, both.err
    assert [line.split()[:6] for line in both.out.splitlines()[1:2]] == [
        ["containerd", "1.7.13", "taskserv", "downgraded", "from", "2.0.2"]
    ]
    made = create(capsys, examples_registry.url, home, infra, "kubernetes", "--runtime-version", "1.0.0")
    assert made.code == 0, made.err
    assert Lockfile.load(lock).requested == ["containerd ^1.7", "kubernetes"]
    assert Lockfile.load(lock).pins() == {"containerd": "1.7.13", "etcd": "3.5.12", "kubernetes": "1.28.6"}


def test_the_lockfile_in_the_docs_is_what_create_writes(
    capsys: Capsys, examples_registry: LiveRegistry, tmp_path: Path
) -> None:
    home, infra = tmp_path / "home", tmp_path / "infra"
    assert create(capsys, examples_registry.url, home, infra, "containerd", "--version", "^1.7").code == 0
    assert create(capsys, examples_registry.url, home, infra, "kubernetes", "--version", "1.28.6").code == 0
    written = (infra / "extensions.lock").read_text().replace(examples_registry.url, "http://127.0.0.1:8000")
    docs = (EXAMPLES.parent / "docs" / "client.md").read_text()
    shown = docs.split("```toml\n", 1)[1].split("```", 1)[0]
    assert shown == written


def test_a_lockfile_without_requested_is_read_and_keeps_everything_locked(
    capsys: Capsys, examples_registry: LiveRegistry, k8s: tuple[Path, Path]
) -> None:
    home, infra = k8s
    lock = infra / "extensions.lock"
    old = Lockfile(registry=examples_registry.url, extensions=Lockfile.load(lock).extensions)
    text = old.dumps().replace("requested = []\n", "")  # as written before `requested` existed
    assert "requested" not in text
    lock.write_text(text)
    assert Lockfile.load(lock).requested == []
    result = create(capsys, examples_registry.url, home, infra, "redis")
    assert result.code == 0, result.err
    assert Lockfile.load(lock).requested == ["redis"]
    assert Lockfile.load(lock).pins() == {
        "containerd": "1.7.13",
        "etcd": "3.5.12",
        "kubernetes": "1.28.6",
        "redis": "7.2.4",
    }


def test_cluster_create_places_each_extension_under_its_own_kind(
    capsys: Capsys, examples_registry: LiveRegistry, tmp_path: Path
) -> None:
    infra = tmp_path / "infra"
    result = run(capsys, "--registry", examples_registry.url, "--home", tmp_path / "home",
                 "cluster", "create", "kubernetes-single", "--infra", infra, "--runtime-version", "1.0.0")  # fmt: skip
    assert result.code == 0, result.err
    assert installed_names(infra, "clusters") == ["kubernetes-single"]
    assert installed_names(infra) == KUBERNETES_SET


def test_create_refuses_an_extension_of_another_kind_and_installs_nothing(
    capsys: Capsys, examples_registry: LiveRegistry, tmp_path: Path
) -> None:
    infra = tmp_path / "infra"
    result = run(capsys, "--registry", examples_registry.url, "--home", tmp_path / "home",
                 "cluster", "create", "etcd", "--infra", infra)  # fmt: skip
    assert result.code == 1
    assert result.err.startswith("error: etcd is a taskserv, not a cluster: use `provisioning taskserv create etcd`")
    assert f"nothing was installed into {infra}" in result.err
    assert not infra.exists()


def _taskserv_source(
    root: Path, name: str, *, provides: list[str], version: str = "1.0.0", provisioning: str = ">=1.0.0"
) -> Path:
    source = root / f"{name}-{version}"
    (source / "nulib").mkdir(parents=True)
    (source / "extension.toml").write_text(
        f"""[extension]
name = "{name}"
version = "{version}"
description = "A taskserv of the client's lookup-order test"
type = "taskserv"
license = "MIT"

[compatibility]
provisioning_version = "{provisioning}"

[provides]
taskservs = {json.dumps(provides)}
""",
        encoding="utf-8",
    )
    (source / "nulib" / "main.nu").write_text("export def hello [] { 'hello' }\n", encoding="utf-8")
    return source


def test_create_installs_the_provider_of_a_name_before_an_extension_merely_named_so(
    capsys: Capsys, live_registry: LiveRegistry, tmp_path: Path
) -> None:
    """The client's order is the registry's (its lookup and its install plan): an extension that
    provides taskserv NAME wins over an extension called NAME that does not provide it, online and
    offline. (The registry refuses such a name from another owner; here one owner has both.)"""
    home = tmp_path / "home"
    live_registry.manage("publish", "--user", "bob", str(_taskserv_source(tmp_path, "kubernetes", provides=[])))
    # Before any extension provides it, the taskserv kubernetes is the extension of that name.
    first = create(capsys, live_registry.url, home, tmp_path / "first", "kubernetes")
    assert first.code == 0, first.err
    assert Lockfile.load(tmp_path / "first" / "extensions.lock").requested == ["kubernetes"]
    assert installed_names(tmp_path / "first") == ["kubernetes"]

    live_registry.manage(
        "publish", "--user", "bob", str(_taskserv_source(tmp_path, "k8s-pack", provides=["kubernetes"]))
    )
    plan = httpx.post(
        f"{live_registry.url}/api/v1/extensions/taskservs/install", json={"name": "kubernetes"}, timeout=30
    ).json()["data"]
    lookup = httpx.get(f"{live_registry.url}/api/v1/extensions/taskserv/kubernetes", timeout=30).json()["data"]
    assert (plan["extension"], lookup["name"]) == ("k8s-pack", "k8s-pack")

    online = run(capsys, "--registry", live_registry.url, "--home", home, "--output", "json",
                 "taskserv", "create", "kubernetes", "--infra", tmp_path / "second")  # fmt: skip
    assert online.code == 0, online.err
    assert online.json()["data"]["requested"] == {
        "type": "taskserv",
        "name": "kubernetes",
        "extension": "k8s-pack",
        "version": "1.0.0",
    }
    assert installed_names(tmp_path / "second") == ["k8s-pack"]

    # Offline, both index documents are cached; the same rule picks the provider.
    assert {"k8s-pack", "kubernetes"} <= {p.stem for p in (home / "cache" / "index").rglob("*.json")}
    offline = create(capsys, live_registry.url, home, tmp_path / "third", "kubernetes", "--offline")
    assert offline.code == 0, offline.err
    assert installed_names(tmp_path / "third") == ["k8s-pack"]
    assert Lockfile.load(tmp_path / "third" / "extensions.lock").requested == ["k8s-pack"]


def test_a_version_of_the_provider_that_does_not_provide_the_name_is_refused_naming_those_that_do(
    capsys: Capsys, live_registry: LiveRegistry, tmp_path: Path
) -> None:
    home, infra = tmp_path / "home", tmp_path / "infra"
    for version, provides in (("1.0.0", []), ("1.1.0", ["gateway"]), ("1.2.0", ["gateway"])):
        needs = ">=1.0.0" if version == "1.0.0" else ">=1.2.0"
        source = _taskserv_source(tmp_path, "gateway-pack", provides=provides, version=version, provisioning=needs)
        live_registry.manage("publish", "--user", "bob", str(source))

    # Asked for versions that include the providing ones, which the runtime rules out: no suggestion
    # that would fail too.
    ruled_out = create(
        capsys, live_registry.url, home, infra, "gateway", "--version", "^1", "--runtime-version", "1.1.0"
    )
    assert ruled_out.code == 1
    assert " ".join(ruled_out.err.split()) == (
        "error: gateway-pack 1.0.0 (--version ^1) does not provide taskserv 'gateway'; its versions from 1.1.0 do, "
        "but none of them fits here (the runtime's version and the other extensions' constraints): see "
        f"`provisioning extension info gateway-pack`; nothing was installed into {infra}"
    )
    assert not infra.exists()

    asked = create(capsys, live_registry.url, home, infra, "gateway", "--version", "1.0.0")
    assert asked.code == 1
    assert " ".join(asked.err.split()) == (
        "error: gateway-pack 1.0.0 (--version 1.0.0) does not provide taskserv 'gateway'; its versions from 1.1.0 "
        f"do: create it with --version '>=1.1.0'; nothing was installed into {infra}"
    )
    assert not infra.exists()

    # A lockfile that keeps the older version: said, and nothing changes.
    kept = create(capsys, live_registry.url, home, infra, "gateway-pack", "--version", "1.0.0")
    assert kept.code == 0, kept.err
    lock = (infra / "extensions.lock").read_text()
    again = create(capsys, live_registry.url, home, infra, "gateway")
    assert again.code == 1
    assert " ".join(again.err.split()) == (
        f"error: {infra / 'extensions.lock'} keeps gateway-pack at 1.0.0, which does not provide taskserv "
        f"'gateway'; its versions from 1.1.0 do: create it with --version '>=1.1.0'; nothing was installed into "
        f"{infra}"
    )
    assert (infra / "extensions.lock").read_text() == lock

    fixed = create(capsys, live_registry.url, home, infra, "gateway", "--version", ">=1.1.0")
    assert fixed.code == 0, fixed.err
    assert Lockfile.load(infra / "extensions.lock").pins()["gateway-pack"] == "1.2.0"


def test_a_version_of_another_type_is_refused_naming_the_versions_of_this_type(
    capsys: Capsys, live_registry: LiveRegistry, tmp_path: Path
) -> None:
    """shifty was a cluster in 1.0.0 and is a taskserv from 2.0.0: `taskserv create shifty --version
    1.0.0` points to 2.0.0 (as the registry's install plan does), not to `cluster create shifty`,
    whose lookup finds a taskserv."""
    for version, type in (("1.0.0", "cluster"), ("2.0.0", "taskserv")):
        live_registry.manage("publish", "--user", "bob", str(write_extension(tmp_path, "shifty", version, type=type)))
    home, infra = tmp_path / "home", tmp_path / "infra"
    result = create(capsys, live_registry.url, home, infra, "shifty", "--version", "1.0.0")
    assert result.code == 1
    assert " ".join(result.err.split()) == (
        "error: shifty 1.0.0 (--version 1.0.0), a cluster, does not provide taskserv 'shifty'; its versions from "
        f"2.0.0 do: create it with --version '>=2.0.0'; nothing was installed into {infra}"
    )
    assert not infra.exists()
    assert create(capsys, live_registry.url, home, infra, "shifty").code == 0


def test_an_unknown_taskserv_is_refused_with_close_names(
    capsys: Capsys, examples_registry: LiveRegistry, tmp_path: Path
) -> None:
    result = create(capsys, examples_registry.url, tmp_path / "home", tmp_path / "infra", "kubernets")
    assert result.code == 1
    assert result.err.splitlines()[0] == (
        f"error: no taskserv named 'kubernets' in the registry at {examples_registry.url} "
        f"(did you mean kubernetes?); nothing was installed into {tmp_path / 'infra'}"
    )


def test_a_resolution_failure_prints_the_explanation_and_installs_nothing(
    capsys: Capsys, examples_registry: LiveRegistry, tmp_path: Path
) -> None:
    infra = tmp_path / "infra"
    result = create(capsys, examples_registry.url, tmp_path / "home", infra, "cilium", "--runtime-version", "1.0.0",
                    "--version", "1.15.1")  # fmt: skip
    assert result.code == 1
    assert result.err.splitlines() == [
        "error: cannot resolve cilium 1.15.1: cilium 1.15.1 requires kubernetes >=1.29, but no version of kubernetes "
        "matches (available: 1.28.6, 1.29.1; skipped: 1.29.1 (needs provisioning >=1.2, the runtime is 1.0.0)); "
        f"nothing was installed into {infra}",
        "  - you asked for cilium 1.15.1 -> cilium 1.15.1 -> kubernetes >=1.29",  # the chain; the rest is said
    ]
    assert not infra.exists()
    json_result = create(capsys, examples_registry.url, tmp_path / "home", infra, "cilium", "--runtime-version",
                         "1.0.0", "--version", "1.15.1", "--output", "json")  # fmt: skip
    error = json_result.json()["error"]
    assert error["code"] == "resolution_failed" and error["details"][0]["reason"]


def test_a_resolution_failure_is_said_once(capsys: Capsys, examples_registry: LiveRegistry, tmp_path: Path) -> None:
    infra = tmp_path / "infra"
    result = create(capsys, examples_registry.url, tmp_path / "home", infra, "kubernetes", "--version", "9")
    assert result.code == 1
    assert result.err == (
        "error: cannot resolve kubernetes 9: you asked for kubernetes 9, but no version of kubernetes matches "
        f"(available: 1.28.6, 1.29.1); nothing was installed into {infra}\n"
    )


def test_offline_create_works_from_the_cache_and_the_store_only(
    capsys: Capsys, examples_registry: LiveRegistry, k8s: tuple[Path, Path], tmp_path: Path
) -> None:
    home, _ = k8s
    other = tmp_path / "offline-infra"
    # --offline: only the index cache (kept per registry) and the store are used, never the network.
    result = create(capsys, examples_registry.url, home, other, "kubernetes", "--runtime-version", "1.0.0",
                    "--offline")  # fmt: skip
    assert result.code == 0, result.err
    assert installed_names(other) == KUBERNETES_SET
    missing = create(capsys, examples_registry.url, tmp_path / "empty-home", tmp_path / "x", "etcd", "--offline")
    assert missing.code == 1
    assert "offline: no cached index document names or provides taskserv 'etcd'" in missing.err
    assert not (tmp_path / "x").exists()


# --- sync --------------------------------------------------------------------------------------------


def test_sync_installs_exactly_the_lockfile_and_again_is_a_no_op(
    capsys: Capsys, examples_registry: LiveRegistry, k8s: tuple[Path, Path], tmp_path: Path
) -> None:
    _, infra = k8s
    second, fresh_home = tmp_path / "second", tmp_path / "fresh-home"
    second.mkdir()
    shutil.copy(infra / "extensions.lock", second / "extensions.lock")
    result = sync(capsys, fresh_home, second)  # downloads from the lockfile's registry
    assert result.code == 0, result.err
    assert files_under(second) == files_under(infra)
    assert (second / "extensions.lock").read_bytes() == (infra / "extensions.lock").read_bytes()
    before = {p: p.stat().st_mtime_ns for p in second.rglob("*")}
    again = sync(capsys, fresh_home, second)
    assert again.code == 0 and "nothing to do" in again.out
    assert {p: p.stat().st_mtime_ns for p in second.rglob("*")} == before


def test_sync_puts_back_an_installed_file_that_was_changed(capsys: Capsys, k8s: tuple[Path, Path]) -> None:
    home, infra = k8s
    changed = infra / "extensions" / "taskservs" / "etcd" / "extension.toml"
    original = changed.read_bytes()
    changed.write_text("# edited by hand\n")
    listing = run(capsys, "--home", home, "taskserv", "list", "--infra", infra)
    assert listing.code == 1  # as `providers validate`: a tree that is not what the lockfile pins fails
    assert [line.split()[:3] for line in listing.out.splitlines()[1:]] == [
        ["containerd", "1.7.13", "ok"],
        ["etcd", "3.5.12", "modified"],
        ["kubernetes", "1.28.6", "ok"],
    ]
    assert listing.err.splitlines()[0] == (
        f"error: 1 of 3 taskservs in {infra} are not as extensions.lock pins them: "
        f"restore them with `provisioning extension sync --infra {infra}`"
    )
    as_json = run(capsys, "--home", home, "--output", "json", "taskserv", "list", "--infra", infra)
    assert (as_json.code, as_json.json()["error"]["code"]) == (1, "integrity_error")  # one envelope, the error
    result = sync(capsys, home, infra, "--offline")
    assert result.code == 0, result.err
    assert changed.read_bytes() == original
    rows = [line.split()[:4] for line in result.out.splitlines()[1:4]]
    assert rows == [
        ["containerd", "1.7.13", "taskserv", "unchanged"],
        ["etcd", "3.5.12", "taskserv", "restored"],  # the same version put back, not "updated from 3.5.12"
        ["kubernetes", "1.28.6", "taskserv", "unchanged"],
    ]


def test_sync_with_a_tampered_store_file_fails_and_installs_nothing(
    capsys: Capsys, k8s: tuple[Path, Path], tmp_path: Path
) -> None:
    home, infra = k8s
    lock = Lockfile.load(infra / "extensions.lock")
    package = Store(home).package_path(lock.get("kubernetes").sha256)  # type: ignore[union-attr]
    data = bytearray(package.read_bytes())
    data[len(data) // 2] ^= 0x01
    package.write_bytes(bytes(data))
    second = tmp_path / "second"
    second.mkdir()
    shutil.copy(infra / "extensions.lock", second / "extensions.lock")
    result = sync(capsys, home, second)
    assert result.code == 1
    assert result.err.startswith(f"error: the stored package {package} (kubernetes 1.28.6) does not match its sha256")
    assert f"nothing was installed into {second}" in result.err
    assert files_under(second) == ["extensions.lock"]
    as_json = sync(capsys, home, second, "--output", "json").json()
    assert as_json["success"] is False and as_json["error"]["code"] == "integrity_error"


def test_sync_with_a_tampered_lockfile_fails_and_installs_nothing(
    capsys: Capsys, k8s: tuple[Path, Path], tmp_path: Path
) -> None:
    home, infra = k8s
    text = (infra / "extensions.lock").read_text()
    lock = Lockfile.load(infra / "extensions.lock")
    real = lock.get("kubernetes").sha256  # type: ignore[union-attr]
    forged = hashlib.sha256(b"not the package").hexdigest()
    second = tmp_path / "second"
    second.mkdir()
    (second / "extensions.lock").write_text(text.replace(real, forged))
    fresh_home = tmp_path / "fresh-home"
    result = sync(capsys, fresh_home, second)
    assert result.code == 1
    # Refused before any download: the signed index lists another sha256 (SPEC 6.1).
    assert result.err.startswith("error: hash mismatch: kubernetes 1.28.6 is expected with sha256 ")
    assert f"sha256 {forged}, but the signed metadata of {lock.registry} lists sha256 {real}" in result.err
    assert f"nothing was installed into {second}" in result.err
    assert files_under(second) == ["extensions.lock"]
    assert forged not in " ".join(store_packages(fresh_home))
    assert leftovers(fresh_home, second) == []

    # An entry pointing at another package the store holds is caught too.
    etcd = lock.get("etcd").sha256  # type: ignore[union-attr]
    (second / "extensions.lock").write_text(text.replace(real, etcd))
    result = sync(capsys, home, second, "--offline")
    assert result.code == 1  # against the cached signed metadata, offline
    assert f"hash mismatch: kubernetes 1.28.6 is expected with sha256 {etcd}, but the signed metadata" in result.err
    result = sync(capsys, home, second, "--offline", "--no-verify")
    assert result.code == 1  # and, unverified, by the store's own check of what the package holds
    assert f"the package with sha256 {etcd} holds etcd 3.5.12, not kubernetes 1.28.6" in result.err
    assert files_under(second) == ["extensions.lock"]


def test_sync_refuses_an_inconsistent_lockfile(capsys: Capsys, k8s: tuple[Path, Path], tmp_path: Path) -> None:
    home, infra = k8s
    lock = Lockfile.load(infra / "extensions.lock")
    lock.extensions = [e for e in lock.extensions if e.name != "etcd"]
    second = tmp_path / "second"
    lock.dump(second / "extensions.lock")
    result = sync(capsys, home, second, "--offline")
    assert result.code == 1
    assert result.err.splitlines()[0] == (
        f"error: {second / 'extensions.lock'} is inconsistent: kubernetes 1.28.6 requires etcd ^3.5, "
        f"which is not locked; nothing was installed into {second}"
    )


def test_sync_of_a_hostile_package_fails_and_leaves_nothing(capsys: Capsys, tmp_path: Path) -> None:
    hostile = symlink_member()
    sha = hashlib.sha256(hostile.data).hexdigest()
    source = tmp_path / "demo-1.0.0.tar.gz"
    source.write_bytes(hostile.data)
    home = tmp_path / "home"
    Store(home).add_package(source, sha)
    infra = tmp_path / "infra"
    Lockfile(
        registry="http://127.0.0.1:9",
        extensions=[LockedExtension("demo", "1.0.0", "taskserv", sha, "http://127.0.0.1:9/x")],
    ).dump(infra / "extensions.lock")
    # No signed metadata of that registry is cached: only --no-verify gets as far as the package.
    unverified = sync(capsys, home, infra, "--offline")
    assert unverified.code == 1 and "no verified signed metadata" in unverified.err
    result = sync(capsys, home, infra, "--offline", "--no-verify")
    assert result.code == 1
    assert result.err.startswith("warning: --no-verify")
    result.err = result.err.split("\n", 1)[1]
    assert result.err.startswith("error: the package of demo 1.0.0 cannot be installed: ")
    assert "link" in result.err and f"nothing was installed into {infra}" in result.err
    assert files_under(infra) == ["extensions.lock"]
    assert files_under(home / "store" / "trees") == []
    assert leftovers(home, infra) == []


def test_two_sync_processes_at_once_on_one_home_give_one_consistent_result(
    capsys: Capsys, examples_registry: LiveRegistry, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    made = run(capsys, "--registry", examples_registry.url, "--home", tmp_path / "first-home",
               "cluster", "create", "kubernetes-ha", "--infra", source, "--runtime-version", "1.0.0")  # fmt: skip
    assert made.code == 0, made.err
    infra, other, home = tmp_path / "infra", tmp_path / "other", tmp_path / "shared-home"
    for target in (infra, other):
        target.mkdir()
        shutil.copy(source / "extensions.lock", target / "extensions.lock")
    # Two into one directory (one installs, the other then finds everything in place), and a third into
    # another directory, all downloading into the same empty store at once.
    processes = [start_cli("--home", home, "extension", "sync", "--infra", target) for target in (infra, infra, other)]
    outcomes = [p.communicate(timeout=120) for p in processes]
    for process, (_, err) in zip(processes, outcomes, strict=True):
        assert process.returncode == 0, err
    assert files_under(infra) == files_under(source)
    assert files_under(other) == files_under(source)
    assert sum("nothing to do" in out for out, _ in outcomes[:2]) == 1
    listing = run(capsys, "--home", home, "--output", "json", "cluster", "list", "--infra", infra)
    assert listing.code == 0
    lock = Lockfile.load(infra / "extensions.lock")
    states = run(capsys, "--home", home, "--output", "json", "taskserv", "list", "--infra", infra).json()["data"]
    assert {s["status"] for s in states + listing.json()["data"]} == {"ok"}
    assert len(states) + len(listing.json()["data"]) == len(lock.extensions)
    assert len(store_packages(home)) == len(lock.extensions)
    assert leftovers(home, infra, other) == []


# --- broken downloads --------------------------------------------------------------------------------


def test_a_download_cut_midway_installs_nothing_and_a_retry_succeeds(
    capsys: Capsys, examples_registry: LiveRegistry, tmp_path: Path
) -> None:
    home, infra = tmp_path / "home", tmp_path / "infra"
    with MisbehavingProxy(examples_registry.url, mode="cut") as proxy:
        result = create(capsys, proxy.url, home, infra, "etcd", "--version", "3.5.9")
        assert proxy.cuts == 1
    assert result.code == 1
    size = index_entry(examples_registry, "etcd", "3.5.9")["size"]
    assert result.err.splitlines() == [
        f"error: the download of etcd 3.5.9 from {proxy.url}/api/v1/extensions/etcd/versions/3.5.9/download "
        f"was interrupted after {int(size) // 2} of {size} bytes (the connection was closed); nothing was kept: "
        f"run the command again to retry; nothing was installed into {infra}"
    ]
    assert not infra.exists()
    assert store_packages(home) == []
    assert leftovers(home) == []
    retry = create(capsys, examples_registry.url, home, infra, "etcd", "--version", "3.5.9")
    assert retry.code == 0, retry.err
    assert installed_names(infra) == ["etcd"]


def test_a_download_with_a_flipped_byte_is_refused_after_hashing(
    capsys: Capsys, examples_registry: LiveRegistry, tmp_path: Path
) -> None:
    home, infra = tmp_path / "home", tmp_path / "infra"
    with MisbehavingProxy(examples_registry.url, mode="corrupt") as proxy:
        result = create(capsys, proxy.url, home, infra, "etcd", "--version", "3.5.9", "--output", "json")
    assert result.code == 1
    error = result.json()["error"]
    assert error["code"] == "integrity_error"
    expected = index_entry(examples_registry, "etcd", "3.5.9")["sha256"]
    assert f"but {expected} is expected" in error["message"] and "nothing was kept" in error["message"]
    assert not infra.exists()
    assert store_packages(home) == [] and leftovers(home) == []


def test_a_package_served_with_content_encoding_gzip_is_kept_as_stored_and_verifies(
    capsys: Capsys, examples_registry: LiveRegistry, tmp_path: Path
) -> None:
    home, infra = tmp_path / "home", tmp_path / "infra"
    with MisbehavingProxy(examples_registry.url, mode="gzip-label") as proxy:
        result = create(capsys, proxy.url, home, infra, "etcd", "--version", "3.5.9")
    assert result.code == 0, result.err
    assert proxy.labelled == ["identity"]  # one download, asking for the bytes as they are
    expected = index_entry(examples_registry, "etcd", "3.5.9")
    [package] = store_packages(home)
    stored = home / "store" / "packages" / package
    assert hashlib.sha256(stored.read_bytes()).hexdigest() == expected["sha256"]
    assert stored.stat().st_size == expected["size"]
    assert installed_names(infra) == ["etcd"] and leftovers(home, infra) == []


def test_a_download_sent_without_end_is_stopped_at_the_signed_length(
    capsys: Capsys, examples_registry: LiveRegistry, tmp_path: Path
) -> None:
    home, infra = tmp_path / "home", tmp_path / "infra"
    with MisbehavingProxy(examples_registry.url, mode="endless") as proxy:
        result = create(capsys, proxy.url, home, infra, "etcd", "--version", "3.5.9", "--output", "json")
        sent = proxy.sent
    assert result.code == 1
    error = result.json()["error"]
    size = index_entry(examples_registry, "etcd", "3.5.9")["size"]
    assert (error["code"], error["details"]) == ("verification_failed", [{"reason": "length_mismatch"}])
    assert f"is more than {size} bytes, but the signed metadata lists {size}; nothing was kept" in error["message"]
    # Read up to the signed length and no further (what the sockets' buffers held aside), where the
    # client once read 256 MB before refusing it.
    assert sent < 32 * 1024 * 1024
    assert not infra.exists()
    assert store_packages(home) == [] and leftovers(home) == []


def test_a_download_dripped_slower_than_the_least_rate_is_given_up(
    capsys: Capsys, examples_registry: LiveRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry_client, "ANSWER_SECONDS", 1.0)  # and then 1 s per MiB of the package
    monkeypatch.setattr(registry_client, "MIN_DOWNLOAD_RATE", 1024 * 1024)
    home, infra = tmp_path / "home", tmp_path / "infra"
    with MisbehavingProxy(examples_registry.url, mode="drip") as proxy:
        started = time.monotonic()
        result = create(capsys, proxy.url, home, infra, "etcd", "--version", "3.5.9")
        took = time.monotonic() - started
    size = int(index_entry(examples_registry, "etcd", "3.5.9")["size"])  # type: ignore[call-overload]
    assert size > 2048  # dripped in 0.25 s steps of 256 bytes: more than 2 s in all
    assert result.code == 1
    message = " ".join(result.err.split())
    assert "the download of etcd 3.5.9 from" in message
    assert "bytes: it was not whole after 1 s (slower than 1024 KiB/s on average); nothing was kept" in message
    assert took < 30
    assert not infra.exists()
    assert store_packages(home) == [] and leftovers(home) == []


def test_a_client_terminated_midway_leaves_nothing_behind(examples_registry: LiveRegistry, tmp_path: Path) -> None:
    home, infra = tmp_path / "home", tmp_path / "infra"
    with MisbehavingProxy(examples_registry.url, mode="stall") as proxy:
        process = start_cli("--registry", proxy.url, "--home", home, "taskserv", "create", "etcd", "--infra", infra)
        deadline = time.monotonic() + 60
        while proxy.sent == 0 and time.monotonic() < deadline:  # half the package is sent, then nothing
            time.sleep(0.05)
        assert proxy.sent and leftovers(home), "the download never started"
        process.terminate()  # SIGTERM, as a service manager or `timeout` sends it
        _, err = process.communicate(timeout=30)
    assert process.returncode == 143
    assert err.splitlines()[-1] == "error: terminated (SIGTERM)"
    assert not infra.exists()
    assert store_packages(home) == [] and leftovers(home) == []


# --- list and validate -------------------------------------------------------------------------------


def test_list_without_infra_shows_what_the_registry_offers(capsys: Capsys, examples_registry: LiveRegistry) -> None:
    result = run(capsys, "--registry", examples_registry.url, "providers", "list")
    assert result.code == 0
    assert [line.split()[:3] for line in result.out.splitlines()[1:]] == [
        ["aws", "aws", "1.0.0"],
        ["local", "local", "1.0.0"],
        ["upcloud", "upcloud", "1.0.0"],
    ]


def test_providers_validate_checks_required_environment_variables(
    capsys: Capsys, examples_registry: LiveRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, infra = tmp_path / "home", tmp_path / "infra"
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    made = run(capsys, "--registry", examples_registry.url, "--home", home,
               "providers", "create", "aws", "--infra", infra)  # fmt: skip
    assert made.code == 0, made.err
    assert (
        "warning: required environment variables not set: AWS_ACCESS_KEY_ID, AWS_REGION, AWS_SECRET_ACCESS_KEY"
        in made.err
    )
    result = run(capsys, "--home", home, "providers", "validate", "--infra", infra)
    assert result.code == 1
    assert result.err.splitlines() == [
        f"error: 1 of 1 providers in {infra} cannot work as installed",
        "  - aws: required environment variable AWS_ACCESS_KEY_ID is not set",
        "  - aws: required environment variable AWS_SECRET_ACCESS_KEY is not set",
        "  - aws: required environment variable AWS_REGION is not set",
    ]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    ok = run(capsys, "--home", home, "providers", "validate", "--infra", infra)
    assert ok.code == 0, ok.err
    assert "ok: 1 provider intact and configured" in ok.out
    (infra / "extensions" / "providers" / "aws" / "README.md").write_text("changed")
    changed = run(capsys, "--home", home, "providers", "validate", "--infra", infra)
    assert changed.code == 1
    assert f"  - aws: {infra / 'extensions/providers/aws/README.md'} was changed" in changed.err


# --- the registry stopped ----------------------------------------------------------------------------


def test_published_packages_install_then_sync_with_the_registry_stopped(
    capsys: Capsys, live_registry: LiveRegistry, tmp_path: Path
) -> None:
    token = live_registry.createtoken("alice")
    dist = tmp_path / "dist"
    for name, version in (("containerd", "1.7.13"), ("etcd", "3.5.12"), ("kubernetes", "1.28.6")):
        built = run(capsys, "extension", "build", EXAMPLES / "taskservs" / name / version, "-o", dist)
        assert built.code == 0, built.err
        published = run(capsys, "--registry", live_registry.url, "--token", token, "extension", "publish",
                        dist / f"{name}-{version}.tar.gz", "--wait")  # fmt: skip
        assert published.code == 0, published.err
        assert published.out.splitlines()[-1] == f"published {name} {version}"
    home, infra = tmp_path / "home", tmp_path / "infra"
    made = create(capsys, live_registry.url, home, infra, "kubernetes")
    assert made.code == 0, made.err
    assert installed_names(infra) == KUBERNETES_SET
    assert Lockfile.load(infra / "extensions.lock").pins() == {
        "containerd": "1.7.13",
        "etcd": "3.5.12",
        "kubernetes": "1.28.6",
    }

    live_registry.stop()
    second = tmp_path / "second"
    second.mkdir()
    shutil.copy(infra / "extensions.lock", second / "extensions.lock")
    started = time.monotonic()
    synced = sync(capsys, home, second)
    assert synced.code == 0, synced.err
    assert time.monotonic() - started < 10
    assert files_under(second) == files_under(infra)

    offline = create(capsys, live_registry.url, home, tmp_path / "third", "kubernetes", "--offline")
    assert offline.code == 0, offline.err
    assert installed_names(tmp_path / "third") == KUBERNETES_SET

    unreachable = create(capsys, live_registry.url, home, tmp_path / "fourth", "kubernetes")
    assert unreachable.code == 1
    assert unreachable.err.startswith(f"error: cannot reach the registry at {live_registry.url}: ")
    assert "--offline works from the local store and cache" in unreachable.err
    empty_home = sync(capsys, tmp_path / "empty-home", tmp_path / "second")
    assert empty_home.code == 1
    assert empty_home.err.startswith(f"error: cannot reach the registry at {live_registry.url}")


@pytest.mark.s3
def test_a_download_redirected_to_object_storage_is_followed_and_verified(
    capsys: Capsys, s3_storage: S3Bucket, tmp_path: Path
) -> None:
    from tests.live_registry import LiveRegistry

    registry = LiveRegistry(tmp_path / "registry", env=s3_storage.env)
    registry.start()
    try:
        registry.manage("publish", str(EXAMPLES / "taskservs" / "etcd" / "3.5.12"))
        answer = httpx.get(f"{registry.url}/api/v1/extensions/etcd/versions/3.5.12/download", timeout=30)
        assert answer.status_code == 302 and answer.headers["Location"].startswith(s3_storage.endpoint_url)
        home, infra = tmp_path / "home", tmp_path / "infra"
        result = create(capsys, registry.url, home, infra, "etcd")
        assert result.code == 0, result.err
        assert installed_names(infra) == ["etcd"]
        assert (
            Lockfile.load(infra / "extensions.lock").get("etcd").sha256
            == index_entry(  # type: ignore[union-attr]
                registry, "etcd", "3.5.12"
            )["sha256"]
        )
    finally:
        registry.stop()
