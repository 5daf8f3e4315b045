"""Publishing through the HTTP API (SPEC 3.1-3.4): POST /api/v1/extensions/ answers 202 with the
build, GET /api/v1/builds/{id}/ follows it; every way a publish is refused, with its status, code
and details; and a refused publish leaves no trace but its failed build and audit event."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from builds.models import Build
from registry import services, storage
from registry.models import AuditEvent, Dependency, Extension, Ownership, Provide, Version
from registry.tokens import Actor
from tests.hostile_archives import package_bytes

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from tests.factories import Publisher

pytest_plugins = ["tests.factories"]  # the user, token and publisher fixtures

PUBLISH_URL = "/api/v1/extensions/"
BUILDS_URL = "/api/v1/builds/"
BASE = "http://testserver"
STEPS = [
    "upload",
    "fetch",
    "inspect",
    "rebuild",
    "validate",
    "check content",
    "readme",
    "interface",
    "store",
    "commit",
]


# Package storage private to each test (tests/conftest.py), so what it leaves can be listed exactly.
pytestmark = pytest.mark.usefixtures("private_storage")


# --- helpers ---------------------------------------------------------------------------------------


def post_file(
    client: Client,
    token: str | None,
    data: bytes | Path,
    *,
    url: str = PUBLISH_URL,
    field: str = "file",
    filename: str = "upload.tar.gz",
    **extra: Any,
) -> Any:
    """POST bytes (or a file) as a multipart upload, with the bearer token if given."""
    from tests.factories import autocommit_hooks

    if isinstance(data, Path):
        filename, data = data.name, data.read_bytes()
    if token is not None:
        extra.setdefault("HTTP_AUTHORIZATION", f"Bearer {token}")
    upload = SimpleUploadedFile(filename, data, content_type="application/gzip")
    with autocommit_hooks():
        return client.post(url, {field: upload}, **extra)


def error_of(response: Any, status: int, code: str) -> dict[str, Any]:
    """The error of a refused request (an envelope, or a 202 whose build failed: `refusal`), after
    checking its status and code."""
    from tests.factories import refusal

    answered, error = refusal(response)
    assert answered == status, response.content.decode("utf-8", "replace")
    assert error["code"] == code, error
    assert set(error) == {"code", "message", "details"}
    return error


def keys(prefix: str) -> set[str]:
    return {key for key, _ in storage.list_keys(prefix)}


def publish_ok(client: Client, token: str, path: Path) -> dict[str, Any]:
    response = post_file(client, token, path)
    assert response.status_code == 202, response.content.decode("utf-8", "replace")
    return dict(response.json()["data"])


def build_of(error: dict[str, Any]) -> Build:
    """The build a refused publish names in its details."""
    ids = {d["build"] for d in error["details"] if isinstance(d, dict) and "build" in d}
    assert len(ids) == 1, error
    return Build.objects.get(pk=ids.pop())


def assert_no_trace(name: str, build: Build, *, packages_before: set[str] = frozenset()) -> None:  # type: ignore[assignment]
    """Nothing of a refused publish remains but its failed build and its publish_failed audit event."""
    build.refresh_from_db()
    assert build.status == Build.Status.FAILED
    assert build.version_id is None
    assert not Version.objects.filter(extension__name=name, builds=build).exists()
    assert keys(storage.PACKAGES_PREFIX) == set(packages_before)
    assert keys(storage.UPLOADS_PREFIX) == set()
    events = AuditEvent.objects.filter(details__build=str(build.pk))
    assert [e.action for e in events] == [AuditEvent.Action.PUBLISH_FAILED]
    assert events[0].details["code"] == build.error_code


def manifest_toml(name: str, version: str, **fields: str) -> bytes:
    lines = [
        "[extension]",
        f'name = "{name}"',
        f'version = "{version}"',
        'description = "A hand-made package"',
        'type = "taskserv"',
        'license = "MIT"',
        "",
        "[provides]",
        f'taskservs = ["{name}"]',
    ]
    text = "\n".join(lines) + "\n" + "".join(f"{line}\n" for line in fields.values())
    return text.encode()


def hand_made(name: str, version: str, files: dict[str, bytes]) -> bytes:
    """A package built with tarfile by hand (MANIFEST.json computed): for contents the builder refuses."""
    return package_bytes(files, top=f"{name}-{version}")


# --- the happy path --------------------------------------------------------------------------------


def test_it_publishes_a_package_and_answers_202_with_the_build(
    client: Client, token: str, tmp_path: Path, nu: str
) -> None:
    from tests.factories import package

    path = package(tmp_path, "etcd", "3.5.9")
    response = post_file(client, token, path)

    assert response.status_code == 202, response.content
    body = response.json()
    assert body["success"] is True
    data = body["data"]
    assert response["Location"] == f"{BASE}/api/v1/builds/{data['id']}/" == data["url"]
    assert data["status"] == "succeeded"
    assert data["kind"] == "package"
    assert (data["name"], data["version"], data["filename"]) == ("etcd", "3.5.9", "etcd-3.5.9.tar.gz")
    assert data["submitted_by"] == "alice"
    assert data["attempts"] == 1
    assert data["error"] is None
    assert data["upload"] == {"size": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    assert data["result"] == {
        "name": "etcd",
        "version": "3.5.9",
        "url": f"{BASE}/api/v1/extensions/etcd/versions/3.5.9/",
    }
    assert [entry["step"] for entry in data["log"]] == STEPS
    for entry in data["log"]:
        assert entry["status"] == "passed", entry
        assert isinstance(entry["seconds"], float) and entry["seconds"] >= 0, entry
        assert entry["at"]
    assert data["created_at"] <= data["started_at"] <= data["finished_at"]


def test_the_published_version_is_readable_and_its_package_is_stored_by_its_sha256(
    client: Client, token: str, tmp_path: Path
) -> None:
    from tests.factories import package

    path = package(tmp_path, "etcd", "3.5.9")
    sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
    build = post_file(client, token, path).json()["data"]

    response = client.get(build["result"]["url"])
    assert response.status_code == 200
    version = response.json()["data"]
    assert (version["name"], version["version"], version["sha256"]) == ("etcd", "3.5.9", sha256)
    assert version["size"] == path.stat().st_size
    assert version["build"] == build["id"]

    key = storage.package_key(sha256)
    assert keys(storage.PACKAGES_PREFIX) == {key}
    with storage.open_file(key) as handle:
        assert hashlib.sha256(handle.read()).hexdigest() == sha256
    assert Version.objects.get(extension__name="etcd", version="3.5.9").storage_key == key
    assert keys(storage.UPLOADS_PREFIX) == set()  # the staged upload is gone once the build is over
    # The download is the very bytes that were uploaded.
    download = client.get("/api/v1/extensions/etcd/versions/3.5.9/download")
    assert download.status_code == 200
    assert b"".join(download.streaming_content) == path.read_bytes()


def test_it_records_dependencies_and_provides_of_the_version(publisher: Publisher) -> None:
    publisher("containerd", "1.7.13")
    publisher("etcd", "3.5.9")
    publisher(
        "kubernetes",
        "1.29.1",
        dependencies=["containerd ^1.7", "etcd >=3.5, <4"],
        provides={"taskservs": ["kubernetes", "kubeadm"]},
    )

    version = Version.objects.get(extension__name="kubernetes")
    assert sorted(version.dependencies.values_list("extension__name", "constraint")) == [
        ("containerd", ">=1.7.0, <2.0.0-0"),  # stored in normal form
        ("etcd", ">=3.5.0, <4.0.0-0"),
    ]
    assert sorted(version.provides.values_list("kind", "name")) == [("taskserv", "kubeadm"), ("taskserv", "kubernetes")]


def test_the_first_publish_makes_the_publisher_the_owner(
    client: Client, token: str, user: AbstractBaseUser, tmp_path: Path
) -> None:
    from tests.factories import publish_new

    publish_new(client, token, tmp_path / "a", "etcd", "3.5.9")
    publish_new(client, token, tmp_path / "b", "etcd", "3.5.12")

    ownerships = Ownership.objects.filter(extension__name="etcd")
    assert [(o.user_id, o.added_by_id) for o in ownerships] == [(user.pk, user.pk)]
    owners = client.get("/api/v1/extensions/etcd/owners/").json()["data"]["owners"]
    assert [o["username"] for o in owners] == ["alice"]


def test_a_publish_is_audited_with_its_actor_and_address(client: Client, token: str, tmp_path: Path) -> None:
    from tests.factories import package

    path = package(tmp_path, "etcd", "3.5.9")
    post_file(client, token, path, REMOTE_ADDR="192.0.2.7")

    event = AuditEvent.objects.get(action=AuditEvent.Action.PUBLISH)
    assert (event.actor_name, event.actor.get_username()) == ("alice", "alice")  # type: ignore[union-attr]
    assert event.address == "192.0.2.7"
    assert event.token_prefix == token[:12]
    assert (event.extension, event.version) == ("etcd", "3.5.9")
    assert event.details == {
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "size": path.stat().st_size,
        "first_publish": True,
    }
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.PUBLISH_FAILED).exists()


def test_the_readme_is_rendered_to_sanitized_html(client: Client, publisher: Publisher) -> None:
    readme = (
        "# Demo\n\n"
        "<script>alert('readme')</script>\n\n"
        "[click me](javascript:alert(1)) and [home](https://example.com/demo)\n\n"
        '<a href="javascript:alert(2)" onclick="alert(3)">raw link</a>\n\n'
        "| column | value |\n|---|---|\n| a | 1 |\n"
    )
    publisher("demo", "1.0.0", readme=readme)

    html = client.get("/api/v1/extensions/demo/versions/1.0.0/").json()["data"]["readme_html"]
    assert "<h1>Demo</h1>" in html
    assert "<script" not in html
    assert '<a href="javascript:' not in html.lower()
    assert html.count("<a ") == 1  # only the https link is a link; the raw HTML one is inert text
    assert '<a href="https://example.com/demo" rel="noopener noreferrer nofollow">home</a>' in html
    assert "<table>" in html and "<th>column</th>" in html and "<td>1</td>" in html


def test_a_readme_that_would_be_megabytes_of_html_is_kept_as_text_and_the_log_says_so(
    client: Client, publisher: Publisher
) -> None:
    # About 40 KB of Markdown (a 1 KB package): one long link reference used 4,100 times.
    build = publisher("demo", "1.0.0", readme="[r]: https://e.example/" + "a" * 8000 + "\n\n" + "[r]" * 4100 + "\n")
    step = next(e for e in build["log"] if e["step"] == "readme")
    assert (step["status"], step["message"]) == (
        "passed",
        "shown as text: its HTML would be more than 2,097,152 characters (allowed: at most that)",
    )
    html = client.get("/api/v1/extensions/demo/versions/1.0.0/").json()["data"]["readme_html"]
    assert html.startswith("<p><em>This README would be more than 2,097,152 characters of HTML") and len(html) < 60_000
    assert "<pre>[r]: https://e.example/aaa" in html and "<a " not in html


# --- following a build ------------------------------------------------------------------------------


def test_a_build_can_be_followed_by_its_id(client: Client, token: str, tmp_path: Path, nu: str) -> None:
    from tests.factories import publish_new

    build = publish_new(client, token, tmp_path, "etcd", "3.5.9")

    response = client.get(f"{BUILDS_URL}{build['id']}/")
    assert response.status_code == 200
    data = response.json()["data"]
    assert data == build  # the same document as the 202 answer
    assert [entry["step"] for entry in data["log"]] == STEPS
    assert all("seconds" in entry for entry in data["log"])
    assert data["result"]["url"] == f"{BASE}/api/v1/extensions/etcd/versions/3.5.9/"


def test_a_failed_build_shows_its_error_and_the_failed_step(client: Client, token: str) -> None:
    data = hand_made("demo", "1.0.0", {"extension.toml": manifest_toml("demo", "1.0.0"), "bad.json": b"{nope"})
    error = error_of(post_file(client, token, data), 422, "invalid_archive")

    response = client.get(f"{BUILDS_URL}{build_of(error).pk}/")
    assert response.status_code == 200
    build = response.json()["data"]
    assert build["status"] == "failed"
    assert build["result"] is None
    assert build["error"]["code"] == "invalid_archive"
    assert build["error"]["message"] == error["message"]
    assert build["log"][-1]["step"] == "check content"
    assert build["log"][-1]["status"] == "failed"
    assert [e["step"] for e in build["log"]][:5] == ["upload", "fetch", "inspect", "rebuild", "validate"]
    assert {"step": "check json", "status": "failed"}.items() <= next(
        e for e in build["log"] if e["step"] == "check json"
    ).items()


@pytest.mark.parametrize("build_id", ["00000000-0000-0000-0000-000000000000", "not-a-uuid", "12345"])
def test_an_unknown_or_invalid_build_id_is_404(client: Client, db: None, build_id: str) -> None:
    error = error_of(client.get(f"{BUILDS_URL}{build_id}/"), 404, "not_found")
    assert build_id in error["message"]


# --- version_exists ---------------------------------------------------------------------------------


def test_it_refuses_to_publish_the_same_version_twice(client: Client, token: str, publisher: Publisher) -> None:
    publisher("etcd", "3.5.9")
    before = keys(storage.PACKAGES_PREFIX)

    path = publisher.package("etcd", "3.5.9", description="Different bytes, same version")
    error = error_of(post_file(client, token, path), 409, "version_exists")
    assert "etcd 3.5.9 was already published" in error["message"]
    assert "publish a new version" in error["message"]
    assert_no_trace("etcd", build_of(error), packages_before=before)
    assert Version.objects.filter(extension__name="etcd").count() == 1


def test_it_refuses_to_republish_a_yanked_version(client: Client, token: str, publisher: Publisher) -> None:
    publisher("etcd", "3.5.9")
    yank = client.post(
        "/api/v1/extensions/etcd/versions/3.5.9/yank",
        {"reason": "broken"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert yank.status_code == 200

    error = error_of(post_file(client, token, publisher.package("etcd", "3.5.9")), 409, "version_exists")
    assert "already published" in error["message"]


def test_build_metadata_does_not_make_a_new_version(client: Client, token: str, publisher: Publisher) -> None:
    publisher("etcd", "1.0.0")

    error = error_of(post_file(client, token, publisher.package("etcd", "1.0.0+build.7")), 409, "version_exists")
    assert "etcd 1.0.0 was already published" in error["message"]
    assert list(Version.objects.values_list("version", flat=True)) == ["1.0.0"]


# --- unknown_dependency -----------------------------------------------------------------------------


def test_it_refuses_a_dependency_on_an_unknown_extension(client: Client, token: str, publisher: Publisher) -> None:
    path = publisher.package("kubernetes", "1.29.1", dependencies=["containerd ^1.7"])
    error = error_of(post_file(client, token, path), 422, "unknown_dependency")

    assert "no extension named 'containerd'" in error["message"]
    assert error["details"][0] == {
        "path": "dependencies.extensions[0]",
        "name": "containerd",
        "message": "no extension named 'containerd' in this registry",
    }
    assert_no_trace("kubernetes", build_of(error))
    assert not Extension.objects.filter(name="kubernetes").exists()


def test_it_refuses_a_dependency_no_version_matches_and_lists_the_available_ones(
    client: Client, token: str, publisher: Publisher
) -> None:
    publisher("containerd", "1.7.13")
    publisher("containerd", "2.0.2")
    publisher("etcd", "3.5.9")
    before = keys(storage.PACKAGES_PREFIX)

    path = publisher.package("kubernetes", "1.29.1", dependencies=["etcd ^3.5", "containerd ^1.8", "cni"])
    error = error_of(post_file(client, token, path), 422, "unknown_dependency")

    assert error["message"].startswith(
        "unknown dependency: no non-yanked version of 'containerd' matches >=1.8.0, <2.0.0-0"
    )
    assert "available: 1.7.13, 2.0.2" in error["message"]
    assert "(and 1 more)" in error["message"]
    problems = [d for d in error["details"] if "build" not in d]
    assert problems == [
        {
            "path": "dependencies.extensions[1]",
            "name": "containerd",
            "constraint": ">=1.8.0, <2.0.0-0",
            "available": ["1.7.13", "2.0.2"],
            "message": "no non-yanked version of 'containerd' matches >=1.8.0, <2.0.0-0; available: 1.7.13, 2.0.2",
        },
        {"path": "dependencies.extensions[2]", "name": "cni", "message": "no extension named 'cni' in this registry"},
    ]
    assert_no_trace("kubernetes", build_of(error), packages_before=before)


def test_a_yanked_version_does_not_satisfy_a_dependency(client: Client, token: str, publisher: Publisher) -> None:
    publisher("etcd", "3.5.9")
    publisher("etcd", "3.4.0")
    services.version_yank(
        actor=Actor(user=Extension.objects.get(name="etcd").owners.get()), name="etcd", version="3.5.9", reason="bad"
    )

    path = publisher.package("kubernetes", "1.29.1", dependencies=["etcd ^3.5"])
    error = error_of(post_file(client, token, path), 422, "unknown_dependency")
    assert error["details"][0]["available"] == ["3.4.0"]
    assert "available: 3.4.0" in error["message"]


def test_it_says_so_when_every_version_of_a_dependency_is_yanked(
    client: Client, token: str, publisher: Publisher
) -> None:
    publisher("etcd", "3.5.9")
    services.version_yank(
        actor=Actor(user=Extension.objects.get(name="etcd").owners.get()), name="etcd", version="3.5.9", reason="bad"
    )

    error = error_of(
        post_file(client, token, publisher.package("kube", "1.0.0", dependencies=["etcd"])), 422, "unknown_dependency"
    )
    assert "available: none (all yanked)" in error["message"]
    assert error["details"][0]["available"] == []


# --- name_taken -------------------------------------------------------------------------------------


def test_it_refuses_a_reserved_name(client: Client, token: str) -> None:
    data = hand_made("install", "1.0.0", {"extension.toml": manifest_toml("install", "1.0.0")})
    error = error_of(post_file(client, token, data), 409, "name_taken")
    assert error["message"].startswith("'install' is a reserved name and cannot be used for an extension")
    assert "the reserved names are admin, api," in error["message"]
    assert {"path": "extension.name", "name": "install"} in error["details"]
    build = build_of(error)
    assert_no_trace("install", build)
    assert (build.log[-1]["step"], build.log[-1]["status"]) == ("inspect", "failed")


def test_it_refuses_a_name_confusable_with_another_users_extension(
    client: Client, publisher: Publisher, tmp_path: Path
) -> None:
    from tests.factories import make_token, make_user, package

    publisher("cert-manager", "1.0.0")
    before = keys(storage.PACKAGES_PREFIX)
    mallory = make_token(make_user("mallory"))

    for n, name in enumerate(["certmanager", "cert-rnanager", "cret-manager"]):
        error = error_of(post_file(client, mallory, package(tmp_path / str(n), name, "1.0.0")), 409, "name_taken")
        assert f"{name!r} is too similar to the existing extension 'cert-manager'" in error["message"]
        assert "choose a clearly different name" in error["message"]
        assert {"existing": "cert-manager"} in error["details"]
        assert_no_trace(name, build_of(error), packages_before=before)
    assert list(Extension.objects.values_list("name", flat=True)) == ["cert-manager"]


def test_the_owner_may_publish_a_confusable_name(publisher: Publisher) -> None:
    publisher("cert-manager", "1.0.0")
    publisher("certmanager", "1.0.0")
    assert sorted(Extension.objects.values_list("name", flat=True)) == ["cert-manager", "certmanager"]


def test_it_refuses_to_provide_what_another_users_extension_provides(
    client: Client, publisher: Publisher, tmp_path: Path
) -> None:
    from tests.factories import make_token, make_user, package

    publisher("kubernetes", "1.29.1", provides={"taskservs": ["kubernetes", "kubeadm"]})
    mallory = make_token(make_user("mallory"))

    path = package(tmp_path, "fastkube", "1.0.0", provides={"taskservs": ["fastkube", "kubeadm"]})
    error = error_of(post_file(client, mallory, path), 409, "name_taken")
    assert "the taskserv 'kubeadm' is already provided by the extension 'kubernetes'" in error["message"]
    assert {"kind": "taskserv", "name": "kubeadm", "existing": "kubernetes"} in error["details"]
    assert not Extension.objects.filter(name="fastkube").exists()


def test_the_same_owner_may_provide_a_name_again_from_another_extension(publisher: Publisher) -> None:
    publisher("kubernetes", "1.29.1", provides={"taskservs": ["kubernetes", "kubeadm"]})
    publisher("kubeadm-lite", "1.0.0", provides={"taskservs": ["kubeadm"]})
    assert Provide.objects.filter(kind="taskserv", name="kubeadm").count() == 2


# --- forbidden and unauthenticated -----------------------------------------------------------------


def test_it_refuses_a_publish_to_another_users_extension(client: Client, publisher: Publisher, tmp_path: Path) -> None:
    from tests.factories import make_token, make_user, package

    publisher("etcd", "3.5.9")
    before = keys(storage.PACKAGES_PREFIX)
    mallory = make_token(make_user("mallory"))

    error = error_of(post_file(client, mallory, package(tmp_path, "etcd", "3.5.10")), 403, "forbidden")
    assert "you are not an owner of 'etcd'" in error["message"]
    assert "owners: alice" in error["message"]
    assert_no_trace("etcd", build_of(error), packages_before=before)
    assert list(Version.objects.values_list("version", flat=True)) == ["3.5.9"]


def test_it_refuses_a_token_scoped_to_another_extension(client: Client, user: AbstractBaseUser, tmp_path: Path) -> None:
    from tests.factories import make_token, package

    scoped = make_token(user, scopes=["publish:other"])
    error = error_of(post_file(client, scoped, package(tmp_path, "etcd", "3.5.9")), 403, "forbidden")
    assert error["message"] == "this token may not publish 'etcd': it needs the scope publish:etcd or publish:*"
    assert {"required_scope": "publish:etcd"} in error["details"]
    assert_no_trace("etcd", build_of(error))


def test_a_token_scoped_to_the_extension_may_publish_it(client: Client, user: AbstractBaseUser, tmp_path: Path) -> None:
    from tests.factories import make_token, package

    scoped = make_token(user, scopes=["publish:etcd"])
    assert post_file(client, scoped, package(tmp_path, "etcd", "3.5.9")).status_code == 202


def test_it_refuses_a_token_without_any_publish_scope_before_reading_the_upload(
    client: Client, user: AbstractBaseUser, tmp_path: Path
) -> None:
    from tests.factories import make_token, package

    yank_only = make_token(user, scopes=["yank:*"])
    error = error_of(post_file(client, yank_only, package(tmp_path, "etcd", "3.5.9")), 403, "forbidden")
    assert "publish:NAME or publish:*" in error["message"]
    assert not Build.objects.exists()


@pytest.mark.parametrize(
    "header",
    [
        None,
        "Bearer",
        "Bearer pvr_one pvr_two",
        "Bearer not-a-token",
        "Bearer pvr_" + "A" * 43,  # well-formed, unknown
    ],
    ids=["no-token", "no-credentials", "two-credentials", "not-a-token", "unknown-token"],
)
def test_it_refuses_an_unauthenticated_publish(client: Client, db: None, tmp_path: Path, header: str | None) -> None:
    from tests.factories import package

    extra = {"HTTP_AUTHORIZATION": header} if header is not None else {}
    response = post_file(client, None, package(tmp_path, "etcd", "3.5.9"), **extra)
    error = error_of(response, 401, "unauthenticated")
    assert "Bearer pvr_" in error["message"]
    assert response["WWW-Authenticate"] == 'Bearer realm="registry"'
    assert not Build.objects.exists()
    assert keys(storage.UPLOADS_PREFIX) == set()
    if header is not None:
        assert AuditEvent.objects.filter(action=AuditEvent.Action.AUTH_FAILURE).count() == 1


def test_it_refuses_a_revoked_token(client: Client, user: AbstractBaseUser, tmp_path: Path) -> None:
    from tests.factories import make_token, package

    secret = make_token(user)
    token = user.api_tokens.get(prefix=secret[:12])  # type: ignore[attr-defined]
    services.token_revoke(actor=Actor(user=user), token_id=token.pk)
    error = error_of(post_file(client, secret, package(tmp_path, "etcd", "3.5.9")), 401, "unauthenticated")
    assert "revoked" in error["message"]


# --- invalid manifests and content -----------------------------------------------------------------


def test_it_lists_every_problem_of_an_invalid_manifest_with_its_key_path(client: Client, token: str) -> None:
    toml = b"""[extension]
