"""extensions.oci: the OCI documents of a version (SPEC 7), tags, digests, Accept, and the layer's
DiffID recorded by the inspection."""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from extensions.archive import build_package, inspect_package, uncompressed_sha256
from extensions.oci import (
    ARTIFACT_TYPE,
    CONFIG_MEDIA_TYPE,
    EMPTY_DOCUMENT,
    INDEX_MEDIA_TYPE,
    LAYER_MEDIA_TYPE,
    MANIFEST_MEDIA_TYPE,
    PROVENANCE_ARTIFACT_TYPE,
    Artifact,
    Document,
    accepts,
    config_document,
    index_document,
    is_digest,
    is_tag,
    manifest_document,
    parse_sha256_digest,
    referrer_descriptor,
    referrer_manifest,
    tag_for_version,
    version_for_tag,
)
from extensions.versions import SemVer

ROOT = Path(__file__).resolve().parents[2]

ETCD = Artifact(
    name="etcd",
    version="3.5.9+build.1",
    type="taskserv",
    description="etcd, the key-value store",
    sha256="a" * 64,
    size=1234,
    tar_sha256="b" * 64,
    published_at=datetime(2024, 3, 1, 12, 0, 0, 123456, tzinfo=UTC),
    license="Apache-2.0",
    authors=("Jane Doe <jane@example.com>", "Kim"),
    repository="https://example.com/etcd",
    homepage="https://etcd.io",
)


def manifest_of(artifact: Artifact, *, yanked: bool = False) -> Document:
    return manifest_document(
        config_document(artifact), sha256=artifact.sha256, size=artifact.size, filename=artifact.filename, yanked=yanked
    )


# --- the documents ----------------------------------------------------------------------------------


def test_the_documents_of_a_version_never_change() -> None:
    # These digests are what mirrors pin: changing anything extensions.oci renders changes them,
    # and every published version's stored digests with them. Do not update these values.
    assert config_document(ETCD).digest == "sha256:63d275798046dbf58accb1c33c0efec18d6f3bc14f48f320049f046c3179b98d"
    assert manifest_of(ETCD).digest == "sha256:1dded726b189b5a0ad496c880b8a319f8f4af9788caa1b1680e95117940da499"
    assert (
        manifest_of(ETCD, yanked=True).digest
        == "sha256:1763eb2d452672e8add972da08aaf0b14b884dcff3301ca5d7493fd51170527d"
    )


def test_the_manifest_is_an_image_manifest_with_the_package_as_its_one_layer() -> None:
    manifest = json.loads(manifest_of(ETCD).data)
    config = config_document(ETCD)
    assert manifest["schemaVersion"] == 2
    assert manifest["mediaType"] == MANIFEST_MEDIA_TYPE
    assert manifest["artifactType"] == ARTIFACT_TYPE == "application/vnd.provisioning.extension.v1"
    assert manifest["config"] == {"mediaType": CONFIG_MEDIA_TYPE, "digest": config.digest, "size": len(config.data)}
    assert manifest["layers"] == [
        {
            "mediaType": LAYER_MEDIA_TYPE,
            "digest": f"sha256:{'a' * 64}",
            "size": 1234,
            "annotations": {"org.opencontainers.image.title": "etcd-3.5.9+build.1.tar.gz"},
        }
    ]
    assert manifest["annotations"] == {
        "org.opencontainers.image.created": "2024-03-01T12:00:00Z",
        "org.opencontainers.image.version": "3.5.9+build.1",
        "org.opencontainers.image.description": "etcd, the key-value store",
        "org.opencontainers.image.licenses": "Apache-2.0",
        "org.opencontainers.image.authors": "Jane Doe <jane@example.com>, Kim",
        "org.opencontainers.image.source": "https://example.com/etcd",
        "org.opencontainers.image.url": "https://etcd.io",
        "io.provisioning.extension.name": "etcd",
        "io.provisioning.extension.type": "taskserv",
    }
    assert "subject" not in manifest


