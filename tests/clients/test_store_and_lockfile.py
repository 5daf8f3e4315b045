"""The local store and extensions.lock, without a registry."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from clients.errors import ClientError
from clients.lockfile import LockedExtension, Lockfile
from clients.registry_client import IntegrityError
from clients.store import Store, verify_tree
from extensions.archive import BuiltPackage, build_package
from extensions.errors import UnsafeArchiveError
from tests.clients.client_tools import EXAMPLES, files_under, leftovers
from tests.hostile_archives import symlink_member

ETCD = EXAMPLES / "taskservs" / "etcd" / "3.5.9"
SHA_A = "a" * 64
SHA_B = "b" * 64


@pytest.fixture
def etcd_package(tmp_path: Path) -> BuiltPackage:
    return build_package(ETCD, tmp_path / "dist")


def _lock_text(**overrides: str) -> str:
    entry = {
        "name": '"etcd"',
        "version": '"3.5.9"',
        "type": '"taskserv"',
        "sha256": f'"{SHA_A}"',
        "source": '"http://r/api/v1/extensions/etcd/versions/3.5.9/download"',
        "dependencies": "[]",
    }
    entry.update(overrides)
    body = "\n".join(f"{k} = {v}" for k, v in entry.items())
    return f'version = 1\nregistry = "http://r"\n\n[[extension]]\n{body}\n'


# --- extensions.lock ---------------------------------------------------------------------------------


def test_a_lockfile_is_written_sorted_by_name_and_reads_back_the_same(tmp_path: Path) -> None:
    lock = Lockfile(
        registry="http://127.0.0.1:8000",
        extensions=[
            LockedExtension("kubernetes", "1.28.6", "taskserv", SHA_A, "http://x/k", ("containerd ^1.7", "etcd ^3.5")),
            LockedExtension("containerd", "1.7.13", "taskserv", SHA_B, "http://x/c"),
        ],
    )
    path = tmp_path / "infra" / "extensions.lock"
    lock.dump(path)
    text = path.read_text()
    assert text.startswith('version = 1\nregistry = "http://127.0.0.1:8000"\n')
    assert text.index('name = "containerd"') < text.index('name = "kubernetes"')
    loaded = Lockfile.load(path)
    assert loaded.registry == lock.registry
    assert [e.name for e in loaded.extensions] == ["containerd", "kubernetes"]
    assert loaded.get("kubernetes") == lock.extensions[0]
    assert loaded.pins() == {"containerd": "1.7.13", "kubernetes": "1.28.6"}
    assert leftovers(tmp_path) == []
    assert oct(path.stat().st_mode & 0o777) == "0o644"


@pytest.mark.parametrize(
    ("overrides", "key", "words"),
    [
        ({"sha256": '"abc"'}, "extension[0].sha256", "64 lower-case hexadecimal digits"),
        ({"sha256": f'"{"A" * 64}"'}, "extension[0].sha256", "64 lower-case hexadecimal digits"),
        ({"version": '"1.0"'}, "extension[0].version", "SemVer"),
        ({"type": '"plugin"'}, "extension[0].type", "provider, taskserv, cluster, template"),
        ({"name": '"Etcd"'}, "extension[0].name", "not an extension name"),
        ({"dependencies": '["etcd >>3"]'}, "extension[0].dependencies[0]", ""),
        ({"dependencies": '"etcd"'}, "extension[0].dependencies", "list of requirements"),
        ({"source": "3"}, "extension[0].source", "not a string"),
    ],
)
def test_a_bad_lockfile_entry_is_refused_naming_the_key(overrides: dict[str, str], key: str, words: str) -> None:
    with pytest.raises(ClientError) as caught:
        Lockfile.loads(_lock_text(**overrides), path="infra/extensions.lock")
    assert caught.value.code == "invalid_lockfile"
    assert caught.value.message.startswith(f"infra/extensions.lock: {key}: ")
    assert words in caught.value.message


def test_a_lockfile_that_is_not_toml_or_of_another_version_is_refused() -> None:
    with pytest.raises(ClientError, match=r"extensions.lock is not valid TOML"):
        Lockfile.loads("version = = 1")
    with pytest.raises(ClientError, match=r"version: 2 is not supported: this client reads version 1"):
        Lockfile.loads('version = 2\nregistry = "x"\n')
    twice = _lock_text() + _lock_text().split("\n\n", 1)[1]
    with pytest.raises(ClientError, match=r"extension\[1\].name: 'etcd' is locked twice"):
        Lockfile.loads(twice)


def test_a_missing_lockfile_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(ClientError, match=r"does not exist: install something first") as caught:
        Lockfile.load(tmp_path / "extensions.lock")
    assert caught.value.code == "not_found"


def test_lockfile_problems_name_unsatisfied_and_unlocked_dependencies() -> None:
    lock = Lockfile(
        registry="r",
        extensions=[
            LockedExtension("kubernetes", "1.28.6", "taskserv", SHA_A, "s", ("containerd ^1.7", "etcd ^3.5")),
            LockedExtension("etcd", "4.0.0", "taskserv", SHA_B, "s"),
        ],
    )
    assert lock.problems() == [
        "kubernetes 1.28.6 requires containerd ^1.7, which is not locked",
        "kubernetes 1.28.6 requires etcd ^3.5, but 4.0.0 is locked",
    ]


def test_requested_is_kept_sorted_read_back_and_checked() -> None:
    lock = Lockfile(
        registry="r",
        extensions=[LockedExtension("containerd", "2.0.2", "taskserv", SHA_A, "s")],
        requested=["kubernetes", "containerd ^2"],
    )
    text = lock.dumps()
    assert text.startswith('version = 1\nregistry = "r"\nrequested = [\n    "containerd ^2",\n    "kubernetes",\n]\n')
    assert Lockfile.loads(text).requested == ["containerd ^2", "kubernetes"]
    assert lock.problems() == ["kubernetes was requested, but kubernetes is not locked"]
    lock.requested = ["containerd ^1.7"]
    assert lock.problems() == ["containerd ^1.7 was requested, but 2.0.2 is locked"]


def test_a_lockfile_without_requested_reads_as_no_requests() -> None:
    assert "requested" not in _lock_text()
    assert Lockfile.loads(_lock_text()).requested == []


@pytest.mark.parametrize(
    ("requested", "key", "words"),
    [
        ('"etcd"', "requested", "must be a list of requirements"),
        ('["etcd >>3"]', "requested[0]", "not a valid constraint"),
        ('["etcd", "etcd ^3"]', "requested[1]", "'etcd' is requested twice"),
    ],
)
def test_a_bad_requested_list_is_refused_naming_the_key(requested: str, key: str, words: str) -> None:
    text = _lock_text().replace('registry = "http://r"\n', f'registry = "http://r"\nrequested = {requested}\n')
    with pytest.raises(ClientError) as caught:
        Lockfile.loads(text, path="infra/extensions.lock")
    assert caught.value.message.startswith(f"infra/extensions.lock: {key}: ")
    assert words in caught.value.message


# --- the store ---------------------------------------------------------------------------------------


def test_the_store_keeps_packages_by_sha256_and_unpacks_them(tmp_path: Path, etcd_package: BuiltPackage) -> None:
    store = Store(tmp_path / "home")
    path = store.add_package(etcd_package.path, etcd_package.sha256)
    assert path == tmp_path / "home/store/packages/sha256" / etcd_package.sha256[:2] / f"{etcd_package.sha256}.tar.gz"
    assert store.has_package(etcd_package.sha256)
    tree = store.tree("taskserv", "etcd", "3.5.9", etcd_package.sha256)
    assert tree == tmp_path / "home/store/trees/taskserv/etcd/3.5.9"
    assert (tree / "extension.toml").read_bytes() == (ETCD / "extension.toml").read_bytes()
    assert verify_tree(tree) == []
    assert store.fetch(None, "etcd", "3.5.9", etcd_package.sha256) == path  # from the store, no registry
    assert leftovers(tmp_path) == []


def test_the_store_refuses_bytes_that_do_not_hash_to_their_digest(tmp_path: Path, etcd_package: BuiltPackage) -> None:
    store = Store(tmp_path / "home")
    with pytest.raises(IntegrityError, match=f"has sha256 {etcd_package.sha256}, not {SHA_A}; it was not stored"):
        store.add_package(etcd_package.path, SHA_A)
    assert files_under(store.root) == []
    assert not store.has_package(SHA_A)


def test_a_stored_package_changed_on_disk_is_reported_and_never_used(
    tmp_path: Path, etcd_package: BuiltPackage
) -> None:
    store = Store(tmp_path / "home")
    path = store.add_package(etcd_package.path, etcd_package.sha256)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    assert not store.has_package(etcd_package.sha256)
    with pytest.raises(IntegrityError, match=r"does not match its sha256 .*delete the file to download it again"):
        store.fetch(None, "etcd", "3.5.9", etcd_package.sha256)
    with pytest.raises(IntegrityError):
        store.tree("taskserv", "etcd", "3.5.9", etcd_package.sha256)
    assert not store.trees_dir.exists()


def test_a_changed_tree_is_unpacked_again_from_its_package(tmp_path: Path, etcd_package: BuiltPackage) -> None:
    store = Store(tmp_path / "home")
    store.add_package(etcd_package.path, etcd_package.sha256)
    tree = store.tree("taskserv", "etcd", "3.5.9", etcd_package.sha256)
    (tree / "extension.toml").write_text("tampered")
    (tree / "extra.sh").write_text("echo owned")
    assert verify_tree(tree) == [
        f"{tree / 'extension.toml'} was changed",
        f"{tree / 'extra.sh'} is not part of the package",
    ]
    again = store.tree("taskserv", "etcd", "3.5.9", etcd_package.sha256)
    assert again == tree
    assert verify_tree(tree) == []
    assert (tree / "extension.toml").read_bytes() == (ETCD / "extension.toml").read_bytes()
    assert not (tree / "extra.sh").exists()
    assert leftovers(tmp_path) == []


def test_verify_tree_reports_a_missing_file_a_link_and_a_changed_manifest(
    tmp_path: Path, etcd_package: BuiltPackage
) -> None:
    store = Store(tmp_path / "home")
    store.add_package(etcd_package.path, etcd_package.sha256)
    tree = store.tree("taskserv", "etcd", "3.5.9", etcd_package.sha256)
    mark = store.tree_mark("taskserv", "etcd", "3.5.9")
    assert mark is not None and mark.sha256 == etcd_package.sha256
    assert mark.manifest_sha256 == hashlib.sha256((tree / "MANIFEST.json").read_bytes()).hexdigest()
    (tree / "README.md").unlink()
    (tree / "link").symlink_to("/etc/passwd")
    assert verify_tree(tree) == [
        f"{tree / 'link'} is a link; the package holds none",
        f"{tree / 'README.md'} is missing",
    ]
    assert verify_tree(tree, manifest_sha256=SHA_B) == [f"{tree / 'MANIFEST.json'} was changed"]


def test_a_hostile_package_leaves_no_tree_behind(tmp_path: Path) -> None:
    hostile = symlink_member()
    source = tmp_path / "demo-1.0.0.tar.gz"
    source.write_bytes(hostile.data)
    sha = hashlib.sha256(hostile.data).hexdigest()
    store = Store(tmp_path / "home")
    store.add_package(source, sha)
    with pytest.raises(UnsafeArchiveError):
        store.tree("taskserv", "demo", "1.0.0", sha)
    assert files_under(store.trees_dir) == []
    assert files_under(store.packages_dir) == []  # nor the package: nothing may use it
    assert leftovers(tmp_path) == []


def test_a_package_that_holds_another_extension_is_refused_and_kept_for_it(
    tmp_path: Path, etcd_package: BuiltPackage
) -> None:
    store = Store(tmp_path / "home")
    store.add_package(etcd_package.path, etcd_package.sha256)
    with pytest.raises(IntegrityError, match=f"the package with sha256 {etcd_package.sha256} holds etcd 3.5.9, not"):
        store.tree("taskserv", "cilium", "3.5.9", etcd_package.sha256)
    assert files_under(store.trees_dir) == []
    assert store.has_package(etcd_package.sha256)  # intact, and etcd's: another install may use it
    assert store.tree("taskserv", "etcd", "3.5.9", etcd_package.sha256).is_dir()
