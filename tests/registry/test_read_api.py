"""The read API (SPEC 3.2): one extension, one version, the lookup by kind, dependents, and what
is provided by kind; invalid names and versions; yanked versions."""

from __future__ import annotations

import urllib.parse
from typing import TYPE_CHECKING, Any

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extensions.versions import Constraint
from registry import services
from registry.tokens import Actor

if TYPE_CHECKING:
    from tests.factories import Publisher

pytest_plugins = ["tests.factories"]  # the user, token and publisher fixtures

API = "/api/v1/extensions"
BASE = "http://testserver"

ITEM_FIELDS = {
    "name",
    "type",
    "version",
    "description",
    "author",
    "repository",
    "source",
    "published_at",
    "download_url",
    "checksum",
    "size",
    "tags",
    "downloads",
}
DETAIL_FIELDS = ITEM_FIELDS | {
    "latest_version",
    "license",
    "homepage",
    "provides",
    "owners",
    "versions",
    "created_at",
    "updated_at",
}
VERSION_SUMMARY_FIELDS = {
    "version",
    "yanked",
    "yanked_reason",
    "published_at",
    "sha256",
    "size",
    "downloads",
    "download_url",
}
VERSION_FIELDS = {
    "reproducible",
    "provenance",
    "name",
    "version",
    "type",
    "description",
    "manifest",
    "dependencies",
    "provides",
    "provisioning_version",
    "sha256",
    "checksum",
    "size",
    "yanked",
    "yanked_reason",
    "yanked_at",
    "published_at",
    "published_by",
    "build",
    "downloads",
    "readme_html",
    "files",
    "download_url",
}
NO_PROVIDES = {"providers": [], "taskservs": [], "clusters": [], "templates": []}


def data(client: Client, url: str, status: int = 200) -> Any:
    response = client.get(url)
    assert response.status_code == status, response.content
    body = response.json()
    assert body["success"] is (status < 400)
    return body["data"] if status < 400 else body["error"]


def yank(user: Any, name: str, version: str, reason: str = "broken") -> None:
    services.version_yank(actor=Actor(user=user), name=name, version=version, reason=reason)


# --- one extension ----------------------------------------------------------------------------------


def test_it_shows_an_extension_with_its_owners_metadata_and_versions_newest_first(
    client: Client, publisher: Publisher
) -> None:
    old = publisher("etcd", "3.5.9", keywords=("kv", "raft"), description="Distributed key-value store")
    new = publisher("etcd", "3.5.12", keywords=("kv", "raft"), description="Distributed key-value store")
    got = data(client, f"{API}/etcd/")
    assert set(got) == DETAIL_FIELDS
    sha = new["upload"]["sha256"]
    assert {k: got[k] for k in ITEM_FIELDS - {"published_at"}} == {
        "name": "etcd",
        "type": "taskserv",
        "version": "3.5.12",
        "description": "Distributed key-value store",
        "author": "Test Author <test@example.com>",
        "repository": "https://example.com/etcd",
        "source": "registry",
        "download_url": f"{BASE}/api/v1/extensions/etcd/versions/3.5.12/download",
        "checksum": f"sha256:{sha}",
        "size": new["upload"]["size"],
        "tags": ["kv", "raft"],
        "downloads": 0,
    }
    assert got["latest_version"] == "3.5.12"
    assert got["license"] == "MIT"
    assert got["homepage"] is None
    assert got["provides"] == {**NO_PROVIDES, "taskservs": ["etcd"]}
    assert got["owners"] == ["alice"]
    assert [v["version"] for v in got["versions"]] == ["3.5.12", "3.5.9"]  # SemVer order, not text order
    assert all(set(v) == VERSION_SUMMARY_FIELDS for v in got["versions"])
    oldest = got["versions"][1]
    assert oldest["sha256"] == old["upload"]["sha256"]
    assert oldest["size"] == old["upload"]["size"]
    assert (oldest["yanked"], oldest["yanked_reason"], oldest["downloads"]) == (False, "", 0)
    assert oldest["download_url"] == f"{BASE}/api/v1/extensions/etcd/versions/3.5.9/download"
    assert got["published_at"] == got["versions"][0]["published_at"]
    assert got["created_at"] and got["updated_at"]


