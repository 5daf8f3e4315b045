"""Conformance with distribution-spec 1.1 (spec.md of opencontainers/distribution-spec v1.1.1), the
categories this registry claims: **Pull** (which every registry MUST support) and **Content
Discovery** (listing tags and referrers), plus the API's "Determining Support" and "Error Codes"
sections they rely on. One test per requirement the spec states for them, each quoting it.

The registry does not claim Push or Content Management: every write answers 405 UNSUPPORTED
(tests/registry/test_oci_api.py), which is what the spec asks of a registry where deletion is
disabled ("MUST respond with either a 400 Bad Request or a 405 Method Not Allowed").

Most tests talk HTTP to a real registry process (gunicorn) holding every bundled example; the
referrer descriptors, which need a referrer source, are checked in-process with the test source of
tests/registry/oci_tools.py."""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from django.test import Client

from registry import oci
from tests.registry.oci_tools import MANIFEST_ACCEPT, OCI_CODES, StatementSource

if TYPE_CHECKING:
    from tests.factories import Publisher
    from tests.live_registry import LiveRegistry

pytest_plugins = ["tests.factories"]

NAME_RE = re.compile(r"[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(\/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*")
TAG_RE = re.compile(r"[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}")
UNKNOWN_DIGEST = "sha256:" + "0" * 64
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"

# One worker (and one examples registry) for every test of the real registry under xdist.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("oci-live")]


class Registry:
    """The examples registry over HTTP, with the repository under test (cilium: three versions)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(base_url=url, timeout=30)
        self.repository = "extensions/cilium"
        tags = self.get(f"/v2/{self.repository}/tags/list").json()["tags"]
        self.tag = tags[0]
        first = self.get(f"/v2/{self.repository}/manifests/{self.tag}", headers={"Accept": MANIFEST_ACCEPT})
        self.manifest_bytes = first.content
        self.manifest = first.json()
        self.digest = first.headers["Docker-Content-Digest"]
        self.layer = self.manifest["layers"][0]
        self.config = self.manifest["config"]

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.http.get(path, **kwargs)

    def head(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.http.head(path, **kwargs)

    def manifest_url(self, reference: str) -> str:
        return f"/v2/{self.repository}/manifests/{reference}"

    def blob_url(self, digest: str) -> str:
        return f"/v2/{self.repository}/blobs/{digest}"


@pytest.fixture(scope="module")
def reg(examples_registry: LiveRegistry) -> Registry:
    return Registry(examples_registry.url)


def sha256(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


# === Pull: pulling manifests =========================================================================


@pytest.mark.parametrize("reference", ["latest!", "sha256:totallywrong", "1.14.6:x", "a" * 129])
def test_pull_a_reference_that_is_neither_a_digest_nor_a_tag_is_not_found(reg: Registry, reference: str) -> None:
    """ "<reference> MUST be either (a) the digest of the manifest or (b) a tag. The <reference> MUST
    NOT be in any other format." (and the conformance tool accepts 400 or 404 for one that is not)"""
    response = reg.get(reg.manifest_url(reference), headers={"Accept": MANIFEST_ACCEPT})
    assert response.status_code in (400, 404)


def test_pull_every_repository_name_matches_the_name_grammar(reg: Registry) -> None:
    """ "Throughout this document, <name> MUST match the following regular expression" (and the
    implementers' note: stay within 255 characters with the host name)."""
    repositories = reg.get("/v2/_catalog").json()["repositories"]
    assert len(repositories) >= 15
    for name in repositories:
        assert NAME_RE.fullmatch(name), name
        assert len(f"registry.example.org:5000/{name}") <= 255


def test_pull_every_tag_matches_the_tag_grammar(reg: Registry) -> None:
    """ "<reference> as a tag MUST be at most 128 characters in length and MUST match the following
    regular expression: [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}"."""
    for repository in reg.get("/v2/_catalog").json()["repositories"]:
        for tag in reg.get(f"/v2/{repository}/tags/list").json()["tags"]:
            assert len(tag) <= 128 and TAG_RE.fullmatch(tag), (repository, tag)


def test_pull_the_content_type_indicates_the_manifests_type(reg: Registry) -> None:
    """ "In a successful response, the Content-Type header will indicate the type of the returned
    manifest." / "If the manifest has a mediaType field, clients SHOULD reject unless the mediaType
    field's value matches the type specified by the Content-Type header.\""""
    response = reg.get(reg.manifest_url(reg.tag), headers={"Accept": MANIFEST_ACCEPT})
    assert response.headers["Content-Type"] == response.json()["mediaType"] == MANIFEST_ACCEPT


