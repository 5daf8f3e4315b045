"""Real OCI clients against a real registry process (gunicorn, every bundled example published):
skopeo inspects and copies (to a directory, and into the CNCF distribution registry and back), the
oras Python SDK pulls by tag and by digest, and Range requests go through gunicorn's sendfile.

skopeo and docker-registry are Debian packages and oras a Python one, all installed by
`make test` (`make services`, requirements-dev.txt); missing locally they skip these tests, and
under CI=true they fail them."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from clients.store import verify_tree
from tests.conftest import require
from tests.registry.oci_tools import MANIFEST_ACCEPT, sha256_digest

if TYPE_CHECKING:
    from tests.live_registry import LiveRegistry
    from tests.services import DistributionRegistry

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("oci-live")]


@pytest.fixture(scope="module")
def skopeo() -> str:
    binary = shutil.which("skopeo")
    require(binary is not None, "skopeo (`make services`)")
    assert binary is not None
    return binary


def run_skopeo(binary: str, *args: str) -> str:
    proc = subprocess.run(
        [binary, "--insecure-policy", *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, f"skopeo {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}"
    return proc.stdout


def address(registry: LiveRegistry) -> str:
    return registry.url.removeprefix("http://")


def latest_versions(registry: LiveRegistry) -> list[dict[str, Any]]:
    """Every bundled example's latest version: name, version, sha256 (from the JSON API)."""
    items = httpx.get(f"{registry.url}/api/v1/extensions/?limit=100", timeout=30).json()["data"]["items"]
    assert len(items) >= 15, [i["name"] for i in items]
    return [
        {"name": i["name"], "version": i["version"], "sha256": i["checksum"].removeprefix("sha256:")}
        for i in items
        if i["version"]
    ]


def served_manifest(registry: LiveRegistry, name: str, reference: str) -> httpx.Response:
    response = httpx.get(
        f"{registry.url}/v2/extensions/{name}/manifests/{reference}", headers={"Accept": MANIFEST_ACCEPT}, timeout=30
    )
    assert response.status_code == 200, response.text
    return response


def download(registry: LiveRegistry, name: str, version: str) -> bytes:
    response = httpx.get(f"{registry.url}/api/v1/extensions/{name}/versions/{version}/download", timeout=30)
    assert response.status_code == 200
    return response.content


# --- skopeo -----------------------------------------------------------------------------------------


def test_skopeo_inspects_a_tag_and_a_digest(skopeo: str, examples_registry: LiveRegistry) -> None:
    etcd = next(v for v in latest_versions(examples_registry) if v["name"] == "etcd")
    manifest = served_manifest(examples_registry, "etcd", etcd["version"])
    digest = manifest.headers["Docker-Content-Digest"]
    image = f"docker://{address(examples_registry)}/extensions/etcd"
    by_tag = json.loads(run_skopeo(skopeo, "inspect", "--tls-verify=false", f"{image}:{etcd['version']}"))
    by_digest = json.loads(run_skopeo(skopeo, "inspect", "--tls-verify=false", f"{image}@{digest}"))
    for inspected in (by_tag, by_digest):
        assert inspected["Digest"] == digest
        assert inspected["Layers"] == [f"sha256:{etcd['sha256']}"]
        assert inspected["Labels"]["org.opencontainers.image.version"] == etcd["version"]
        assert inspected["Labels"]["io.provisioning.extension.name"] == "etcd"
        assert inspected["Architecture"] == inspected["Os"] == "unknown"
        assert etcd["version"] in inspected["RepoTags"]
    raw = run_skopeo(skopeo, "inspect", "--raw", "--tls-verify=false", f"{image}:{etcd['version']}")
    assert raw.encode() == manifest.content
    config = json.loads(run_skopeo(skopeo, "inspect", "--config", "--tls-verify=false", f"{image}@{digest}"))
    assert config["rootfs"]["diff_ids"] == [
        sha256_digest(_gunzip(download(examples_registry, "etcd", etcd["version"])))
    ]


def _gunzip(data: bytes) -> bytes:
    import gzip

    return gzip.decompress(data)