def test_yanked_versions_are_flagged_and_the_latest_is_the_newest_non_yanked(
    client: Client, publisher: Publisher, user: Any
) -> None:
    publisher("etcd", "3.5.9")
    publisher("etcd", "3.5.12")
    yank(user, "etcd", "3.5.12", reason="data loss on upgrade")
    got = data(client, f"{API}/etcd/")
    assert got["version"] == got["latest_version"] == "3.5.9"
    assert got["download_url"].endswith("/etcd/versions/3.5.9/download")
    newest = got["versions"][0]
    assert (newest["version"], newest["yanked"], newest["yanked_reason"]) == ("3.5.12", True, "data loss on upgrade")
    version = data(client, f"{API}/etcd/versions/3.5.12/")
    assert (version["yanked"], version["yanked_reason"]) == (True, "data loss on upgrade")
    assert version["yanked_at"] is not None


def test_an_extension_whose_versions_are_all_yanked_is_still_shown_without_a_version(
    client: Client, publisher: Publisher, user: Any
) -> None:
    publisher("etcd", "3.5.9", keywords=("kv",))
    yank(user, "etcd", "3.5.9")
    got = data(client, f"{API}/etcd/")
    assert got["version"] is None
    assert got["latest_version"] is None
    assert (got["published_at"], got["download_url"], got["checksum"], got["size"]) == (None, None, None, None)
    # what describes it still comes from its newest version
    assert got["tags"] == ["kv"]
    assert got["author"] == "Test Author <test@example.com>"
    assert [(v["version"], v["yanked"]) for v in got["versions"]] == [("3.5.9", True)]
    found = data(client, f"{API}/?q=etcd")
    assert [(i["name"], i["version"], i["download_url"]) for i in found["items"]] == [("etcd", None, None)]


def test_an_unknown_extension_is_a_404(client: Client, db: None) -> None:
    error = data(client, f"{API}/nothing/", status=404)
    assert error["code"] == "not_found"
    assert "'nothing'" in error["message"]


@pytest.mark.parametrize(
    "path",
    [
        "/Bad_Name/",
        "/Bad_Name/dependents/",
        "/Bad_Name/versions/1.0.0/",
        "/Bad_Name/versions/1.0.0/download",
        "/taskserv/Bad_Name",
    ],
)
def test_a_name_that_breaks_the_naming_rule_is_a_404_suggesting_the_valid_spelling(
    client: Client, db: None, path: str
) -> None:
    error = data(client, f"{API}{path}", status=404)
    assert error["code"] == "not_found"
    assert "not a valid name" in error["message"]
    assert "lower-case letters" in error["message"]
    assert "did you mean 'bad-name'?" in error["message"]


def test_unknown_paths_under_the_api_answer_the_json_404_envelope(client: Client, db: None) -> None:
    response = client.get("/api/v1/no/such/thing")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "success": False,
        "error": {"code": "not_found", "message": "no such endpoint: GET /api/v1/no/such/thing", "details": []},
    }


# --- one version -----------------------------------------------------------------------------------