def test_pull_the_content_type_has_no_parameters(reg: Registry) -> None:
    """ "The registry SHOULD NOT include parameters on the Content-Type header.\""""
    for reference in (reg.tag, reg.digest):
        assert (
            ";" not in reg.get(reg.manifest_url(reference), headers={"Accept": MANIFEST_ACCEPT}).headers["Content-Type"]
        )


def test_pull_a_get_of_an_existing_manifest_is_200_with_the_manifest(reg: Registry) -> None:
    """ "A GET request to an existing manifest URL MUST provide the expected manifest, with a response
    code that MUST be 200 OK.\""""
    for reference in (reg.tag, reg.digest):
        response = reg.get(reg.manifest_url(reference), headers={"Accept": MANIFEST_ACCEPT})
        assert response.status_code == 200
        assert response.content == reg.manifest_bytes
        assert response.json()["layers"][0]["annotations"]["org.opencontainers.image.title"].endswith(".tar.gz")


def test_pull_docker_content_digest_is_the_digest_of_the_returned_manifest(reg: Registry) -> None:
    """ "A successful response SHOULD contain the digest of the uploaded blob in the header
    Docker-Content-Digest." / "if it is used, the client MUST verify the value matches the returned
    manifest.\""""
    for reference in (reg.tag, reg.digest):
        response = reg.get(reg.manifest_url(reference), headers={"Accept": MANIFEST_ACCEPT})
        assert response.headers["Docker-Content-Digest"] == sha256(response.content)


def test_pull_a_manifest_by_digest_matches_that_digest(reg: Registry) -> None:
    """ "If the <reference> part of a manifest request is a digest, clients SHOULD verify the returned
    manifest matches this digest.\""""
    assert sha256(reg.get(reg.manifest_url(reg.digest), headers={"Accept": MANIFEST_ACCEPT}).content) == reg.digest


def test_pull_a_manifest_that_is_not_found_is_404(reg: Registry) -> None:
    """ "If the manifest is not found in the repository, the response code MUST be 404 Not Found.\""""
    for reference in ("9.9.9", UNKNOWN_DIGEST):
        assert reg.get(reg.manifest_url(reference), headers={"Accept": MANIFEST_ACCEPT}).status_code == 404
    assert reg.get("/v2/extensions/no-such-thing/manifests/1.0.0").status_code == 404


# === Pull: pulling blobs =============================================================================


def test_pull_a_get_of_an_existing_blob_is_200_with_the_blob(reg: Registry) -> None:
    """ "A GET request to an existing blob URL MUST provide the expected blob, with a response code
    that MUST be 200 OK.\""""
    for descriptor in (reg.layer, reg.config):
        response = reg.get(reg.blob_url(descriptor["digest"]))
        assert response.status_code == 200
        assert len(response.content) == descriptor["size"]


def test_pull_a_blobs_docker_content_digest_matches_the_body(reg: Registry) -> None:
    """ "A successful response SHOULD contain the digest of the uploaded blob in the header
    Docker-Content-Digest. If present, the value of this header MUST be a digest matching that of
    the response body.\""""
    for descriptor in (reg.layer, reg.config):
        response = reg.get(reg.blob_url(descriptor["digest"]))
        assert response.headers["Docker-Content-Digest"] == sha256(response.content)


def test_pull_a_blobs_body_matches_the_requested_digest(reg: Registry) -> None:
    """ "Clients SHOULD verify that the response body matches the requested digest.\""""
    for descriptor in (reg.layer, reg.config):
        assert sha256(reg.get(reg.blob_url(descriptor["digest"])).content) == descriptor["digest"]


def test_pull_a_blob_that_is_not_found_is_404(reg: Registry) -> None:
    """ "If the blob is not found in the repository, the response code MUST be 404 Not Found.\""""
    assert reg.get(reg.blob_url(UNKNOWN_DIGEST)).status_code == 404
    other = reg.get("/v2/extensions/etcd/blobs/" + reg.layer["digest"])  # cilium's, not etcd's
    assert other.status_code == 404


def test_pull_blobs_support_range_requests(reg: Registry) -> None:
    """ "A registry SHOULD support the Range request header in accordance with RFC 9110.\""""
    whole = reg.get(reg.blob_url(reg.layer["digest"])).content
    assert reg.head(reg.blob_url(reg.layer["digest"])).headers["Accept-Ranges"] == "bytes"
    part = reg.get(reg.blob_url(reg.layer["digest"]), headers={"Range": "bytes=5-49"})
    assert part.status_code == 206
    assert part.content == whole[5:50]
    assert part.headers["Content-Range"] == f"bytes 5-49/{len(whole)}"
    beyond = reg.get(reg.blob_url(reg.layer["digest"]), headers={"Range": f"bytes={len(whole)}-"})
    assert beyond.status_code == 416
    assert beyond.headers["Content-Range"] == f"bytes */{len(whole)}"