def test_skopeo_copies_every_examples_latest_version_to_a_directory(
    skopeo: str, examples_registry: LiveRegistry, tmp_path: Path
) -> None:
    for latest in latest_versions(examples_registry):
        name, tag = latest["name"], latest["version"].replace("+", "_")
        target = tmp_path / name
        run_skopeo(
            skopeo, "copy", "--src-tls-verify=false", f"docker://{address(examples_registry)}/extensions/{name}:{tag}",
            f"dir:{target}",
        )  # fmt: skip
        layer = target / latest["sha256"]
        assert layer.is_file(), sorted(p.name for p in target.iterdir())
        assert hashlib.sha256(layer.read_bytes()).hexdigest() == latest["sha256"], name
        assert layer.read_bytes() == download(examples_registry, name, latest["version"])
        assert (target / "manifest.json").read_bytes() == served_manifest(examples_registry, name, tag).content


def test_skopeo_mirrors_every_example_into_an_oci_registry_and_back_with_the_same_digests(
    skopeo: str, examples_registry: LiveRegistry, distribution_registry: DistributionRegistry, tmp_path: Path
) -> None:
    for latest in latest_versions(examples_registry):
        name, tag = latest["name"], latest["version"].replace("+", "_")
        ours = served_manifest(examples_registry, name, tag)
        source = f"docker://{address(examples_registry)}/extensions/{name}:{tag}"
        mirror = f"docker://{distribution_registry.address}/extensions/{name}:{tag}"
        run_skopeo(skopeo, "copy", "--src-tls-verify=false", "--dest-tls-verify=false", source, mirror)
        mirrored = run_skopeo(skopeo, "inspect", "--raw", "--tls-verify=false", mirror).encode()
        assert mirrored == ours.content, name  # byte for byte: the same manifest digest
        theirs = httpx.head(
            f"http://{distribution_registry.address}/v2/extensions/{name}/manifests/{tag}",
            headers={"Accept": MANIFEST_ACCEPT},
            timeout=30,
        )
        assert theirs.headers["Docker-Content-Digest"] == ours.headers["Docker-Content-Digest"], name
        back = tmp_path / name
        run_skopeo(skopeo, "copy", "--src-tls-verify=false", mirror, f"dir:{back}")
        assert hashlib.sha256((back / latest["sha256"]).read_bytes()).hexdigest() == latest["sha256"], name
        assert (back / "manifest.json").read_bytes() == ours.content
        config = json.loads(ours.content)["config"]["digest"].removeprefix("sha256:")
        assert hashlib.sha256((back / config).read_bytes()).hexdigest() == config


def test_skopeo_lists_the_tags(skopeo: str, examples_registry: LiveRegistry) -> None:
    listed = json.loads(
        run_skopeo(
            skopeo, "list-tags", "--tls-verify=false", f"docker://{address(examples_registry)}/extensions/cilium"
        )
    )
    assert listed["Tags"] == ["1.14.6", "1.15.1", "1.16.0-rc.1"]