def test_it_shows_a_version_with_manifest_dependencies_provides_files_and_build(
    client: Client, publisher: Publisher
) -> None:
    publisher("etcd", "3.5.9")
    build = publisher(
        "kubernetes",
        "1.28.0",
        dependencies=["etcd ^3.5"],
        provides={"taskservs": ["kubernetes", "kubectl"]},
        description="Kubernetes",
        readme="# Kubernetes\n\nRuns **pods**.\n\n<script>alert(1)</script>\n",
    )
    got = data(client, f"{API}/kubernetes/versions/1.28.0/")
    assert set(got) == VERSION_FIELDS
    sha = build["upload"]["sha256"]
    assert got["name"] == "kubernetes"
    assert got["version"] == "1.28.0"
    assert got["type"] == "taskserv"
    assert got["description"] == "Kubernetes"
    assert got["dependencies"] == [{"name": "etcd", "constraint": "^3.5", "normal": str(Constraint.parse("^3.5"))}]
    assert got["provides"] == {**NO_PROVIDES, "taskservs": ["kubectl", "kubernetes"]}
    assert got["provisioning_version"] == str(Constraint.parse(">=1.0.0"))
    assert (got["sha256"], got["checksum"], got["size"]) == (sha, f"sha256:{sha}", build["upload"]["size"])
    assert (got["yanked"], got["yanked_reason"], got["yanked_at"]) == (False, "", None)
    assert got["published_by"] == "alice"
    assert got["build"] == build["id"]
    assert got["downloads"] == 0
    # built by the client's builder, the same as the registry's: rebuilt byte for byte
    assert got["reproducible"] == {
        "verified": True,
        "note": "rebuilt byte for byte from its own files by the registry's builder",
    }
    assert got["download_url"] == f"{BASE}/api/v1/extensions/kubernetes/versions/1.28.0/download"
    assert "<strong>pods</strong>" in got["readme_html"]
    assert "<script" not in got["readme_html"]
    assert [f["path"] for f in got["files"]] == [
        "README.md",
        "extension.toml",
        "nulib/kubernetes.nu",
        "templates/kubernetes.conf.j2",
    ]
    assert all(set(f) == {"path", "size", "sha256"} for f in got["files"])
    manifest = got["manifest"]
    assert (manifest["name"], manifest["version"], manifest["type"]) == ("kubernetes", "1.28.0", "taskserv")
    # The stored manifest keeps the normal form as "constraint" (older rows have only that) and
    # the written one as "written"; the API shows the written one as "constraint".
    assert manifest["dependencies"] == [
        {"name": "etcd", "constraint": str(Constraint.parse("^3.5")), "written": "^3.5"}
    ]
    assert manifest["provides"]["taskservs"] == ["kubernetes", "kubectl"]


def test_build_metadata_in_the_url_finds_the_same_version(client: Client, publisher: Publisher) -> None:
    publisher("etcd", "1.0.0+build.5")
    for spelling in ("1.0.0", "1.0.0+build.5", "1.0.0+other"):
        got = data(client, f"{API}/etcd/versions/{spelling}/")
        assert got["version"] == "1.0.0+build.5"
    assert got["download_url"] == f"{BASE}/api/v1/extensions/etcd/versions/1.0.0/download"


@pytest.mark.parametrize("version", ["1.0", "v1.0.0", "01.0.0", "1.0.0-", "latest"])
def test_an_invalid_version_is_a_400_with_the_semver_hint(client: Client, publisher: Publisher, version: str) -> None:
    publisher("etcd", "1.0.0")
    error = data(client, f"{API}/etcd/versions/{version}/", status=400)
    assert error["code"] == "bad_request"
    assert f"{version!r} is not a valid version" in error["message"]
    assert "SemVer 2.0.0" in error["message"]
    assert error["details"] == [{"path": "version", "message": error["message"].split(": ", 1)[1]}]


def test_an_unknown_version_is_a_404_listing_the_published_ones(client: Client, publisher: Publisher) -> None:
    publisher("etcd", "3.5.9")
    publisher("etcd", "3.5.12")
    error = data(client, f"{API}/etcd/versions/4.0.0/", status=404)
    assert error["code"] == "not_found"
    assert error["message"] == "etcd has no version 4.0.0; published versions: 3.5.12, 3.5.9"
    assert error["details"] == [{"available": ["3.5.12", "3.5.9"]}]


# --- the lookup by kind and name --------------------------------------------------------------------


def test_the_lookup_by_kind_finds_the_extension_providing_the_name(client: Client, publisher: Publisher) -> None:
    publisher("kubernetes", "1.28.0", provides={"taskservs": ["kubernetes", "kubectl"]})
    got = data(client, f"{API}/taskserv/kubectl")
    assert set(got) == DETAIL_FIELDS | {"provided_by"}
    assert got["name"] == "kubernetes"
    assert got["version"] == "1.28.0"
    assert got["provided_by"] == {"kind": "taskserv", "name": "kubectl", "extension": "kubernetes", "version": "1.28.0"}
    assert data(client, f"{API}/taskserv/kubernetes")["name"] == "kubernetes"
    # the same shape as the extension's own page
    detail = data(client, f"{API}/kubernetes/")
    assert {k: v for k, v in got.items() if k != "provided_by"} == detail