# === Pull: checking if content exists ================================================================


def test_pull_a_head_of_an_existing_manifest_or_blob_is_200(reg: Registry) -> None:
    """ "A HEAD request to an existing blob or manifest URL MUST return 200 OK.\""""
    for url in (reg.manifest_url(reg.tag), reg.manifest_url(reg.digest), reg.blob_url(reg.layer["digest"])):
        response = reg.head(url, headers={"Accept": MANIFEST_ACCEPT})
        assert response.status_code == 200, url
        assert response.content == b""


def test_pull_a_head_carries_docker_content_digest(reg: Registry) -> None:
    """ "A successful response SHOULD contain the digest of the uploaded blob in the header
    Docker-Content-Digest.\""""
    assert (
        reg.head(reg.manifest_url(reg.tag), headers={"Accept": MANIFEST_ACCEPT}).headers["Docker-Content-Digest"]
        == reg.digest
    )
    for descriptor in (reg.layer, reg.config):
        assert reg.head(reg.blob_url(descriptor["digest"])).headers["Docker-Content-Digest"] == descriptor["digest"]


def test_pull_a_head_carries_the_size_in_content_length(reg: Registry) -> None:
    """ "A successful response SHOULD contain the size in bytes of the uploaded blob in the header
    Content-Length.\""""
    manifest = reg.head(reg.manifest_url(reg.digest), headers={"Accept": MANIFEST_ACCEPT})
    assert manifest.headers["Content-Length"] == str(len(reg.manifest_bytes))
    for descriptor in (reg.layer, reg.config):
        assert reg.head(reg.blob_url(descriptor["digest"])).headers["Content-Length"] == str(descriptor["size"])


def test_pull_a_head_of_missing_content_is_404(reg: Registry) -> None:
    """ "If the blob or manifest is not found in the repository, the response code MUST be 404 Not
    Found.\""""
    for url in (reg.manifest_url("9.9.9"), reg.manifest_url(UNKNOWN_DIGEST), reg.blob_url(UNKNOWN_DIGEST)):
        assert reg.head(url, headers={"Accept": MANIFEST_ACCEPT}).status_code == 404, url


# === API: determining support, error codes ===========================================================


def test_api_get_v2_is_200(reg: Registry) -> None:
    """ "To check whether or not the registry implements this specification, perform a GET request to
    the following endpoint: /v2/. If the response is 200 OK, then the registry implements this
    specification.\""""
    assert reg.get("/v2/").status_code == 200


def test_api_a_4xx_json_body_is_the_errors_format_with_the_specs_codes(reg: Registry) -> None:
    """ "If the response body is in JSON format, it MUST have the following format: {"errors": [{"code",
    "message", "detail"}]}" / "The code field MUST be a unique identifier, containing only uppercase
    alphabetic characters and underscores." / "The code field MUST be one of the following".\""""
    failures = [
        reg.get(reg.manifest_url("9.9.9")),
        reg.get(reg.manifest_url("sha256:totallywrong")),
        reg.get(reg.blob_url(UNKNOWN_DIGEST)),
        reg.get("/v2/extensions/nope/tags/list"),
        reg.get(f"/v2/{reg.repository}/referrers/not-a-digest"),
        reg.get(f"/v2/{reg.repository}/tags/list?n=many"),
        reg.http.put(reg.manifest_url(reg.tag), content=reg.manifest_bytes),
        reg.http.delete(reg.blob_url(reg.layer["digest"])),
        reg.http.post(f"/v2/{reg.repository}/blobs/uploads/"),
    ]
    for response in failures:
        assert 400 <= response.status_code < 500, response
        assert response.headers["Content-Type"] == "application/json"
        body = response.json()
        assert list(body) == ["errors"] and body["errors"], body
        for error in body["errors"]:
            assert set(error) == {"code", "message", "detail"}, error
            assert re.fullmatch(r"[A-Z_]+", error["code"]) and error["code"] in OCI_CODES, error
            assert isinstance(error["message"], str)


# === Content discovery: listing tags =================================================================


def tags(reg: Registry, query: str = "") -> httpx.Response:
    return reg.get(f"/v2/{reg.repository}/tags/list{query}")


