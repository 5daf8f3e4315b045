"""Source builds (SPEC 3.2, 3.3 step 5): POST /api/v1/builds/ with a tar.gz of the source directory;
the server applies [build] include/exclude and builds the very package the client would build."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from builds.models import Build
from extensions.archive import build_package
from registry import storage
from registry.models import AuditEvent, Extension, Version

pytest_plugins = ["tests.factories"]  # the user, token and publisher fixtures

BUILDS_URL = "/api/v1/builds/"
SOURCE_STEPS = [
    "upload",
    "fetch",
    "extract source",
    "build package",
    "inspect",
    "validate",
    "check content",
    "readme",
    "interface",
    "store",
    "commit",
]


# Package storage private to each test (tests/conftest.py), so what it leaves can be listed exactly.
pytestmark = pytest.mark.usefixtures("private_storage")


def keys(prefix: str) -> set[str]:
    return {key for key, _ in storage.list_keys(prefix)}


def source_tarball(source: Path, *, top: str | None = "") -> bytes:
    """A tar.gz of every file under source (the author's whole directory), under ``top``
    (default: the directory's own name; None: at the root of the archive)."""
    prefix = source.name if top == "" else top
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(source.rglob("*")):
            rel = path.relative_to(source).as_posix()
            tar.add(path, arcname=f"{prefix}/{rel}" if prefix else rel, recursive=False)
    return buf.getvalue()


def post_source(client: Client, token: str, data: bytes, *, field: str = "source") -> Any:
    from tests.factories import autocommit_hooks

    upload = SimpleUploadedFile("source.tar.gz", data, content_type="application/gzip")
    with autocommit_hooks():
        return client.post(BUILDS_URL, {field: upload}, HTTP_AUTHORIZATION=f"Bearer {token}")


def error_of(response: Any, status: int, code: str) -> dict[str, Any]:
    from tests.factories import refusal

    answered, error = refusal(response)
    assert answered == status, response.content.decode("utf-8", "replace")
    assert error["code"] == code, error
    return error


def build_of(error: dict[str, Any]) -> Build:
    ids = {d["build"] for d in error["details"] if isinstance(d, dict) and "build" in d}
    assert len(ids) == 1, error
    return Build.objects.get(pk=ids.pop())


def author_source(tmp_path: Path, name: str = "etcd", version: str = "3.5.9", **kw: Any) -> Path:
    """An extension source as an author has it: with tests, scratch files and an executable script,
    and a [build] section that leaves the tests and the scratch files out."""
    from tests.factories import write_extension

    source = write_extension(
        tmp_path / "src",
        name,
        version,
        extra_files={
            "tests/test_basic.nu": "use std/assert\nassert equal 1 1\n",
            "notes.tmp": "scratch\n",
            "nulib/draft.tmp": "more scratch\n",
            "bin/install.sh": "#!/bin/sh\necho install\n",
            "kcl/settings.k": 'schema Settings:\n    name: str = "x"\n',
        },
        **kw,
    )
    (source / "bin" / "install.sh").chmod(0o755)
    manifest = source / "extension.toml"
    manifest.write_text(manifest.read_text() + '\n[build]\nexclude = ["tests/**", "*.tmp"]\n')
    return source


def members(data: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return tar.getnames()


def test_the_server_builds_the_same_bytes_as_the_client(client: Client, token: str, tmp_path: Path) -> None:
    source = author_source(tmp_path)
    local = build_package(source, tmp_path / "local")

    response = post_source(client, token, source_tarball(source))

    assert response.status_code == 202, response.content
    build = response.json()["data"]
    assert build["kind"] == "source"
    assert build["status"] == "succeeded"
    assert response["Location"] == build["url"]
    version = Version.objects.get(extension__name="etcd", version="3.5.9")
    assert version.sha256 == local.sha256
    assert version.size == local.path.stat().st_size
    with storage.open_file(storage.package_key(local.sha256)) as handle:
        stored = handle.read()
    assert stored == local.path.read_bytes()
    assert keys(storage.PACKAGES_PREFIX) == {storage.package_key(local.sha256)}
    assert keys(storage.UPLOADS_PREFIX) == set()


def test_excluded_files_are_not_in_the_package(client: Client, token: str, tmp_path: Path) -> None:
    source = author_source(tmp_path)
    assert post_source(client, token, source_tarball(source)).status_code == 202

    download = client.get("/api/v1/extensions/etcd/versions/3.5.9/download")
    names = members(b"".join(download.streaming_content))
    assert sorted(names) == [
        "etcd-3.5.9",
        "etcd-3.5.9/MANIFEST.json",
        "etcd-3.5.9/README.md",
        "etcd-3.5.9/bin",
        "etcd-3.5.9/bin/install.sh",
        "etcd-3.5.9/extension.toml",
        "etcd-3.5.9/kcl",
        "etcd-3.5.9/kcl/settings.k",
        "etcd-3.5.9/nulib",
        "etcd-3.5.9/nulib/etcd.nu",
        "etcd-3.5.9/templates",
        "etcd-3.5.9/templates/etcd.conf.j2",
    ]
    assert not any("tests/" in n or n.endswith(".tmp") for n in names)
    files = Version.objects.get().files
    assert [f["path"] for f in files] == [
        "README.md",
        "bin/install.sh",
        "extension.toml",
        "kcl/settings.k",
        "nulib/etcd.nu",
        "templates/etcd.conf.j2",
    ]


def test_an_executable_file_stays_executable(client: Client, token: str, tmp_path: Path) -> None:
    source = author_source(tmp_path)
    assert post_source(client, token, source_tarball(source)).status_code == 202

    download = b"".join(client.get("/api/v1/extensions/etcd/versions/3.5.9/download").streaming_content)
    with tarfile.open(fileobj=io.BytesIO(download), mode="r:gz") as tar:
        modes = {m.name: m.mode for m in tar.getmembers() if m.isfile()}
    assert modes["etcd-3.5.9/bin/install.sh"] == 0o755
    assert modes["etcd-3.5.9/README.md"] == 0o644


def test_a_source_archive_with_extension_toml_at_its_root_builds_the_same_package(
    client: Client, token: str, tmp_path: Path
) -> None:
    source = author_source(tmp_path)
    local = build_package(source, tmp_path / "local")

    assert post_source(client, token, source_tarball(source, top=None)).status_code == 202
    assert Version.objects.get().sha256 == local.sha256


def test_the_build_log_shows_the_source_steps(client: Client, token: str, tmp_path: Path) -> None:
    source = author_source(tmp_path)
    local = build_package(source, tmp_path / "local")
    build = post_source(client, token, source_tarball(source)).json()["data"]

    steps = [e for e in build["log"] if e["step"] == "check content" or not e["step"].startswith("check ")]
    assert [e["step"] for e in steps] == SOURCE_STEPS
    assert all(isinstance(e["seconds"], float) for e in build["log"])
    by_step = {e["step"]: e for e in build["log"]}
    assert by_step["extract source"]["message"] == "extension source at etcd-3.5.9"
    assert by_step["build package"]["message"] == f"etcd-3.5.9.tar.gz: 6 files, sha256:{local.sha256}"


def test_the_first_source_build_makes_the_publisher_the_owner_and_is_audited(
    client: Client, token: str, tmp_path: Path
) -> None:
    source = author_source(tmp_path)
    assert post_source(client, token, source_tarball(source)).status_code == 202

    assert [u.username for u in Extension.objects.get(name="etcd").owners.all()] == ["alice"]
    event = AuditEvent.objects.get(action=AuditEvent.Action.PUBLISH)
    assert (event.actor_name, event.address, event.extension, event.version) == ("alice", "127.0.0.1", "etcd", "3.5.9")


def test_it_refuses_a_source_archive_without_extension_toml(client: Client, token: str, tmp_path: Path) -> None:
    source = author_source(tmp_path)
    (source / "extension.toml").unlink()
    error = error_of(post_source(client, token, source_tarball(source)), 422, "invalid_archive")

    assert "the source archive has no extension.toml" in error["message"]
    assert "allowed: extension.toml at the root of the archive or in its single top directory" in error["message"]
    build = build_of(error)
    assert (build.log[-1]["step"], build.log[-1]["status"]) == ("extract source", "failed")
    assert not Version.objects.exists()
    assert keys(storage.PACKAGES_PREFIX) == set()
    assert keys(storage.UPLOADS_PREFIX) == set()


def test_it_refuses_an_invalid_manifest_in_the_source_with_every_problem(
    client: Client, token: str, tmp_path: Path
) -> None:
    source = author_source(tmp_path)
    manifest = source / "extension.toml"
    manifest.write_text(
        manifest.read_text()
        .replace('type = "taskserv"', 'type = "gadget"')
        .replace("keywords = []", 'keywords = ["No Caps"]')
    )
    error = error_of(post_source(client, token, source_tarball(source)), 422, "invalid_manifest")

    paths = {d["path"] for d in error["details"] if "path" in d and d.get("severity") == "error"}
    assert paths == {"extension.type", "extension.keywords[0]"}
    build = build_of(error)
    assert (build.log[-1]["step"], build.log[-1]["status"]) == ("build package", "failed")
    assert keys(storage.PACKAGES_PREFIX) == set()


def test_it_refuses_a_reserved_name_in_the_source_as_name_taken(client: Client, token: str, tmp_path: Path) -> None:
    source = author_source(tmp_path, name="search", version="1.0.0")
    error = error_of(post_source(client, token, source_tarball(source)), 409, "name_taken")

    assert error["message"].startswith("'search' is a reserved name and cannot be used for an extension")
    assert not Extension.objects.exists()


def test_it_refuses_a_broken_template_in_the_source(client: Client, token: str, tmp_path: Path) -> None:
    source = author_source(tmp_path)
    (source / "templates" / "etcd.conf.j2").write_text("{{ name | }}\n")
    error = error_of(post_source(client, token, source_tarball(source)), 422, "invalid_archive")

    assert error["message"].startswith("content check failed: templates/etcd.conf.j2: ")
    assert [(d["check"], d["path"]) for d in error["details"] if "check" in d] == [("jinja2", "templates/etcd.conf.j2")]
    assert keys(storage.PACKAGES_PREFIX) == set()


def test_it_says_the_source_field_is_missing(client: Client, token: str, tmp_path: Path) -> None:
    source = author_source(tmp_path)
    error = error_of(post_source(client, token, source_tarball(source), field="file"), 400, "bad_request")

    assert "the multipart field 'source' is missing" in error["message"]
    assert "source archive (tar.gz)" in error["message"]
    assert not Build.objects.exists()


def test_it_refuses_a_source_archive_over_the_limit(client: Client, token: str, tmp_path: Path, settings: Any) -> None:
    source = author_source(tmp_path)
    (source / "blob.bin").write_bytes(os.urandom(16 * 1024))
    settings.REGISTRY_MAX_PACKAGE_BYTES = 8 * 1024
    error = error_of(post_source(client, token, source_tarball(source)), 413, "archive_too_large")

    assert "8192 bytes" in error["message"]
    assert not Build.objects.exists()


def test_a_source_build_needs_a_token(client: Client, db: None, tmp_path: Path) -> None:
    source = author_source(tmp_path)
    upload = SimpleUploadedFile("source.tar.gz", source_tarball(source))
    error = error_of(client.post(BUILDS_URL, {"source": upload}), 401, "unauthenticated")
    assert "Bearer pvr_" in error["message"]
    assert not Build.objects.exists()


def test_the_server_build_digest_is_the_local_digest_for_every_bundled_example(
    client: Client, token: str, tmp_path: Path
) -> None:
    """A real extension from the repository (with its own tests/ and [build] rules)."""
    examples = Path(__file__).resolve().parents[2] / "extensions" / "taskservs"
    for n, name in enumerate(["containerd/1.7.13", "etcd/3.5.9"]):
        source = examples / name
        local = build_package(source, tmp_path / f"local{n}")
        response = post_source(client, token, source_tarball(source, top=f"src-{n}"))
        assert response.status_code == 202, response.content
        build = response.json()["data"]
        assert Version.objects.get(extension__name=build["name"], version=build["version"]).sha256 == local.sha256
        assert hashlib.sha256(local.path.read_bytes()).hexdigest() == local.sha256