def test_the_config_is_an_image_config_naming_the_diff_id_with_the_facts_as_labels() -> None:
    config = json.loads(config_document(ETCD).data)
    assert config["architecture"] == "unknown"
    assert config["os"] == "unknown"
    assert config["rootfs"] == {"type": "layers", "diff_ids": [f"sha256:{'b' * 64}"]}
    assert config["created"] == "2024-03-01T12:00:00Z"
    assert config["config"]["Labels"] == json.loads(manifest_of(ETCD).data)["annotations"]


def test_documents_are_canonical_json() -> None:
    for document in (config_document(ETCD), manifest_of(ETCD), manifest_of(ETCD, yanked=True)):
        value = json.loads(document.data)
        assert document.data == json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        assert document.digest == f"sha256:{hashlib.sha256(document.data).hexdigest()}"
        assert document.size == len(document.data)


def test_the_yanked_manifest_differs_only_by_its_annotation_and_shares_config_and_layer() -> None:
    plain = json.loads(manifest_of(ETCD).data)
    yanked = json.loads(manifest_of(ETCD, yanked=True).data)
    assert yanked["annotations"].pop("io.provisioning.extension.yanked") == "true"
    assert yanked == plain


def test_nothing_but_the_versions_facts_enters_the_documents() -> None:
    # The same facts give the same bytes; the publication time counts to the second.
    same = replace(ETCD, published_at=datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC))
    assert manifest_of(same).data == manifest_of(ETCD).data
    for change in (
        {"description": "other"},
        {"sha256": "c" * 64},
        {"tar_sha256": "c" * 64},
        {"license": None},
        {"published_at": datetime(2024, 3, 1, 12, 0, 1, tzinfo=UTC)},
    ):
        assert manifest_of(replace(ETCD, **change)).digest != manifest_of(ETCD).digest, change


def test_facts_without_a_value_are_left_out_of_the_annotations() -> None:
    bare = replace(ETCD, license=None, authors=(), repository=None, homepage=None, description="")
    annotations = json.loads(manifest_of(bare).data)["annotations"]
    assert set(annotations) == {
        "org.opencontainers.image.created",
        "org.opencontainers.image.version",
        "io.provisioning.extension.name",
        "io.provisioning.extension.type",
    }


def test_a_config_needs_the_diff_id_and_a_timezone_aware_time() -> None:
    with pytest.raises(ValueError, match="DiffID"):
        config_document(replace(ETCD, tar_sha256=""))
    with pytest.raises(ValueError, match="timezone"):
        config_document(replace(ETCD, published_at=datetime(2024, 3, 1)))


def test_a_referrer_is_listed_with_its_artifact_type_and_annotations() -> None:
    subject = manifest_of(ETCD).descriptor()
    statement = Document(PROVENANCE_ARTIFACT_TYPE, b'{"_type": "https://in-toto.io/Statement/v1"}')
    referrer = referrer_manifest(
        subject, artifact_type=PROVENANCE_ARTIFACT_TYPE, layers=[statement], annotations={"k": "v"}
    )
    manifest = json.loads(referrer.data)
    assert manifest["subject"] == subject
    assert manifest["config"] == EMPTY_DOCUMENT.descriptor()
    assert EMPTY_DOCUMENT.digest == "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    assert manifest["layers"] == [statement.descriptor()]
    assert referrer_descriptor(referrer) == {
        "mediaType": MANIFEST_MEDIA_TYPE,
        "digest": referrer.digest,
        "size": referrer.size,
        "artifactType": PROVENANCE_ARTIFACT_TYPE,
        "annotations": {"k": "v"},
    }
    # Without an artifactType, a referrer is listed under its config's media type.
    untyped = Document(MANIFEST_MEDIA_TYPE, json.dumps({"config": {"mediaType": "application/x-cfg"}}).encode())
    assert referrer_descriptor(untyped)["artifactType"] == "application/x-cfg"
    assert "annotations" not in referrer_descriptor(untyped)