def test_discovery_a_tag_list_of_a_found_repository_is_200(reg: Registry) -> None:
    """ "Assuming a repository is found, this request MUST return a 200 OK response code.\""""
    assert tags(reg).status_code == 200


def test_discovery_the_tag_list_body_is_the_name_and_the_tags(reg: Registry) -> None:
    """ "Upon success, the response MUST be a json body in the following format: {"name": "<name>",
    "tags": [...]}" where <name> is the namespace of the repository.\""""
    body = tags(reg).json()
    assert set(body) == {"name", "tags"}
    assert body["name"] == reg.repository
    assert all(isinstance(tag, str) for tag in body["tags"])


def test_discovery_tags_are_in_lexical_order(reg: Registry) -> None:
    """ "If the list is not empty, the tags MUST be in lexical order (i.e. case-insensitive
    alphanumeric order).\""""
    for repository in reg.get("/v2/_catalog").json()["repositories"]:
        listed = reg.get(f"/v2/{repository}/tags/list").json()["tags"]
        assert listed, repository
        assert listed == sorted(listed, key=lambda t: (t.lower(), t)), repository


def test_discovery_n_limits_the_tags_and_fewer_come_only_with_a_link_or_at_the_end(reg: Registry) -> None:
    """ "The response to such a request MAY return fewer than <int> results, but only when the total
    number of tags attached to the repository is less than <int> or a Link header is provided.
    Otherwise, the response MUST include <int> results.\""""
    everything = tags(reg).json()["tags"]
    assert len(everything) == 3
    for n in (1, 2, 3, 4, 10):
        response = tags(reg, f"?n={n}")
        listed = response.json()["tags"]
        assert len(listed) == min(n, len(everything)) or "Link" in response.headers, n
        assert listed == everything[:n]


def test_discovery_the_link_header_is_rfc5988_with_rel_next(reg: Registry) -> None:
    """ "If included, the Link header MUST be set according to RFC5988 with the Relation Type
    rel="next".\""""
    link = tags(reg, "?n=1").headers["Link"]
    match = re.fullmatch(r'<([^>]+)>; rel="next"', link)
    assert match, link
    assert reg.get(match.group(1)).json()["tags"] == tags(reg).json()["tags"][1:2]


def test_discovery_n_zero_is_an_empty_list_without_a_link(reg: Registry) -> None:
    """ "When n is zero, this endpoint MUST return an empty list, and MUST NOT include a Link header.\""""
    response = tags(reg, "?n=0")
    assert response.status_code == 200
    assert response.json()["tags"] == []
    assert "Link" not in response.headers


def test_discovery_without_last_the_list_starts_at_the_beginning(reg: Registry) -> None:
    """ "Without the last query parameter (described next), the list returned will start at the
    beginning of the list and include <int> results.\""""
    assert tags(reg, "?n=2").json()["tags"] == tags(reg).json()["tags"][:2]


def test_discovery_last_starts_after_that_tag_not_including_it(reg: Registry) -> None:
    """ "A request of this sort will return up to <int> tags, beginning non-inclusively with
    <tagname>." / "The tags MUST be in lexical order.\""""
    everything = tags(reg).json()["tags"]
    assert tags(reg, f"?n=1&last={everything[0]}").json()["tags"] == everything[1:2]
    assert tags(reg, f"?n=5&last={everything[1]}").json()["tags"] == everything[2:]


def test_discovery_last_without_n_is_allowed(reg: Registry) -> None:
    """ "When using the last query parameter, the n parameter is OPTIONAL.\""""
    everything = tags(reg).json()["tags"]
    response = tags(reg, f"?last={everything[0]}")
    assert response.status_code == 200
    assert response.json()["tags"] == everything[1:]


# === Content discovery: listing referrers ============================================================


def referrers(reg: Registry, digest: str, query: str = "") -> httpx.Response:
    return reg.get(f"/v2/{reg.repository}/referrers/{digest}{query}")


def test_discovery_referrers_of_a_found_repository_are_200_never_404(reg: Registry) -> None:
    """ "Assuming a repository is found, this request MUST return a 200 OK response code. If the
    registry supports the referrers API, the registry MUST NOT return a 404 Not Found to a referrers
    API requests.\""""
    for digest in (reg.digest, UNKNOWN_DIGEST, reg.layer["digest"]):
        assert referrers(reg, digest).status_code == 200, digest


