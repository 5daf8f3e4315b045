"""The OCI distribution API, pull side (SPEC 7), through Django's test client: /v2/, tags with
pagination, manifests by tag and digest with Accept negotiation, blobs with Range, yanked versions,
referrers (with a referrer source registered as provenance will register one), unknown names and
digests, every write method, query counts, object storage, the backfill, and no 500 for any path."""

from __future__ import annotations

import gzip
import json
import urllib.parse
from typing import TYPE_CHECKING, Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from registry import downloadcounts, oci, services
from registry.models import Version
from registry.tokens import Actor
from tests.registry.oci_tools import (
    MANIFEST_ACCEPT,
    OCI_CODES,
    SBOM_ARTIFACT_TYPE,
    StatementSource,
    body_of,
    oci_error,
    sha256_digest,
)

if TYPE_CHECKING:
    from tests.factories import Publisher

pytest_plugins = ["tests.factories"]  # the user, token and publisher fixtures

V2 = "/v2/extensions"
DOCKER_V2 = "application/vnd.docker.distribution.manifest.v2+json"
LARGE_COLUMNS = ("readme_html", "manifest_text", '"files"', '"manifest"')


def manifest(client: Client, name: str, reference: str, **headers: str) -> Any:
    return client.get(f"{V2}/{name}/manifests/{reference}", HTTP_ACCEPT=MANIFEST_ACCEPT, **headers)