def test_an_index_lists_the_descriptors() -> None:
    index = index_document([{"digest": "sha256:" + "0" * 64}])
    assert index.media_type == INDEX_MEDIA_TYPE
    assert json.loads(index.data) == {
        "schemaVersion": 2,
        "mediaType": INDEX_MEDIA_TYPE,
        "manifests": [{"digest": "sha256:" + "0" * 64}],
    }


# --- tags, digests, Accept --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "tag"),
    [
        ("1.28.0", "1.28.0"),
        ("2.0.0-rc.1", "2.0.0-rc.1"),
        ("1.0.0+build.7", "1.0.0_build.7"),
        ("1.0.0-a+b.c", "1.0.0-a_b.c"),
    ],
)
def test_a_versions_tag_writes_plus_as_underscore_and_maps_back(version: str, tag: str) -> None:
    assert tag_for_version(version) == tag
    assert is_tag(tag)
    assert version_for_tag(tag) == version
    assert str(SemVer.parse(version_for_tag(tag))) == version


def test_every_bundled_example_version_is_a_valid_tag() -> None:
    versions = [p.parent.name for p in (ROOT / "extensions").glob("*/*/*/extension.toml")]
    assert len(versions) >= 10
    assert all(is_tag(tag_for_version(v)) for v in versions), versions


def test_tags_follow_the_distribution_spec_grammar() -> None:
    assert is_tag("a" * 128)
    assert not is_tag("a" * 129)
    for bad in ("", ".1", "-1", "1.0.0+b", "1/2", "1 2", "1.0.0\n"):
        assert not is_tag(bad), bad


def test_digests() -> None:
    hexes = "0123456789abcdef" * 4
    assert parse_sha256_digest(f"sha256:{hexes}") == hexes
    for bad in (f"sha256:{hexes.upper()}", f"sha256:{hexes}0", f"sha512:{hexes}", hexes, f"sha256:{hexes}\n"):
        assert parse_sha256_digest(bad) is None, bad
    assert is_digest(f"sha256:{hexes}")
    assert is_digest("sha512:" + "ab" * 64)
    assert is_digest("multihash+base58:QmRZxt2b1FVZPNqd8hsiykDL3TdBDeTSPX9Kv46HmX4Gx8")
    for bad in ("1.0.0", "sha256:", ":abc", "SHA256:abc", "sha256:a/b", "sha256:" + "a" * 300):
        assert not is_digest(bad), bad


@pytest.mark.parametrize(
    ("header", "accepted"),
    [
        ("", True),
        (MANIFEST_MEDIA_TYPE, True),
        (f"application/vnd.docker.distribution.manifest.v2+json, {MANIFEST_MEDIA_TYPE}", True),
        (f"{MANIFEST_MEDIA_TYPE.upper()}; charset=utf-8", True),
        ("*/*", True),
        ("application/*;q=0.5", True),
        ("application/vnd.docker.distribution.manifest.v2+json", False),
        ("application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.index.v1+json", False),
        (f"{MANIFEST_MEDIA_TYPE};q=0", False),
        (f"{MANIFEST_MEDIA_TYPE};q=zero", False),
        ("text/*", False),
        ("application/json", False),
    ],
)
def test_accept_admits_the_manifest_type_or_a_wildcard(header: str, accepted: bool) -> None:
    assert accepts(header, MANIFEST_MEDIA_TYPE) is accepted


# --- the DiffID ---------------------------------------------------------------------------------------


def test_the_inspection_records_the_uncompressed_tars_sha256(tmp_path: Path) -> None:
    built = build_package(ROOT / "extensions" / "taskservs" / "etcd" / "3.5.9", tmp_path)
    expected = hashlib.sha256(gzip.decompress(built.path.read_bytes())).hexdigest()
    assert inspect_package(built.path).tar_sha256 == expected
    assert uncompressed_sha256(built.path) == expected
    with built.path.open("rb") as handle:
        assert uncompressed_sha256(handle) == expected