def test_discovery_referrers_of_an_invalid_digest_are_400(reg: Registry) -> None:
    """ "If the request is invalid, such as a <digest> with an invalid syntax, a 400 Bad Request MUST be
    returned.\""""
    for digest in ("not-a-digest", "sha256:", reg.tag):
        assert referrers(reg, digest).status_code == 400, digest


def test_discovery_referrers_are_an_image_index_of_that_content_type(reg: Registry) -> None:
    """ "Upon success, the response MUST be a JSON body with an image index containing a list of
    descriptors. The Content-Type header MUST be set to application/vnd.oci.image.index.v1+json.\""""
    response = referrers(reg, reg.digest)
    assert response.headers["Content-Type"] == INDEX_TYPE
    body = response.json()
    assert body["schemaVersion"] == 2 and body["mediaType"] == INDEX_TYPE and isinstance(body["manifests"], list)


def test_discovery_no_matching_referrers_is_an_empty_list(reg: Registry) -> None:
    """ "If a query results in no matching referrers, an empty manifest list MUST be returned.\""""
    # (reg.digest itself has one referrer: the version's build provenance.)
    assert referrers(reg, UNKNOWN_DIGEST).json()["manifests"] == []
    assert referrers(reg, reg.digest, "?artifactType=application/x-none").json()["manifests"] == []


def test_discovery_the_artifact_type_filter_is_applied_and_says_so(reg: Registry) -> None:
    """ "The registry SHOULD support filtering on artifactType." / "If filtering is requested and
    applied, the response MUST include a header OCI-Filters-Applied: artifactType.\""""
    response = referrers(reg, reg.digest, "?artifactType=application/vnd.in-toto%2Bjson")
    assert response.status_code == 200
    assert response.headers["OCI-Filters-Applied"] == "artifactType"
    assert [d["artifactType"] for d in response.json()["manifests"]] == ["application/vnd.in-toto+json"]
    assert "OCI-Filters-Applied" not in referrers(reg, reg.digest).headers


def test_discovery_a_complete_referrers_list_needs_no_link(reg: Registry) -> None:
    """ "A Link header MUST be included in the response when the descriptor list cannot be returned in
    a single manifest." The whole list is always returned in one index, so there is none.\""""
    assert "Link" not in referrers(reg, reg.digest).headers


# --- referrer descriptors (in-process, with a referrer source) ---------------------------------------


@pytest.fixture
def attached(client: Client, publisher: Publisher, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """etcd 3.5.9 with two referrers (the test source registered as provenance will be)."""
    monkeypatch.setattr(oci, "REFERRER_SOURCES", [StatementSource()])
    publisher("etcd", "3.5.9")
    digest = client.get("/v2/extensions/etcd/manifests/3.5.9")["Docker-Content-Digest"]
    index = json.loads(client.get(f"/v2/extensions/etcd/referrers/{digest}").content)
    manifests = {
        d["digest"]: json.loads(client.get(f"/v2/extensions/etcd/manifests/{d['digest']}").content)
        for d in index["manifests"]
    }
    return {"digest": digest, "index": index, "manifests": manifests}


def test_discovery_each_referrer_is_a_manifest_of_the_namespace_whose_subject_is_the_digest(
    attached: dict[str, Any],
) -> None:
    """ "Each descriptor is of an image manifest or index in the same <name> namespace with a subject
    field that specifies the value of <digest>.\""""
    assert len(attached["index"]["manifests"]) == 2
    for descriptor in attached["index"]["manifests"]:
        assert descriptor["mediaType"] == MANIFEST_ACCEPT
        assert attached["manifests"][descriptor["digest"]]["subject"]["digest"] == attached["digest"]


def test_discovery_each_referrer_carries_its_artifact_type(attached: dict[str, Any]) -> None:
    """ "The descriptors MUST include an artifactType field that is set to the value of the
    artifactType in the image manifest or index, if present. If the artifactType is empty or missing
    in the image manifest, the value of artifactType MUST be set to the config descriptor mediaType
    value.\""""
    for descriptor in attached["index"]["manifests"]:
        manifest = attached["manifests"][descriptor["digest"]]
        assert descriptor["artifactType"] == (manifest.get("artifactType") or manifest["config"]["mediaType"])


def test_discovery_each_referrer_carries_the_manifests_annotations(attached: dict[str, Any]) -> None:
    """ "The descriptors MUST include annotations from the image manifest or index.\""""
    for descriptor in attached["index"]["manifests"]:
        manifest = attached["manifests"][descriptor["digest"]]
        assert descriptor.get("annotations") == manifest.get("annotations")
    assert any(d.get("annotations") for d in attached["index"]["manifests"])