name = "demo"
version = "1.0.0"
type = "gadget"
license = "MIT"
keywords = ["Bad Keyword"]
homepage = "ftp://example.com"

[dependencies]
extensions = ["etcd >2, <1", "Bad_Name"]
"""
    error = error_of(
        post_file(client, token, hand_made("demo", "1.0.0", {"extension.toml": toml})), 422, "invalid_manifest"
    )

    assert error["message"].startswith(
        "extension.toml has 6 errors, the first: extension.type: 'gadget' is not allowed"
    )
    problems = {d["path"]: d["message"] for d in error["details"] if "path" in d}
    assert set(problems) == {
        "extension.type",
        "extension.keywords[0]",
        "extension.homepage",
        "extension.description",
        "dependencies.extensions[0]",
        "dependencies.extensions[1]",
    }
    assert "use one of 'provider', 'taskserv', 'cluster', 'template'" in problems["extension.type"]
    assert "use lower-case letters, digits and hyphens" in problems["extension.keywords[0]"]
    assert "use an http:// or https:// URL" in problems["extension.homepage"]
    assert "is required" in problems["extension.description"]
    assert "can never match" in problems["dependencies.extensions[0]"]
    assert "did you mean 'bad-name'?" in problems["dependencies.extensions[1]"]
    assert_no_trace("demo", build_of(error))


def test_it_refuses_a_broken_template_naming_the_file_and_the_check(
    client: Client, token: str, tmp_path: Path, nu: str
) -> None:
    from tests.factories import package

    path = package(tmp_path, "demo", "1.0.0", extra_files={"templates/broken.conf.j2": "{% if x %}\nunclosed\n"})
    error = error_of(post_file(client, token, path), 422, "invalid_archive")

    assert error["message"].startswith("content check failed: templates/broken.conf.j2: ")
    failed = [d for d in error["details"] if "check" in d]
    assert len(failed) == 1
    assert failed[0]["check"] == "jinja2"
    assert failed[0]["path"] == "templates/broken.conf.j2"
    assert failed[0]["status"] == "failed"
    assert "line 3" in failed[0]["message"] or "endif" in failed[0]["message"]
    build = build_of(error)
    assert_no_trace("demo", build)
    assert {"step": "check jinja2", "status": "failed"}.items() <= build.log[-2].items()


def test_it_refuses_a_nushell_file_that_does_not_parse(client: Client, token: str, tmp_path: Path, nu: str) -> None:
    from tests.factories import package

    broken = "export def main [] {\n    let x = (1 +\n}\n"
    path = package(tmp_path, "demo", "1.0.0", extra_files={"nulib/broken.nu": broken})
    error = error_of(post_file(client, token, path), 422, "invalid_archive")

    assert error["message"].startswith("content check failed: nulib/broken.nu: Nushell parse error")
    failed = [d for d in error["details"] if "check" in d]
    assert [(d["check"], d["path"]) for d in failed] == [("nushell", "nulib/broken.nu")]
    assert_no_trace("demo", build_of(error))


def test_a_content_check_that_cannot_run_is_logged_as_skipped(
    client: Client, token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.factories import package

    monkeypatch.setattr("extensions.checks.find_nu", lambda: None)
    monkeypatch.delenv("PROVISIONING_NU", raising=False)  # (its reason would name the variable)
    build = post_file(client, token, package(tmp_path, "demo", "1.0.0")).json()["data"]

    assert build["status"] == "succeeded"
    skipped = [e for e in build["log"] if e["step"] == "check nushell"]
    assert [(e["status"], e["message"]) for e in skipped] == [
        ("skipped", "nulib/demo.nu: Nushell (nu) is not installed")
    ]
    content = next(e for e in build["log"] if e["step"] == "check content")
    assert content["message"] == "3 passed, 0 failed, 1 skipped"  # extension.toml, MANIFEST.json, the template


# --- limits and malformed requests ------------------------------------------------------------------


def test_it_refuses_an_upload_whose_declared_length_is_over_the_limit(
    client: Client, token: str, settings: Any, tmp_path: Path
) -> None:
    settings.REGISTRY_MAX_PACKAGE_BYTES = 1024
    data = os.urandom(128 * 1024)  # over the limit plus the allowance for multipart framing
    error = error_of(post_file(client, token, data), 413, "archive_too_large")

    assert "larger than the limit of 1024 bytes" in error["message"]
    assert error["details"] == [{"limit": "max_package_bytes", "value": 1024}]
    assert not Build.objects.exists()
    assert keys(storage.UPLOADS_PREFIX) == set()


def test_it_refuses_an_upload_that_passes_the_limit_while_streaming(client: Client, token: str, settings: Any) -> None:
    settings.REGISTRY_MAX_PACKAGE_BYTES = 4096
    data = os.urandom(20 * 1024)  # within the framing allowance: only the streaming count can stop it
    error = error_of(post_file(client, token, data), 413, "archive_too_large")

    assert "larger than the limit of 4096 bytes" in error["message"]
    assert not Build.objects.exists()
    assert keys(storage.UPLOADS_PREFIX) == set()


def test_an_upload_at_the_limit_is_accepted(client: Client, token: str, settings: Any, tmp_path: Path) -> None:
    from tests.factories import package

    path = package(tmp_path, "etcd", "3.5.9")
    settings.REGISTRY_MAX_PACKAGE_BYTES = path.stat().st_size
    assert post_file(client, token, path).status_code == 202


def test_a_package_over_the_limit_is_refused_by_the_pipeline_too(
    client: Client, token: str, settings: Any, tmp_path: Path
) -> None:
    """The limit also binds the inspection (a package stored by an older, larger limit, or a source build)."""
    from tests.factories import package

    path = package(tmp_path, "etcd", "3.5.9")
    settings.REGISTRY_MAX_UNPACKED_BYTES = 100
    error = error_of(post_file(client, token, path), 413, "archive_too_large")
    assert "100" in error["message"]
    assert_no_trace("etcd", build_of(error))


def test_it_says_which_field_is_missing(client: Client, token: str, tmp_path: Path) -> None:
    from tests.factories import package

    error = error_of(post_file(client, token, package(tmp_path, "etcd", "3.5.9"), field="package"), 400, "bad_request")
    assert "the multipart field 'file' is missing" in error["message"]
    assert "multipart/form-data field 'file'" in error["message"]
    assert error["details"] == [{"path": "file", "message": "required"}]
    assert not Build.objects.exists()


def test_it_refuses_a_json_body(client: Client, token: str) -> None:
    response = client.post(
        PUBLISH_URL,
        {"file": "etcd-3.5.9.tar.gz"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    error = error_of(response, 415, "unsupported_media_type")
    assert "application/json" in error["message"]
    assert not Build.objects.exists()


def test_it_refuses_a_file_that_is_not_gzip(client: Client, token: str) -> None:
    error = error_of(
        post_file(client, token, b"PK\x03\x04 this is a zip file, not a package\n"), 422, "invalid_archive"
    )
    assert "gzip" in error["message"]
    assert_no_trace("", build_of(error))


def test_it_refuses_a_package_whose_top_directory_does_not_match_extension_toml(client: Client, token: str) -> None:
    data = hand_made("demo", "1.0.0", {"extension.toml": manifest_toml("demo", "2.0.0")})
    error = error_of(post_file(client, token, data), 422, "unsafe_archive")
    assert "the top directory `demo-1.0.0/` does not match extension.toml (demo 2.0.0)" in error["message"]
    assert "allowed: `demo-2.0.0/`" in error["message"]
    assert_no_trace("demo", build_of(error))


# --- a refused publish leaves no trace --------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "status", "code"),
    [
        (lambda p: p.package("demo", "1.0.0", dependencies=["nothing-here"]), 422, "unknown_dependency"),
        (lambda p: p.package("demo", "1.0.0", extra_files={"conf/bad.toml": "x = [\n"}), 422, "invalid_archive"),
        (lambda p: p.package("etcd", "3.5.9"), 409, "version_exists"),
    ],
    ids=["validate", "check-content", "version-exists"],
)
def test_a_refused_publish_leaves_only_a_failed_build_and_an_audit_event(
    client: Client, token: str, publisher: Publisher, make: Any, status: int, code: str
) -> None:
    publisher("etcd", "3.5.9")
    counts = (Version.objects.count(), Extension.objects.count(), Dependency.objects.count(), Provide.objects.count())
    before = keys(storage.PACKAGES_PREFIX)
    events = AuditEvent.objects.count()

    error = error_of(post_file(client, token, make(publisher)), status, code)

    build = build_of(error)
    assert (
        Version.objects.count(),
        Extension.objects.count(),
        Dependency.objects.count(),
        Provide.objects.count(),
    ) == counts
    assert_no_trace(build.name, build, packages_before=before)
    assert build.error_code == code
    assert build.finished_at is not None
    new = AuditEvent.objects.order_by("id")[events:]
    assert [(e.action, e.actor_name, e.address) for e in new] == [
        (AuditEvent.Action.PUBLISH_FAILED, "alice", "127.0.0.1")
    ]


@pytest.mark.django_db(transaction=True)
def test_a_commit_that_fails_after_storing_removes_the_stored_object(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two publishes of the same version race: both pass the checks, one commits; the loser's
    object (other bytes) is removed and its rows are rolled back."""
    from tests.factories import make_token, make_user, package

    token = make_token(make_user("alice"))
    assert post_file(client, token, package(tmp_path / "a", "etcd", "3.5.9")).status_code == 202
    winner = Version.objects.get()
    before = keys(storage.PACKAGES_PREFIX)
    assert before == {winner.storage_key}

    monkeypatch.setattr(services, "publish_check", lambda **kw: None)  # the loser passed its checks earlier
    path = package(tmp_path / "b", "etcd", "3.5.9", description="the loser of the race")
    error = error_of(post_file(client, token, path), 409, "version_exists")

    build = build_of(error)
    assert [e["step"] for e in build.log][-2:] == ["store", "commit"]
    assert build.log[-1]["status"] == "failed"
    assert_no_trace("etcd", build, packages_before=before)
    assert list(Version.objects.all()) == [winner]
    assert storage.exists(winner.storage_key)