def test_the_lookup_uses_the_latest_version_and_falls_back_to_the_extension_of_that_name(
    client: Client, publisher: Publisher
) -> None:
    publisher("kubernetes", "1.28.0", provides={"taskservs": ["kubernetes", "kubectl"]})
    publisher("kubernetes", "1.29.0", provides={"taskservs": ["kubernetes"]})
    error = data(client, f"{API}/taskserv/kubectl", status=404)
    assert error["message"] == "no extension provides the taskserv 'kubectl' in this registry"
    publisher("bare", "1.0.0", provides={})
    got = data(client, f"{API}/taskserv/bare")
    assert got["name"] == "bare"
    assert got["provided_by"] == {"kind": "taskserv", "name": "bare", "extension": "bare", "version": "1.0.0"}
    data(client, f"{API}/provider/bare", status=404)  # an extension of another type


def test_the_lookup_by_kind_accepts_every_singular_type(client: Client, publisher: Publisher) -> None:
    publisher("aws", "1.0.0", type="provider")
    publisher("k8s-ha", "1.0.0", type="cluster")
    publisher("basic-vm", "1.0.0", type="template")
    assert data(client, f"{API}/provider/aws")["type"] == "provider"
    assert data(client, f"{API}/cluster/k8s-ha")["type"] == "cluster"
    assert data(client, f"{API}/template/basic-vm")["type"] == "template"


@pytest.mark.parametrize(("kind", "hint"), [("widget", ""), ("taskservs", " (the singular 'taskserv')")])
def test_an_unknown_type_in_the_lookup_is_a_404_listing_the_types(
    client: Client, db: None, kind: str, hint: str
) -> None:
    error = data(client, f"{API}/{kind}/etcd", status=404)
    assert error["code"] == "not_found"
    assert error["message"] == f"unknown type {kind!r}: use one of provider, taskserv, cluster, template{hint}"


# --- dependents -----------------------------------------------------------------------------------


def test_dependents_lists_the_extensions_and_versions_that_depend_on_it(client: Client, publisher: Publisher) -> None:
    publisher("etcd", "3.5.9")
    publisher("kubernetes", "1.28.0", dependencies=["etcd ^3.5"])
    publisher("kubernetes", "1.29.0", dependencies=["etcd >=3.5.9"])
    publisher("kubernetes", "1.30.0")  # no longer depends on it
    publisher("flannel", "0.24.0", dependencies=["etcd"])
    publisher("coredns", "1.11.1")
    got = data(client, f"{API}/etcd/dependents/")
    assert (got["total"], got["limit"], got["offset"]) == (2, 20, 0)
    assert got["items"] == [
        {
            "name": "flannel",
            "type": "taskserv",
            "description": "The flannel taskserv for tests",
            "latest_version": "0.24.0",
            "versions": [{"version": "0.24.0", "constraint": "*", "normal": "*", "yanked": False}],
        },
        {
            "name": "kubernetes",
            "type": "taskserv",
            "description": "The kubernetes taskserv for tests",
            "latest_version": "1.30.0",
            "versions": [
                {
                    "version": "1.29.0",
                    "constraint": ">=3.5.9",
                    "normal": str(Constraint.parse(">=3.5.9")),
                    "yanked": False,
                },
                {"version": "1.28.0", "constraint": "^3.5", "normal": str(Constraint.parse("^3.5")), "yanked": False},
            ],
        },
    ]
    page = data(client, f"{API}/etcd/dependents/?limit=1&offset=1")
    assert (page["total"], [i["name"] for i in page["items"]]) == (2, ["kubernetes"])
    assert data(client, f"{API}/etcd/dependents/?offset=5")["items"] == []
    assert data(client, f"{API}/coredns/dependents/") == {"items": [], "total": 0, "limit": 20, "offset": 0}
    assert data(client, f"{API}/etcd/dependents/?limit=0", status=400)["details"][0]["path"] == "limit"
    data(client, f"{API}/nothing/dependents/", status=404)


# --- what is provided, by kind ----------------------------------------------------------------------