def test_skopeo_sees_a_yanked_version_keep_its_tag_with_a_yanked_manifest(
    skopeo: str, live_registry: LiveRegistry, tmp_path: Path
) -> None:
    root = Path(__file__).resolve().parents[2]
    live_registry.manage("publish", "--user", "alice", str(root / "extensions" / "taskservs" / "etcd" / "3.5.9"))
    token = live_registry.createtoken("alice", "yank:*")
    plain = served_manifest(live_registry, "etcd", "3.5.9")
    answer = httpx.post(
        f"{live_registry.url}/api/v1/extensions/etcd/versions/3.5.9/yank",
        json={"reason": "broken"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    image = f"docker://{address(live_registry)}/extensions/etcd"
    inspected = json.loads(run_skopeo(skopeo, "inspect", "--raw", "--tls-verify=false", f"{image}:3.5.9"))
    assert inspected["annotations"]["io.provisioning.extension.yanked"] == "true"
    pinned = run_skopeo(
        skopeo, "inspect", "--raw", "--tls-verify=false", f"{image}@{plain.headers['Docker-Content-Digest']}"
    )
    assert pinned.encode() == plain.content  # a mirror's pin by digest still answers
    run_skopeo(skopeo, "copy", "--src-tls-verify=false", f"{image}:3.5.9", f"dir:{tmp_path / 'yanked'}")
    assert (
        json.loads((tmp_path / "yanked" / "manifest.json").read_bytes())["layers"]
        == json.loads(plain.content)["layers"]
    )


# --- oras (the Python SDK) ------------------------------------------------------------------------


def etcd_targets(registry: LiveRegistry) -> tuple[dict[str, Any], list[str]]:
    """etcd's latest version, and its image reference by tag and by digest."""
    etcd = next(v for v in latest_versions(registry) if v["name"] == "etcd")
    digest = served_manifest(registry, "etcd", etcd["version"]).headers["Docker-Content-Digest"]
    base = f"{address(registry)}/extensions/etcd"
    return etcd, [f"{base}:{etcd['version']}", f"{base}@{digest}"]


@pytest.fixture(scope="module")
def oras_client(examples_registry: LiveRegistry) -> Any:
    try:
        import oras.client
    except ImportError:
        require(False, "the oras Python SDK (requirements-dev.txt)")
    return oras.client.OrasClient(hostname=address(examples_registry), insecure=True)


def test_oras_pulls_by_tag_and_by_digest_writing_the_verified_package(
    oras_client: Any, examples_registry: LiveRegistry, tmp_path: Path
) -> None:
    etcd, targets = etcd_targets(examples_registry)
    for target in targets:
        outdir = tmp_path / target.rsplit("/", 1)[-1].replace(":", "-").replace("@", "-")
        container = oras_client.get_container(target)
        manifest = oras_client.get_manifest(container)
        (layer,) = manifest["layers"]
        title = layer["annotations"]["org.opencontainers.image.title"]
        assert title == f"etcd-{etcd['version']}.tar.gz"
        written = Path(oras_client.download_blob(container, layer["digest"], str(outdir / title)))
        assert written == outdir / f"etcd-{etcd['version']}.tar.gz"
        assert (
            hashlib.sha256(written.read_bytes()).hexdigest()
            == etcd["sha256"]
            == layer["digest"].removeprefix("sha256:")
        )


def test_oras_pull_unpacks_the_package_into_a_tree_that_verifies(
    oras_client: Any, examples_registry: LiveRegistry, tmp_path: Path
) -> None:
    # The SDK's pull() unpacks every application/vnd.oci.image.layer.v1.tar+gzip layer (it reads that
    # media type as a packed directory), where the oras CLI writes the file: what it leaves is the
    # package's tree NAME-VERSION/, which must be exactly what MANIFEST.json lists.
    etcd, targets = etcd_targets(examples_registry)
    for target in targets:
        outdir = tmp_path / target.rsplit("/", 1)[-1].replace(":", "-").replace("@", "-")
        files = oras_client.pull(target=target, outdir=str(outdir))
        assert [Path(f).name for f in files] == [f"etcd-{etcd['version']}.tar.gz"]
        tree = outdir / f"etcd-{etcd['version']}"
        assert (tree / "extension.toml").is_file()
        assert verify_tree(tree) == []


def test_oras_lists_the_tags(oras_client: Any, examples_registry: LiveRegistry) -> None:
    assert oras_client.get_tags(f"{address(examples_registry)}/extensions/cilium") == [
        "1.14.6",
        "1.15.1",
        "1.16.0-rc.1",
    ]


# --- ranges through gunicorn ------------------------------------------------------------------------


def test_ranges_of_a_layer_through_gunicorn_are_exactly_those_bytes(examples_registry: LiveRegistry) -> None:
    kubernetes = next(v for v in latest_versions(examples_registry) if v["name"] == "kubernetes")
    package = download(examples_registry, "kubernetes", kubernetes["version"])
    url = f"{examples_registry.url}/v2/extensions/kubernetes/blobs/sha256:{kubernetes['sha256']}"
    size = len(package)
    for header, expected in (
        ("bytes=0-0", package[:1]),
        ("bytes=100-4095", package[100:4096]),
        (f"bytes={size - 10}-", package[-10:]),
        ("bytes=-300", package[-300:]),
        (f"bytes=1-{size * 2}", package[1:]),
    ):
        response = httpx.get(url, headers={"Range": header}, timeout=30)
        assert response.status_code == 206, header
        assert response.content == expected, header
        assert response.headers["Content-Length"] == str(len(expected))
    whole = httpx.get(url, timeout=30)
    assert whole.status_code == 200
    assert whole.content == package
    head = httpx.head(url, timeout=30)
    assert head.headers["Content-Length"] == str(size)
    assert httpx.get(url, headers={"Range": f"bytes={size}-"}, timeout=30).status_code == 416