@pytest.mark.django_db(transaction=True)
def test_a_platform_error_at_commit_rolls_back_and_shows_a_generic_message(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from builds import pipeline
    from tests.factories import make_token, make_user, package

    token = make_token(make_user("alice"))

    def broken(**kwargs: Any) -> bool:
        raise RuntimeError("the database went away")

    monkeypatch.setattr(pipeline, "mark_succeeded", broken)
    error = error_of(post_file(client, token, package(tmp_path, "etcd", "3.5.9")), 500, "internal_error")

    build = build_of(error)
    assert "error on the registry's side" in error["message"]
    assert str(build.pk) in error["message"]
    assert "database went away" not in json.dumps(error)
    assert build.log[-1] == {
        **build.log[-1],
        "step": "commit",
        "status": "failed",
        "message": "an error on the registry's side; it has been logged",
    }
    assert not Version.objects.exists() and not Extension.objects.exists()
    assert_no_trace("etcd", build)


def test_a_package_of_the_same_bytes_as_a_published_version_is_kept_when_a_publish_fails(
    client: Client, token: str, publisher: Publisher, tmp_path: Path
) -> None:
    """Publishing identical bytes again fails (version_exists); the shared object must stay."""
    from tests.factories import package

    path = package(tmp_path, "etcd", "3.5.9")
    assert post_file(client, token, path).status_code == 202
    key = Version.objects.get().storage_key

    error_of(post_file(client, token, path), 409, "version_exists")
    assert keys(storage.PACKAGES_PREFIX) == {key}
    assert client.get("/api/v1/extensions/etcd/versions/3.5.9/download").status_code == 200


def test_the_upload_step_records_what_was_received(client: Client, token: str) -> None:
    data = hand_made("demo", "1.0.0", {"extension.toml": manifest_toml("demo", "1.0.0")})
    build = post_file(client, token, data, filename="demo-1.0.0.tar.gz").json()["data"]
    assert build["log"][0]["message"] == f"received {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}"
    assert build["filename"] == "demo-1.0.0.tar.gz"
    assert build["upload"] == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


# --- storage failures and asynchronous builds -------------------------------------------------------


def test_storage_down_when_the_upload_arrives_is_503_and_publishes_nothing(
    client: Client, token: str, tmp_path: Path, private_storage: Path
) -> None:
    from tests.factories import package

    shutil.rmtree(private_storage)
    private_storage.write_text("not a directory: every write fails\n")
    error = error_of(post_file(client, token, package(tmp_path, "etcd", "3.5.9")), 503, "storage_unavailable")

    assert "nothing was published, try again later" in error["message"]
    build = Build.objects.get()
    assert (build.status, build.error_code) == (Build.Status.FAILED, "storage_unavailable")
    assert not Version.objects.exists() and not Extension.objects.exists()
    assert AuditEvent.objects.get(action=AuditEvent.Action.PUBLISH_FAILED).details["code"] == "storage_unavailable"


def test_storage_failing_at_the_store_step_fails_the_build_and_publishes_nothing(
    client: Client, token: str, tmp_path: Path, private_storage: Path
) -> None:
    from tests.factories import package

    (private_storage / storage.PACKAGES_PREFIX).write_text("not a directory: packages cannot be stored\n")
    error = error_of(post_file(client, token, package(tmp_path, "etcd", "3.5.9")), 503, "storage_unavailable")

    build = build_of(error)
    assert (build.log[-1]["step"], build.log[-1]["status"]) == ("store", "failed")
    assert build.error_code == "storage_unavailable"
    assert not Version.objects.exists() and not Extension.objects.exists()
    assert keys(storage.UPLOADS_PREFIX) == set()


def test_with_a_worker_the_answer_is_the_queued_build_and_it_can_be_followed(
    client: Client,
    token: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    nu: str,
) -> None:
    from builds import services as build_services
    from builds import tasks
    from tests.factories import package

    sent: list[str] = []
    monkeypatch.setattr(tasks.run_build, "delay", lambda build_id: sent.append(build_id))  # a broker
    response = post_file(client, token, package(tmp_path, "etcd", "3.5.9"))

    assert response.status_code == 202
    queued = response.json()["data"]
    assert (queued["status"], queued["attempts"], queued["result"]) == ("queued", 0, None)
    assert [e["step"] for e in queued["log"]] == ["upload"]
    assert sent == [queued["id"]]
    assert response["Location"] == queued["url"]
    assert keys(storage.UPLOADS_PREFIX) == {storage.upload_key(queued["id"])}

    build_services.build_run(sent[0])  # the worker picks the message up

    done = client.get(response["Location"]).json()["data"]
    assert (done["status"], done["attempts"]) == ("succeeded", 1)
    assert [e["step"] for e in done["log"]] == STEPS
    assert client.get(done["result"]["url"]).status_code == 200
    assert keys(storage.UPLOADS_PREFIX) == set()


@pytest.mark.parametrize(
    ("length", "status", "code"),
    [("abc", 400, "bad_request"), ("-1", 400, "bad_request"), ("99999999999999999999", 413, "archive_too_large")],
)
def test_a_malformed_content_length_is_refused_cleanly(
    client: Client, token: str, tmp_path: Path, length: str, status: int, code: str
) -> None:
    from tests.factories import package

    response = post_file(client, token, package(tmp_path, "etcd", "3.5.9"), CONTENT_LENGTH=length)
    error_of(response, status, code)
    assert not Build.objects.exists()


# --- typosquatting through provided names -------------------------------------------------------------


def test_a_provided_name_confusable_with_another_owners_provided_name_is_name_taken(
    client: Client, token: str, tmp_path: Path
) -> None:
    from tests.factories import make_token, make_user, package

    publish_ok(client, token, package(tmp_path / "a", "kubernetes", "1.28.6"))
    mallory = make_token(make_user("mallory"))
    squat = package(tmp_path / "b", "foo-tools", "1.0.0", provides={"taskservs": ["kubernets"]})
    error = error_of(post_file(client, mallory, squat), 409, "name_taken")
    assert "'kubernets'" in error["message"] and "'kubernetes'" in error["message"]
    assert not Extension.objects.filter(name="foo-tools").exists()
    digits = package(tmp_path / "c", "k8s-tools", "1.0.0", provides={"taskservs": ["kubernete5"]})
    error_of(post_file(client, mallory, digits), 409, "name_taken")


def test_a_provided_name_confusable_with_another_owners_extension_name_is_name_taken(
    client: Client, token: str, tmp_path: Path
) -> None:
    from tests.factories import make_token, make_user, package

    publish_ok(client, token, package(tmp_path / "a", "cert-manager", "1.0.0", provides={"taskservs": ["certs"]}))
    mallory = make_token(make_user("mallory"))
    squat = package(tmp_path / "b", "helper-pack", "1.0.0", provides={"taskservs": ["certmanager"]})
    error = error_of(post_file(client, mallory, squat), 409, "name_taken")
    assert "too similar to the extension 'cert-manager'" in error["message"]


def test_an_owner_may_provide_names_confusable_with_their_own(client: Client, token: str, tmp_path: Path) -> None:
    from tests.factories import package

    publish_ok(client, token, package(tmp_path / "a", "kubernetes", "1.28.6"))
    publish_ok(client, token, package(tmp_path / "b", "kube-extras", "1.0.0", provides={"taskservs": ["kubernets"]}))


def test_with_the_task_queue_down_the_build_stays_queued_for_the_reaper(
    client: Client, token: str, tmp_path: Path, settings: Any
) -> None:
    from registry.celery import app
    from tests.factories import package
    from tests.services import _reset_celery_connections, free_port

    dead = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    saved = {key: app.conf[key] for key in ("broker_url", "task_always_eager", "task_publish_retry_policy")}
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.update(
        broker_url=dead,
        task_always_eager=False,
        task_publish_retry_policy={"max_retries": 1, "interval_start": 0, "interval_step": 0.1},
    )
    _reset_celery_connections(app)
    try:
        response = post_file(client, token, package(tmp_path, "etcd", "3.5.9"))
    finally:
        app.conf.update(saved)
        _reset_celery_connections(app)
    assert response.status_code == 202, response.content
    queued = response.json()["data"]
    assert queued["status"] == "queued"
    build = Build.objects.get(pk=queued["id"])
    assert build.status == Build.Status.QUEUED and build.upload_key  # staged, waiting for the reaper
    assert keys(storage.UPLOADS_PREFIX) == {build.upload_key}


def test_a_web_session_publishes_through_the_limited_upload_handler(db: None, tmp_path: Path, settings: Any) -> None:
    """The session's CSRF check reads the body: it must stream through the registry's handler."""
    from django.middleware.csrf import _get_new_csrf_string, _mask_cipher_secret

    from tests.factories import autocommit_hooks, make_user, package

    session = Client(enforce_csrf_checks=True)
    session.force_login(make_user("bob", password="pw-long-enough-123"))
    secret = _get_new_csrf_string()
    session.cookies["csrftoken"] = secret
    path = package(tmp_path, "sess", "1.0.0")
    with autocommit_hooks(), path.open("rb") as handle:
        refused = session.post("/api/v1/extensions/", {"file": handle})
    assert refused.status_code == 403  # no CSRF token: refused before anything is published
    with autocommit_hooks(), path.open("rb") as handle:
        response = session.post("/api/v1/extensions/", {"file": handle}, HTTP_X_CSRFTOKEN=_mask_cipher_secret(secret))
    assert response.status_code == 202, response.content
    assert response.json()["data"]["upload"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    settings.REGISTRY_MAX_PACKAGE_BYTES = 100  # smaller than the package: refused while it streams
    with autocommit_hooks(), path.open("rb") as handle:
        big = session.post("/api/v1/extensions/", {"file": handle}, HTTP_X_CSRFTOKEN=_mask_cipher_secret(secret))
    error_of(big, 413, "archive_too_large")


def test_content_checks_that_outrun_the_build_time_budget_fail_the_build(
    client: Client, token: str, tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process builds have no Celery time limit: the checks stop at the build's budget."""
    from tests.factories import package

    slow_nu = tmp_path / "bin" / "nu"
    slow_nu.parent.mkdir()
    slow_nu.write_text("#!/bin/sh\nsleep 30\n")
    slow_nu.chmod(0o755)
    monkeypatch.setenv("PROVISIONING_NU", str(slow_nu))
    settings.REGISTRY_BUILD_TIME_LIMIT = 31  # 1 s for the checks once storing and committing are set aside

    started = time.monotonic()
    error = error_of(post_file(client, token, package(tmp_path, "slow", "1.0.0")), 422, "invalid_archive")
    assert time.monotonic() - started < 20
    assert "ran out of time" in error["message"]
    assert not Version.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_build_is_never_seen_succeeded_without_its_commit_step_in_the_log(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit step's entry is written in the transaction that makes the build succeeded, before
    its status changes: a reader following the log (the CLI, the live build page) that sees the
    final status has every step."""
    from builds import lifecycle, pipeline
    from tests.factories import make_token, make_user, package

    token = make_token(make_user("alice"))
    seen: list[list[dict[str, Any]]] = []

    def watched(**kwargs: Any) -> bool:
        seen.append(Build.objects.get(pk=kwargs["build"].pk).log)
        return lifecycle.mark_succeeded(**kwargs)

    monkeypatch.setattr(pipeline, "mark_succeeded", watched)
    response = post_file(client, token, package(tmp_path, "etcd", "3.5.9"))
    assert response.status_code == 202
    [log_then] = seen
    assert (log_then[-1]["step"], log_then[-1]["status"]) == ("commit", "passed")
    assert log_then[-1]["message"] == "published etcd 3.5.9"
    build = Build.objects.get()
    assert build.status == Build.Status.SUCCEEDED
    assert [e["step"] for e in build.log].count("commit") == 1
    assert build.log == log_then