def parsed(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.content[:500]
    return dict(json.loads(response.content))


@pytest.fixture
def etcd(client: Client, publisher: Publisher) -> dict[str, Any]:
    """etcd 3.5.9, published: its package's path and bytes, and its manifest as served by tag."""
    path = publisher.package("etcd", "3.5.9")
    from tests.factories import publish

    assert publish(client, publisher.token, path).status_code == 202
    response = manifest(client, "etcd", "3.5.9")
    return {
        "package": path.read_bytes(),
        "response": response,
        "manifest": parsed(response),
        "digest": response["Docker-Content-Digest"],
    }


def yank(user: Any, name: str, version: str) -> None:
    services.version_yank(actor=Actor(user=user), name=name, version=version, reason="broken")


def unyank(user: Any, name: str, version: str) -> None:
    services.version_unyank(actor=Actor(user=user), name=name, version=version)


# --- /v2/ and the catalog ---------------------------------------------------------------------------


def test_v2_answers_200_so_clients_know_the_registry_speaks_oci(client: Client, db: None) -> None:
    response = client.get("/v2/")
    assert response.status_code == 200
    assert json.loads(response.content) == {}
    assert response["Docker-Distribution-API-Version"] == "registry/2.0"
    assert client.head("/v2/").status_code == 200


def test_reads_are_anonymous_whatever_authorization_is_sent(client: Client, etcd: dict[str, Any]) -> None:
    for header in ("Bearer pvr_not-a-token", "Basic dXNlcjpwYXNz"):
        response = client.get(f"{V2}/etcd/manifests/3.5.9", HTTP_AUTHORIZATION=header)
        assert response.status_code == 200, header
        assert response.content == etcd["response"].content


def test_the_catalog_lists_one_repository_per_extension_with_pagination(client: Client, publisher: Publisher) -> None:
    for name in ("etcd", "cilium", "redis"):
        publisher(name, "1.0.0")
    assert parsed(client.get("/v2/_catalog")) == {
        "repositories": ["extensions/cilium", "extensions/etcd", "extensions/redis"]
    }
    first = client.get("/v2/_catalog?n=2")
    assert parsed(first) == {"repositories": ["extensions/cilium", "extensions/etcd"]}
    assert first["Link"] == '</v2/_catalog?n=2&last=extensions%2Fetcd>; rel="next"'
    rest = client.get("/v2/_catalog?n=2&last=extensions/etcd")
    assert parsed(rest) == {"repositories": ["extensions/redis"]}
    assert "Link" not in rest


# --- tags -----------------------------------------------------------------------------------------


def test_tags_are_the_versions_with_plus_written_underscore(client: Client, publisher: Publisher) -> None:
    for version in ("3.5.9", "3.5.12", "3.6.0-rc.1", "4.0.0+build.7"):
        publisher("etcd", version)
    body = parsed(client.get(f"{V2}/etcd/tags/list"))
    # Lexical order (distribution-spec), not SemVer precedence.
    assert body == {"name": "extensions/etcd", "tags": ["3.5.12", "3.5.9", "3.6.0-rc.1", "4.0.0_build.7"]}


@pytest.mark.slow
def test_tags_paginate_across_120_versions_with_n_last_and_link(
    client: Client, publisher: Publisher, settings: Any
) -> None:
    settings.REGISTRY_RATE_PUBLISH = settings.REGISTRY_RATE_WRITE = "1000/minute"
    versions = [f"1.{i // 10}.{i % 10}" for i in range(120)]
    for version in versions:
        publisher("etcd", version)
    expected = sorted(versions)
    assert parsed(client.get(f"{V2}/etcd/tags/list"))["tags"] == expected
    pages: list[list[str]] = []
    url: str | None = f"{V2}/etcd/tags/list?n=50"
    while url is not None:
        response = client.get(url)
        pages.append(parsed(response)["tags"])
        link = response.get("Link")
        if link is None:
            url = None
        else:
            assert link.startswith("</v2/extensions/etcd/tags/list?") and link.endswith('>; rel="next"'), link
            url = link[1 : link.index(">")]
    assert [len(p) for p in pages] == [50, 50, 20]
    assert [tag for page in pages for tag in page] == expected
    after = expected[49]
    assert parsed(client.get(f"{V2}/etcd/tags/list?last={after}"))["tags"] == expected[50:]
    assert parsed(client.get(f"{V2}/etcd/tags/list?n=5&last={after}"))["tags"] == expected[50:55]


def test_n_zero_is_an_empty_list_without_a_link(client: Client, publisher: Publisher) -> None:
    publisher("etcd", "3.5.9")
    response = client.get(f"{V2}/etcd/tags/list?n=0")
    assert parsed(response) == {"name": "extensions/etcd", "tags": []}
    assert "Link" not in response


def test_n_past_the_end_answers_every_tag_without_a_link(client: Client, publisher: Publisher) -> None:
    publisher("etcd", "3.5.9")
    response = client.get(f"{V2}/etcd/tags/list?n=500")
    assert parsed(response)["tags"] == ["3.5.9"]
    assert "Link" not in response


@pytest.mark.parametrize("query", ["n=-1", "n=x", "n=1.5", "n=99999999999999999999", "last=..bad", "last=a%2Fb"])
def test_bad_pagination_parameters_are_a_400_naming_the_parameter(
    client: Client, publisher: Publisher, query: str
) -> None:
    publisher("etcd", "3.5.9")
    error = oci_error(client.get(f"{V2}/etcd/tags/list?{query}"), 400, "UNSUPPORTED")
    assert error["detail"]["parameter"] == query.split("=")[0]
    assert query.split("=")[0] in error["message"]


# --- manifests ------------------------------------------------------------------------------------


def test_a_manifest_by_tag_carries_its_digest_type_and_length(etcd: dict[str, Any]) -> None:
    response = etcd["response"]
    assert response["Content-Type"] == "application/vnd.oci.image.manifest.v1+json"
    assert response["Docker-Content-Digest"] == sha256_digest(response.content)
    assert response["Content-Length"] == str(len(response.content))
    assert response["ETag"] == f'"{response["Docker-Content-Digest"]}"'
    assert response["Cache-Control"] == "public, max-age=0, must-revalidate"  # a yank moves the tag
    layer = etcd["manifest"]["layers"][0]
    assert layer["digest"] == sha256_digest(etcd["package"])
    assert layer["size"] == len(etcd["package"])
    assert layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip"
    assert layer["annotations"]["org.opencontainers.image.title"] == "etcd-3.5.9.tar.gz"
    assert etcd["manifest"]["artifactType"] == "application/vnd.provisioning.extension.v1"
    assert etcd["manifest"]["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json"
    assert etcd["manifest"]["annotations"]["org.opencontainers.image.version"] == "3.5.9"


def test_a_manifest_by_digest_is_the_same_document_and_immutable(client: Client, etcd: dict[str, Any]) -> None:
    response = manifest(client, "etcd", etcd["digest"])
    assert response.status_code == 200
    assert response.content == etcd["response"].content
    assert response["Docker-Content-Digest"] == etcd["digest"]
    assert response["Cache-Control"] == "public, max-age=31536000, immutable"


def test_head_of_a_manifest_answers_its_headers_without_a_body(client: Client, etcd: dict[str, Any]) -> None:
    for reference in ("3.5.9", etcd["digest"]):
        response = client.head(f"{V2}/etcd/manifests/{reference}", HTTP_ACCEPT=MANIFEST_ACCEPT)
        assert response.status_code == 200
        assert response.content == b""
        assert response["Docker-Content-Digest"] == etcd["digest"]
        assert response["Content-Length"] == str(len(etcd["response"].content))
        assert response["Content-Type"] == "application/vnd.oci.image.manifest.v1+json"


def test_if_none_match_with_the_digest_is_a_304(client: Client, etcd: dict[str, Any]) -> None:
    response = manifest(client, "etcd", "3.5.9", HTTP_IF_NONE_MATCH=f'"{etcd["digest"]}"')
    assert response.status_code == 304
    assert response["Docker-Content-Digest"] == etcd["digest"]
    assert manifest(client, "etcd", "3.5.9", HTTP_IF_NONE_MATCH='"sha256:00"').status_code == 200


@pytest.mark.parametrize(
    "accept",
    [
        "",
        "*/*",
        MANIFEST_ACCEPT,
        f"{DOCKER_V2}, application/vnd.oci.image.index.v1+json, {MANIFEST_ACCEPT}",
        f"{DOCKER_V2};q=0.9, {MANIFEST_ACCEPT};q=0.5",
    ],
)
def test_a_client_accepting_oci_manifests_gets_the_manifest(client: Client, etcd: dict[str, Any], accept: str) -> None:
    response = client.get(f"{V2}/etcd/manifests/3.5.9", HTTP_ACCEPT=accept)
    assert response.status_code == 200, accept
    assert response.content == etcd["response"].content
    assert response["Vary"] == "Accept"


@pytest.mark.parametrize(
    "accept",
    [DOCKER_V2, f"{DOCKER_V2}, application/vnd.docker.distribution.manifest.list.v2+json", f"{MANIFEST_ACCEPT};q=0"],
)
def test_a_client_asking_only_for_docker_manifests_gets_manifest_unknown(
    client: Client, etcd: dict[str, Any], accept: str
) -> None:
    for reference in ("3.5.9", etcd["digest"]):
        error = oci_error(client.get(f"{V2}/etcd/manifests/{reference}", HTTP_ACCEPT=accept), 404, "MANIFEST_UNKNOWN")
        assert "application/vnd.oci.image.manifest.v1+json" in error["message"]
        assert "Accept" in error["message"]
        assert error["detail"]["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert client.head(f"{V2}/etcd/manifests/3.5.9", HTTP_ACCEPT=accept).status_code == 404


def test_build_metadata_is_an_underscore_in_the_tag(client: Client, publisher: Publisher) -> None:
    publisher("etcd", "1.0.0+build.7")
    response = manifest(client, "etcd", "1.0.0_build.7")
    body = parsed(response)
    assert body["layers"][0]["annotations"]["org.opencontainers.image.title"] == "etcd-1.0.0+build.7.tar.gz"
    assert body["annotations"]["org.opencontainers.image.version"] == "1.0.0+build.7"
    # Precedence ignores build metadata (SPEC 2.2), as the rest of the API does.
    assert manifest(client, "etcd", "1.0.0").content == response.content


def test_the_config_blob_names_the_diff_id_of_the_package(client: Client, etcd: dict[str, Any]) -> None:
    descriptor = etcd["manifest"]["config"]
    response = client.get(f"{V2}/etcd/blobs/{descriptor['digest']}")
    assert response.status_code == 200
    assert sha256_digest(response.content) == descriptor["digest"] == response["Docker-Content-Digest"]
    assert len(response.content) == descriptor["size"]
    config = json.loads(response.content)
    assert config["rootfs"] == {"type": "layers", "diff_ids": [sha256_digest(gzip.decompress(etcd["package"]))]}
    assert config["config"]["Labels"] == etcd["manifest"]["annotations"]


def test_documents_are_rendered_from_what_was_stored_at_publish(client: Client, etcd: dict[str, Any]) -> None:
    row = Version.objects.get(extension__name="etcd")
    assert f"sha256:{row.oci_manifest_sha256}" == etcd["digest"]
    assert f"sha256:{row.oci_config_sha256}" == etcd["manifest"]["config"]["digest"]
    assert sha256_digest(row.oci_config.encode()) == etcd["manifest"]["config"]["digest"]


# --- blobs ----------------------------------------------------------------------------------------


def layer_url(etcd: dict[str, Any]) -> str:
    return f"{V2}/etcd/blobs/{etcd['manifest']['layers'][0]['digest']}"


def downloads(name: str) -> int:
    downloadcounts.flush()  # counts are written in batches, off the download path
    return int(Version.objects.get(extension__name=name).downloads)


def test_the_layer_is_the_package_streamed_from_storage(client: Client, etcd: dict[str, Any]) -> None:
    response = client.get(layer_url(etcd))
    assert response.status_code == 200
    assert response.streaming  # a FileResponse: never read whole into memory
    assert body_of(response) == etcd["package"]
    assert response["Docker-Content-Digest"] == sha256_digest(etcd["package"])
    assert response["Content-Length"] == str(len(etcd["package"]))
    assert response["Accept-Ranges"] == "bytes"
    assert response["Cache-Control"] == "public, max-age=31536000, immutable"
    assert downloads("etcd") == 1  # an OCI pull is a download


def test_head_of_a_blob_answers_its_size_and_digest_without_counting(client: Client, etcd: dict[str, Any]) -> None:
    for descriptor in (etcd["manifest"]["layers"][0], etcd["manifest"]["config"]):
        response = client.head(f"{V2}/etcd/blobs/{descriptor['digest']}")
        assert response.status_code == 200
        assert response.content == b""
        assert response["Content-Length"] == str(descriptor["size"])
        assert response["Docker-Content-Digest"] == descriptor["digest"]
    assert downloads("etcd") == 0


@pytest.mark.parametrize(
    ("header", "first", "last"),
    [("bytes=0-99", 0, 99), ("bytes=100-", 100, None), ("bytes=-50", -50, None), ("bytes=10-10", 10, 10)],
)
def test_a_byte_range_is_a_206_with_just_those_bytes(
    client: Client, etcd: dict[str, Any], header: str, first: int, last: int | None
) -> None:
    package = etcd["package"]
    expected = package[first:] if last is None else package[first : last + 1]
    response = client.get(layer_url(etcd), HTTP_RANGE=header)
    assert response.status_code == 206, header
    assert body_of(response) == expected
    start = first if first >= 0 else len(package) + first
    assert response["Content-Range"] == f"bytes {start}-{start + len(expected) - 1}/{len(package)}"
    assert response["Content-Length"] == str(len(expected))
    assert response["Docker-Content-Digest"] == sha256_digest(package)


def test_a_range_past_the_end_is_clipped_and_a_resumed_pull_is_not_counted_again(
    client: Client, etcd: dict[str, Any]
) -> None:
    package = etcd["package"]
    head = client.get(layer_url(etcd), HTTP_RANGE="bytes=0-99")
    tail = client.get(layer_url(etcd), HTTP_RANGE=f"bytes=100-{len(package) * 10}")
    assert body_of(head) + body_of(tail) == package
    assert downloads("etcd") == 1


def test_ranges_of_the_config_blob_work_too(client: Client, etcd: dict[str, Any]) -> None:
    url = f"{V2}/etcd/blobs/{etcd['manifest']['config']['digest']}"
    whole = client.get(url).content
    response = client.get(url, HTTP_RANGE="bytes=5-9")
    assert response.status_code == 206
    assert response.content == whole[5:10]


def test_a_range_outside_the_blob_is_a_416_naming_its_size(client: Client, etcd: dict[str, Any]) -> None:
    size = len(etcd["package"])
    for header in (f"bytes={size}-", f"bytes={size + 10}-{size + 20}", "bytes=-0"):
        response = client.get(layer_url(etcd), HTTP_RANGE=header)
        oci_error(response, 416, "UNSUPPORTED")
        assert response["Content-Range"] == f"bytes */{size}"


@pytest.mark.parametrize("header", ["bytes=0-1,5-9", "items=0-5", "bytes=9-2", "bytes=abc", "bytes=-", "bytes 0-5"])
def test_other_range_forms_are_ignored_and_the_whole_blob_is_sent(
    client: Client, etcd: dict[str, Any], header: str
) -> None:
    response = client.get(layer_url(etcd), HTTP_RANGE=header)
    assert response.status_code == 200, header
    assert body_of(response) == etcd["package"]


def test_if_range_with_another_etag_sends_the_whole_blob(client: Client, etcd: dict[str, Any]) -> None:
    digest = etcd["manifest"]["layers"][0]["digest"]
    stale = client.get(layer_url(etcd), HTTP_RANGE="bytes=0-9", HTTP_IF_RANGE='"sha256:other"')
    assert stale.status_code == 200
    assert body_of(stale) == etcd["package"]
    fresh = client.get(layer_url(etcd), HTTP_RANGE="bytes=0-9", HTTP_IF_RANGE=f'"{digest}"')
    assert fresh.status_code == 206
    assert body_of(fresh) == etcd["package"][:10]


def test_a_blob_is_only_found_in_its_own_repository(client: Client, etcd: dict[str, Any], publisher: Publisher) -> None:
    publisher("redis", "7.2.4")
    oci_error(client.get(layer_url(etcd).replace("/etcd/", "/redis/")), 404, "BLOB_UNKNOWN")
    config = etcd["manifest"]["config"]["digest"]
    oci_error(client.get(f"{V2}/redis/blobs/{config}"), 404, "BLOB_UNKNOWN")
    oci_error(
        client.get(f"{V2}/redis/manifests/{etcd['digest']}", HTTP_ACCEPT=MANIFEST_ACCEPT), 404, "MANIFEST_UNKNOWN"
    )


@pytest.mark.s3
def test_with_object_storage_a_blob_is_a_redirect_to_a_presigned_url(
    client: Client, publisher: Publisher, s3_storage: Any
) -> None:
    import urllib.request

    path = publisher.package("etcd", "3.5.9")
    from tests.factories import publish

    assert publish(client, publisher.token, path).status_code == 202
    package = path.read_bytes()
    url = f"{V2}/etcd/blobs/{sha256_digest(package)}"
    response = client.get(url)
    assert response.status_code == 307
    assert response["Docker-Content-Digest"] == sha256_digest(package)
    assert response["Cache-Control"] == "private, no-store"
    with urllib.request.urlopen(response["Location"], timeout=10) as fetched:
        assert fetched.read() == package
    ranged = urllib.request.Request(response["Location"], headers={"Range": "bytes=10-19"})
    with urllib.request.urlopen(ranged, timeout=10) as fetched:
        assert fetched.status == 206
        assert fetched.read() == package[10:20]
    head = client.head(url)  # answered here: no redirect for HEAD
    assert head.status_code == 200
    assert head["Content-Length"] == str(len(package))
    assert downloads("etcd") == 1


# --- yanked versions ------------------------------------------------------------------------------


def test_a_yanked_version_keeps_its_tag_and_its_manifest_says_yanked(
    client: Client, etcd: dict[str, Any], user: Any
) -> None:
    yank(user, "etcd", "3.5.9")
    assert parsed(client.get(f"{V2}/etcd/tags/list"))["tags"] == ["3.5.9"]
    response = manifest(client, "etcd", "3.5.9")
    yanked = parsed(response)
    assert yanked["annotations"].pop("io.provisioning.extension.yanked") == "true"
    assert yanked == etcd["manifest"]  # otherwise the same document: same config, same layer
    assert response["Docker-Content-Digest"] != etcd["digest"]
    assert body_of(client.get(layer_url(etcd))) == etcd["package"]  # still downloadable


def test_after_a_yank_the_plain_manifest_stays_valid_by_digest(client: Client, etcd: dict[str, Any], user: Any) -> None:
    yank(user, "etcd", "3.5.9")
    pinned = manifest(client, "etcd", etcd["digest"])  # a mirror's pin keeps working
    assert pinned.status_code == 200
    assert pinned.content == etcd["response"].content


def test_the_yanked_manifest_answers_while_the_version_is_yanked(
    client: Client, etcd: dict[str, Any], user: Any
) -> None:
    yank(user, "etcd", "3.5.9")
    yanked_digest = manifest(client, "etcd", "3.5.9")["Docker-Content-Digest"]
    assert manifest(client, "etcd", yanked_digest).status_code == 200
    unyank(user, "etcd", "3.5.9")
    assert manifest(client, "etcd", "3.5.9")["Docker-Content-Digest"] == etcd["digest"]
    oci_error(manifest(client, "etcd", yanked_digest), 404, "MANIFEST_UNKNOWN")
    yank(user, "etcd", "3.5.9")  # yanked again (for another reason): the same document
    assert manifest(client, "etcd", "3.5.9")["Docker-Content-Digest"] == yanked_digest


# --- unknown names, tags and digests --------------------------------------------------------------


def test_an_unknown_extension_is_name_unknown_on_every_endpoint(client: Client, etcd: dict[str, Any]) -> None:
    digest = etcd["digest"]
    for url in (
        f"{V2}/nothing/tags/list",
        f"{V2}/nothing/manifests/1.0.0",
        f"{V2}/nothing/manifests/{digest}",
        f"{V2}/nothing/blobs/{digest}",
        f"{V2}/nothing/referrers/{digest}",
    ):
        error = oci_error(client.get(url, HTTP_ACCEPT=MANIFEST_ACCEPT), 404, "NAME_UNKNOWN")
        assert "nothing" in error["message"], url
        assert client.head(url).status_code == 404


def test_a_repository_outside_extensions_or_with_an_invalid_name_is_name_unknown(
    client: Client, etcd: dict[str, Any]
) -> None:
    error = oci_error(client.get("/v2/library/ubuntu/manifests/latest"), 404, "NAME_UNKNOWN")
    assert "extensions/NAME" in error["message"]
    error = oci_error(client.get(f"{V2}/cert_manager/tags/list"), 404, "NAME_UNKNOWN")
    assert error["detail"]["suggestion"] == "extensions/cert-manager"
    oci_error(client.get("/v2/etcd/tags/list"), 404, "NAME_UNKNOWN")


def test_an_unknown_tag_is_manifest_unknown_listing_the_tags(client: Client, etcd: dict[str, Any]) -> None:
    error = oci_error(manifest(client, "etcd", "9.9.9"), 404, "MANIFEST_UNKNOWN")
    assert error["detail"]["tags"] == ["3.5.9"]
    assert "3.5.9" in error["message"]
    error = oci_error(manifest(client, "etcd", "latest"), 404, "MANIFEST_UNKNOWN")
    assert "neither a tag nor a digest" in error["message"] or "no tag" in error["message"]


def test_an_unknown_digest_is_manifest_unknown_or_blob_unknown(client: Client, etcd: dict[str, Any]) -> None:
    unknown = "sha256:" + "0" * 64
    error = oci_error(manifest(client, "etcd", unknown), 404, "MANIFEST_UNKNOWN")
    assert error["detail"]["digest"] == unknown
    error = oci_error(client.get(f"{V2}/etcd/blobs/{unknown}"), 404, "BLOB_UNKNOWN")
    assert error["detail"]["digest"] == unknown
    for other in ("sha512:" + "0" * 128, "sha256:ABC", "not-a-digest"):
        oci_error(client.get(f"{V2}/etcd/blobs/{other}"), 404, "BLOB_UNKNOWN")
    oci_error(manifest(client, "etcd", "sha512:" + "0" * 128), 404, "MANIFEST_UNKNOWN")


def test_uploads_and_unknown_paths_under_v2_answer_oci_errors(client: Client, etcd: dict[str, Any]) -> None:
    oci_error(client.get(f"{V2}/etcd/blobs/uploads/0b1c"), 404, "BLOB_UPLOAD_UNKNOWN")
    for path in ("/v2", "/v2/extensions", "/v2/extensions/etcd", "/v2/extensions/etcd/manifests"):
        oci_error(client.get(path), 404, "UNSUPPORTED")


# --- writes -----------------------------------------------------------------------------------------

WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def test_every_write_method_on_every_endpoint_is_a_405_and_changes_nothing(
    client: Client, etcd: dict[str, Any], token: str
) -> None:
    digest = etcd["digest"]
    paths = [
        "/v2/",
        "/v2/_catalog",
        f"{V2}/etcd/tags/list",
        f"{V2}/etcd/manifests/3.5.9",
        f"{V2}/etcd/manifests/4.0.0",
        f"{V2}/etcd/manifests/{digest}",
        f"{V2}/etcd/blobs/{etcd['manifest']['layers'][0]['digest']}",
        f"{V2}/etcd/blobs/uploads/",
        f"{V2}/etcd/blobs/uploads/?digest={digest}",
        f"{V2}/etcd/blobs/uploads/0b1c?digest={digest}",
        f"{V2}/etcd/blobs/uploads/?mount={digest}&from=extensions/redis",
        f"{V2}/etcd/referrers/{digest}",
        f"{V2}/newthing/manifests/1.0.0",
        "/v2/anything/at/all",
    ]
    for path in paths:
        for method in WRITE_METHODS:
            response = client.generic(
                method,
                path,
                data=etcd["response"].content,
                content_type=MANIFEST_ACCEPT,
                HTTP_AUTHORIZATION=f"Bearer {token}",
            )
            error = oci_error(response, 405, "UNSUPPORTED")
            assert response["Allow"] == "GET, HEAD", (method, path)
            assert method in error["message"], (method, path)
            assert "provisioning extension publish" in error["message"]
    assert parsed(client.get(f"{V2}/etcd/tags/list"))["tags"] == ["3.5.9"]
    assert manifest(client, "etcd", "3.5.9").content == etcd["response"].content
    assert Version.objects.count() == 1


# --- referrers ----------------------------------------------------------------------------------------


def test_referrers_of_a_manifest_are_an_empty_index_until_provenance_exists(
    client: Client, etcd: dict[str, Any]
) -> None:
    response = client.get(f"{V2}/etcd/referrers/{etcd['digest']}")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/vnd.oci.image.index.v1+json"
    assert json.loads(response.content) == {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [],
    }
    assert "OCI-Filters-Applied" not in response
    filtered = client.get(f"{V2}/etcd/referrers/{etcd['digest']}?artifactType=application/vnd.in-toto%2Bjson")
    assert filtered.status_code == 200
    assert filtered["OCI-Filters-Applied"] == "artifactType"
    assert json.loads(filtered.content)["manifests"] == []


def test_referrers_of_an_unknown_digest_are_empty_and_a_bad_digest_is_a_400(
    client: Client, etcd: dict[str, Any]
) -> None:
    response = client.get(f"{V2}/etcd/referrers/sha256:{'0' * 64}")
    assert response.status_code == 200
    assert json.loads(response.content)["manifests"] == []
    error = oci_error(client.get(f"{V2}/etcd/referrers/3.5.9"), 400, "DIGEST_INVALID")
    assert "digest" in error["message"]


@pytest.fixture
def source(monkeypatch: pytest.MonkeyPatch) -> StatementSource:
    """A referrer source registered as the provenance will register one."""
    registered = StatementSource()
    monkeypatch.setattr(oci, "REFERRER_SOURCES", [])
    oci.register_referrer_source(registered)
    oci.register_referrer_source(registered)  # registering twice adds it once
    assert [registered] == oci.REFERRER_SOURCES
    return registered


def test_a_registered_source_lists_its_referrers_with_type_and_annotations(
    client: Client, etcd: dict[str, Any], source: StatementSource
) -> None:
    index = parsed(client.get(f"{V2}/etcd/referrers/{etcd['digest']}"))
    assert [d["artifactType"] for d in index["manifests"]] == ["application/vnd.in-toto+json", SBOM_ARTIFACT_TYPE]
    assert index["manifests"][0]["annotations"] == {"org.opencontainers.image.created": "2024-01-01T00:00:00Z"}
    assert [s.version for s in source.asked] == ["3.5.9"]
    assert source.asked[0].manifest.digest == etcd["digest"]
    for descriptor in index["manifests"]:
        referrer = manifest(client, "etcd", descriptor["digest"])
        assert referrer.status_code == 200
        assert sha256_digest(referrer.content) == descriptor["digest"]
        body = json.loads(referrer.content)
        assert body["subject"]["digest"] == etcd["digest"]
        for blob in (body["config"], *body["layers"]):
            fetched = client.get(f"{V2}/etcd/blobs/{blob['digest']}")
            assert fetched.status_code == 200, blob
            assert sha256_digest(body_of(fetched)) == blob["digest"]


def test_the_artifact_type_filter_keeps_only_that_type(
    client: Client, etcd: dict[str, Any], source: StatementSource
) -> None:
    response = client.get(f"{V2}/etcd/referrers/{etcd['digest']}?artifactType=application/vnd.in-toto%2Bjson")
    assert response["OCI-Filters-Applied"] == "artifactType"
    assert [d["artifactType"] for d in parsed(response)["manifests"]] == ["application/vnd.in-toto+json"]
    none = client.get(f"{V2}/etcd/referrers/{etcd['digest']}?artifactType=application/x-nothing")
    assert parsed(none)["manifests"] == []


def test_a_yanked_manifest_has_the_referrers_of_its_own(
    client: Client, etcd: dict[str, Any], source: StatementSource, user: Any
) -> None:
    yank(user, "etcd", "3.5.9")
    yanked = manifest(client, "etcd", "3.5.9")["Docker-Content-Digest"]
    index = parsed(client.get(f"{V2}/etcd/referrers/{yanked}"))
    assert len(index["manifests"]) == 2
    assert source.asked[-1].manifest.digest == yanked


# --- cheap reads --------------------------------------------------------------------------------------


def assert_cheap(queries: CaptureQueriesContext, count: int) -> None:
    sqls = [q["sql"] for q in queries.captured_queries]
    assert len(sqls) == count, sqls
    for sql in sqls:
        for column in LARGE_COLUMNS:
            assert f'registry_version".{column}' not in sql and f"registry_version.{column}" not in sql, sql


def test_each_read_is_one_query_that_leaves_the_large_columns_alone(client: Client, etcd: dict[str, Any]) -> None:
    config = etcd["manifest"]["config"]["digest"]
    layer = etcd["manifest"]["layers"][0]["digest"]
    for url, count in (
        (f"{V2}/etcd/tags/list", 1),
        (f"{V2}/etcd/manifests/3.5.9", 1),
        (f"{V2}/etcd/manifests/{etcd['digest']}", 1),
        (f"{V2}/etcd/blobs/{config}", 1),
        (f"{V2}/etcd/referrers/{etcd['digest']}", 2),  # the version's row, then its provenance's
        ("/v2/_catalog", 1),
        ("/v2/", 0),
    ):
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url, HTTP_ACCEPT=MANIFEST_ACCEPT).status_code == 200, url
        assert_cheap(queries, count)
    with CaptureQueriesContext(connection) as queries:
        assert client.head(f"{V2}/etcd/blobs/{layer}").status_code == 200
    assert_cheap(queries, 1)
    with CaptureQueriesContext(connection) as queries:
        body_of(client.get(f"{V2}/etcd/blobs/{layer}"))
    assert_cheap(queries, 1)  # the lookup; the download is counted off the database (registry.downloadcounts)


def test_a_tag_list_of_120_versions_is_still_one_query(client: Client, etcd: dict[str, Any]) -> None:
    row = Version.objects.get()
    Version.objects.bulk_create(
        [
            Version(
                extension_id=row.extension_id,
                version=f"9.{i}.0",
                canonical=f"9.{i}.0",
                major=9,
                minor=i,
                patch=0,
                type=row.type,
                manifest=row.manifest,
                manifest_text=row.manifest_text,
                sha256=row.sha256,
                size=row.size,
                storage_key=row.storage_key,
            )
            for i in range(119)
        ]
    )
    with CaptureQueriesContext(connection) as queries:
        tags = parsed(client.get(f"{V2}/etcd/tags/list"))["tags"]
    assert len(tags) == 120
    assert_cheap(queries, 1)


# --- the backfill of versions published before OCI ----------------------------------------------------


def test_the_migration_backfill_renders_the_same_documents(client: Client, etcd: dict[str, Any]) -> None:
    columns = ("oci_config", "oci_config_sha256", "oci_manifest_sha256", "oci_yanked_manifest_sha256")
    before = Version.objects.values(*columns).get()
    Version.objects.update(**dict.fromkeys(columns, ""))
    oci_error(manifest(client, "etcd", "3.5.9"), 404, "MANIFEST_UNKNOWN")  # not yet available
    seen: list[str] = []
    assert oci.backfill(Version, progress=seen.append) == 1
    assert seen == ["etcd 3.5.9"]
    assert Version.objects.values(*columns).get() == before
    assert manifest(client, "etcd", "3.5.9").content == etcd["response"].content
    assert oci.backfill(Version) == 0  # nothing left to do


# --- nothing gets a 500 -------------------------------------------------------------------------------

_text = st.text(st.characters(exclude_categories=("Cs",)), min_size=0, max_size=40)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(segment=_text, value=_text, method=st.sampled_from(["GET", "HEAD", "GET", "PUT", "DELETE"]))
def test_no_v2_request_gets_a_500(client: Client, etcd: dict[str, Any], segment: str, value: str, method: str) -> None:
    word = urllib.parse.quote(segment, safe="")
    param = urllib.parse.quote(value, safe="")
    urls = [
        f"/v2/{word}",
        f"/v2/{word}/tags/list",
        f"{V2}/{word}/tags/list?n={param}&last={word}",
        f"{V2}/etcd/tags/list?n={word}&last={param}",
        f"{V2}/etcd/manifests/{word}",
        f"{V2}/{word}/manifests/3.5.9",
        f"{V2}/etcd/blobs/{word}",
        f"{V2}/etcd/blobs/sha256:{word}",
        f"{V2}/etcd/referrers/{word}?artifactType={param}",
        f"{V2}/etcd/referrers/{etcd['digest']}?artifactType={param}",
        f"/v2/_catalog?n={param}&last={word}",
    ]
    for url in urls:
        note(url)
        response = client.generic(
            method, url, HTTP_ACCEPT=value.encode("latin-1", "replace").decode("latin-1"), HTTP_RANGE=f"bytes={value}"
        )
        assert response.status_code < 500, (url, response.content[:300])
        if response.status_code >= 400 and method != "HEAD":
            body = json.loads(response.content)
            assert [e["code"] in OCI_CODES for e in body["errors"]] == [True], body


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_errors_met_before_the_views_under_v2_are_oci_error_documents(method: str) -> None:
    """Django's handlers (a middleware's refusal, an outage or a failure before the OCI views)
    answer under /v2 as the views do: OCI's error document and the API version header."""
    from django.test import RequestFactory

    from registry import views
    from registry.errors import StorageUnavailable

    request = RequestFactory().generic(method, "/v2/provisioning/etcd/tags/list")
    try:
        raise RuntimeError("a middleware failed")
    except RuntimeError:
        failed = views.handler500(request)
    answers = {
        403: views.handler403(request, None),
        500: failed,
        503: views.unavailable(request, StorageUnavailable("the storage is unavailable; try again later")),
    }
    codes = {403: "DENIED", 500: "UNKNOWN", 503: "UNAVAILABLE"}
    for status, response in answers.items():
        assert response.status_code == status
        assert response["Docker-Distribution-API-Version"] == "registry/2.0"
        assert response["Content-Type"] == "application/json"
        if method == "GET":
            [error] = json.loads(response.content)["errors"]
            assert error["code"] == codes[status] and error["message"] and error["message"] != "None"
        else:
            assert response.content == b""
    assert answers[503]["Retry-After"]