def test_the_listings_by_kind_show_what_the_latest_versions_provide(
    client: Client, publisher: Publisher, user: Any
) -> None:
    publisher("aws", "1.0.0", type="provider", description="AWS")
    publisher("etcd", "3.5.9", description="etcd")
    publisher("kubernetes", "1.28.0", provides={"taskservs": ["kubernetes", "kubectl"]}, description="k8s")
    publisher("k8s-ha", "1.0.0", type="cluster", description="HA cluster")
    publisher("basic-vm", "1.0.0", type="template", description="A VM")

    def listing(kinds: str) -> list[tuple[str, str, str, str]]:
        rows = data(client, f"{API}/{kinds}")
        assert all(set(r) == {"name", "extension", "version", "description"} for r in rows)
        return [(r["name"], r["extension"], r["version"], r["description"]) for r in rows]

    assert listing("taskservs") == [
        ("etcd", "etcd", "3.5.9", "etcd"),
        ("kubectl", "kubernetes", "1.28.0", "k8s"),
        ("kubernetes", "kubernetes", "1.28.0", "k8s"),
    ]
    assert listing("providers") == [("aws", "aws", "1.0.0", "AWS")]
    assert listing("clusters") == [("k8s-ha", "k8s-ha", "1.0.0", "HA cluster")]
    assert listing("templates") == [("basic-vm", "basic-vm", "1.0.0", "A VM")]

    publisher("kubernetes", "1.29.0", provides={"taskservs": ["kubernetes"]}, description="k8s 1.29")
    assert [r[:3] for r in listing("taskservs")] == [("etcd", "etcd", "3.5.9"), ("kubernetes", "kubernetes", "1.29.0")]
    yank(user, "kubernetes", "1.29.0")
    assert [r[:3] for r in listing("taskservs")] == [
        ("etcd", "etcd", "3.5.9"),
        ("kubectl", "kubernetes", "1.28.0"),
        ("kubernetes", "kubernetes", "1.28.0"),
    ]
    yank(user, "etcd", "3.5.9")
    assert [r[0] for r in listing("taskservs")] == ["kubectl", "kubernetes"]


def test_the_install_route_is_not_taken_for_a_lookup(client: Client, db: None) -> None:
    # POST /api/v1/extensions/taskservs/install is the install plan, not the lookup of a taskserv
    # named "install" (a reserved name); an empty body is a bad request there.
    response = client.post(f"{API}/taskservs/install", {}, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_request"


# --- nothing gets a 500 ---------------------------------------------------------------------------

_segments = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40)


@pytest.fixture
def etcd(publisher: Publisher) -> None:
    publisher("etcd", "3.5.9")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(segment=_segments, value=_segments)
def test_no_read_request_gets_a_500(client: Client, etcd: None, segment: str, value: str) -> None:
    word = urllib.parse.quote(segment, safe="")
    param = urllib.parse.quote(value, safe="")
    urls = [
        f"{API}/{word}/",
        f"{API}/{word}/dependents/?limit={param}",
        f"{API}/etcd/versions/{word}/",
        f"{API}/etcd/versions/{word}/download",
        f"{API}/{word}/versions/3.5.9/download",
        f"{API}/taskserv/{word}",
        f"{API}/{word}/etcd",
        f"{API}/?q={param}&type={word}",
        f"{API}/?keyword={param}&offset={word}",
    ]
    for url in urls:
        response = client.get(url)
        # 405: extensions/taskserv/install is the install plan's (POST) route, and "install" is a
        # reserved name, so no taskserv can be looked up by it.
        assert response.status_code in (200, 400, 404, 405), (url, response.content)
        if response.status_code != 200:
            assert response.json()["success"] is False


def test_an_unknown_extension_is_a_404_with_the_close_names(client: Client, publisher: Publisher) -> None:
    publisher("kubernetes", "1.28.0")
    publisher("kubectl", "1.0.0")
    for url in ("/api/v1/extensions/kubernets/", "/api/v1/extensions/kubernets/versions/1.0.0/",
                "/api/v1/extensions/kubernets/dependents/", "/api/v1/extensions/kubernets/owners/"):  # fmt: skip
        response = client.get(url)
        assert response.status_code == 404, url
        error = response.json()["error"]
        assert error["message"] == "no extension named 'kubernets' in this registry; did you mean 'kubernetes'?", url
        assert error["details"] == [{"path": "name", "name": "kubernets", "suggestions": ["kubernetes"]}]
    nothing = client.get("/api/v1/extensions/zzzzzz/").json()["error"]
    assert nothing["message"] == "no extension named 'zzzzzz' in this registry"
