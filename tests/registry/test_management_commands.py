"""`manage.py createtoken` and `manage.py publish` (SPEC 3.5): a token for scripts and first set-up;
publishing sources from disk (or built packages) through the same pipeline, dependencies first."""

from __future__ import annotations

import io
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from builds.models import Build
from extensions.archive import build_package
from registry.models import ApiToken, AuditEvent, Extension, Version

pytest_plugins = ["tests.factories"]  # the user, token and publisher fixtures

TOKEN_RE = re.compile(r"^pvr_[A-Za-z0-9_-]{43}$")
EXAMPLES = Path(__file__).resolve().parents[2] / "extensions"
LINE_RE = re.compile(r"^publish  (?P<label>.+) \(\d+\.\d\d s, build [0-9a-f-]{36}\)$")


# Package storage private to each test (tests/conftest.py), so what it leaves can be listed exactly.
pytestmark = pytest.mark.usefixtures("private_storage")


class Run:
    """The outcome of a management command: its output, error output and error (if it failed)."""

    def __init__(self, out: str, err: str, error: CommandError | None) -> None:
        self.out, self.err, self.error = out, err, error

    @property
    def published(self) -> list[str]:
        return [m["label"] for m in map(LINE_RE.match, self.out.splitlines()) if m]


def run(*args: str) -> Run:
    """call_command, with on-commit hooks behaving as in production (the in-process build runs)."""
    from tests.factories import autocommit_hooks

    out, err = io.StringIO(), io.StringIO()
    error = None
    with autocommit_hooks():
        try:
            call_command(*args, stdout=out, stderr=err)
        except CommandError as exc:
            error = exc
    return Run(out.getvalue(), err.getvalue(), error)


# --- createtoken ------------------------------------------------------------------------------------


def test_createtoken_prints_a_token_that_publishes(client: Client, db: None, tmp_path: Path) -> None:
    from tests.factories import package, publish

    result = run("createtoken", "alice", "--scope", "publish:*", "--create-user")

    assert result.error is None
    secret = result.out.strip()
    assert TOKEN_RE.match(secret), result.out
    assert result.out == secret + "\n"  # the token alone, for scripts
    alice = get_user_model().objects.get(username="alice")
    assert not alice.has_usable_password()
    assert ApiToken.objects.get(user=alice).scopes == ["publish:*"]
    assert AuditEvent.objects.filter(action=AuditEvent.Action.TOKEN_CREATE, actor=alice).count() == 1

    response = publish(client, secret, package(tmp_path, "etcd", "3.5.9"))
    assert response.status_code == 202, response.content
    assert response.json()["data"]["submitted_by"] == "alice"
    assert [u.username for u in Extension.objects.get(name="etcd").owners.all()] == ["alice"]


def test_createtoken_refuses_an_unknown_user_without_create_user(db: None) -> None:
    result = run("createtoken", "bob", "--scope", "publish:*")

    assert result.error is not None
    assert str(result.error) == "no user named 'bob'; pass --create-user to create one"
    assert result.out == ""
    assert not get_user_model().objects.filter(username="bob").exists()
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize("scope", ["publish", "publish:Bad_Name", "delete:*", "publish:*,yank:*"])
def test_createtoken_refuses_a_bad_scope_and_creates_nothing(db: None, scope: str) -> None:
    result = run("createtoken", "bob", "--scope", scope, "--create-user")

    assert result.error is not None
    assert f"{scope!r} is not a scope" in str(result.error)
    assert "use publish:NAME, yank:NAME or owners:NAME" in str(result.error)
    assert result.out == ""
    assert not ApiToken.objects.exists()
    assert not get_user_model().objects.filter(username="bob").exists()


@pytest.mark.parametrize("username", ["", "bad user!", "x" * 151])
def test_createtoken_refuses_a_bad_username_and_creates_nothing(db: None, username: str) -> None:
    result = run("createtoken", username, "--create-user")

    assert result.error is not None
    assert "letters, digits and @ . + - _" in str(result.error)
    assert not get_user_model().objects.exists()
    assert not ApiToken.objects.exists()


def test_createtoken_refuses_a_bad_expiry(db: None) -> None:
    from tests.factories import make_user

    make_user("bob")
    result = run("createtoken", "bob", "--expires-in-days", "0")
    assert result.error is not None
    assert "expires_in_days must be between 1 and 3650" in str(result.error)
    assert not ApiToken.objects.exists()


# --- publish ----------------------------------------------------------------------------------------


def test_publish_publishes_the_bundled_taskservs_dependencies_first_and_skip_existing_is_a_no_op(
    db: None, tmp_path: Path
) -> None:
    taskservs = EXAMPLES / "taskservs"
    sources = sorted(p.parent for p in taskservs.rglob("extension.toml"))

    first = run("publish", str(taskservs))

    assert first.error is None, first.err
    assert first.err == ""
    assert len(first.published) == len(sources) == Version.objects.count()
    order = [label.split()[0] for label in first.published]
    for dependent, dependency in [
        ("kubernetes", "containerd"),
        ("kubernetes", "etcd"),
        ("cilium", "kubernetes"),
        ("grafana", "prometheus"),
    ]:
        assert order.index(dependency) < order.index(dependent), order
    # Every version is there, with the package the client would build from the same source.
    for source in sources:
        name, version = source.parent.name, source.name
        row = Version.objects.get(extension__name=name, version=version)
        assert row.sha256 == build_package(source, tmp_path / name / version).sha256
    assert {u.username for e in Extension.objects.all() for u in e.owners.all()} == {"provisioning"}
    builds = Build.objects.count()

    second = run("publish", "--skip-existing", str(taskservs))

    assert second.error is None, second.err
    assert second.published == []
    assert second.out.splitlines() == [f"skip     {label} (already published)" for label in first.published]
    assert Build.objects.count() == builds
    assert Version.objects.count() == len(sources)


def test_publish_orders_dependencies_first_whatever_their_names(db: None, tmp_path: Path) -> None:
    from tests.factories import write_extension

    root = tmp_path / "sources"
    write_extension(root, "app", "1.0.0", dependencies=["zlib ^1", "middle"])
    write_extension(root, "middle", "2.0.0", dependencies=["zlib >=1.2"])
    write_extension(root, "zlib", "1.3.0")
    write_extension(root, "zlib", "1.2.0")

    result = run("publish", str(root))

    assert result.error is None, result.err
    assert result.published == ["zlib 1.2.0", "zlib 1.3.0", "middle 2.0.0", "app 1.0.0"]


def test_publish_as_another_user(db: None, tmp_path: Path) -> None:
    from tests.factories import write_extension

    source = write_extension(tmp_path, "etcd", "3.5.9")
    result = run("publish", "--user", "ci-bot", str(source))

    assert result.published == ["etcd 3.5.9"]
    assert [u.username for u in Extension.objects.get(name="etcd").owners.all()] == ["ci-bot"]
    event = AuditEvent.objects.get(action=AuditEvent.Action.PUBLISH)
    assert (event.actor_name, event.address) == ("ci-bot", "127.0.0.1")


def test_publish_reports_a_failing_source_and_exits_non_zero(db: None, tmp_path: Path) -> None:
    from tests.factories import write_extension

    root = tmp_path / "sources"
    write_extension(root, "good", "1.0.0")
    write_extension(root, "broken", "1.0.0", extra_files={"templates/bad.conf.j2": "{% for x in %}\n"})

    result = run("publish", str(root))

    assert result.error is not None
    assert str(result.error) == "1 publish(es) failed"
    assert result.published == ["good 1.0.0"]  # the others are still published
    [line] = result.err.splitlines()
    assert line.startswith("failed   broken 1.0.0: invalid_archive: content check failed: templates/bad.conf.j2: ")
    build = Build.objects.get(name="broken")
    assert line.endswith(f"(build {build.pk})")
    assert build.status == Build.Status.FAILED
    assert not Extension.objects.filter(name="broken").exists()


def test_publish_reports_a_dependency_that_is_nowhere(db: None, tmp_path: Path) -> None:
    from tests.factories import write_extension

    source = write_extension(tmp_path, "app", "1.0.0", dependencies=["nowhere ^1"])
    result = run("publish", str(source))

    assert str(result.error) == "1 publish(es) failed"
    assert "failed   app 1.0.0: unknown_dependency: unknown dependency: no extension named 'nowhere'" in result.err


def test_publish_a_built_package(db: None, tmp_path: Path) -> None:
    from tests.factories import package

    path = package(tmp_path, "etcd", "3.5.9")
    result = run("publish", str(path))

    assert result.error is None, result.err
    assert LINE_RE.match(result.out.strip()) and "etcd-3.5.9.tar.gz" in result.out
    version = Version.objects.get(extension__name="etcd", version="3.5.9")
    assert version.sha256 == build_package(path.parent.parent / "src" / "etcd-3.5.9", tmp_path / "again").sha256
    assert Build.objects.get().kind == Build.Kind.PACKAGE


def test_publish_skip_existing_skips_a_built_package_already_published(db: None, tmp_path: Path) -> None:
    from tests.factories import package

    path = package(tmp_path, "etcd", "3.5.9")
    assert run("publish", str(path)).error is None

    again = run("publish", "--skip-existing", str(path))

    assert again.error is None, again.err
    assert again.out.splitlines() == ["skip     etcd-3.5.9.tar.gz (already published)"]
    assert Build.objects.count() == 1


def test_publish_a_package_again_without_skip_existing_fails(db: None, tmp_path: Path) -> None:
    from tests.factories import package

    path = package(tmp_path, "etcd", "3.5.9")
    assert run("publish", str(path)).error is None

    again = run("publish", str(path))
    assert str(again.error) == "1 publish(es) failed"
    assert "failed   etcd-3.5.9.tar.gz: version_exists: etcd 3.5.9 was already published" in again.err


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda tmp: tmp / "missing", "not a directory or a .tar.gz package"),
        (lambda tmp: tmp, "no extension.toml in it or below it"),
    ],
    ids=["missing-path", "no-extension"],
)
def test_publish_refuses_a_path_that_holds_no_extension(db: None, tmp_path: Path, make: Any, message: str) -> None:
    path = make(tmp_path)
    result = run("publish", str(path))
    assert result.error is not None
    assert str(result.error) == f"{path}: {message}"
    assert not Build.objects.exists()


def test_publish_refuses_an_invalid_manifest_before_publishing_anything(db: None, tmp_path: Path) -> None:
    from tests.factories import write_extension

    root = tmp_path / "sources"
    write_extension(root, "good", "1.0.0")
    bad = write_extension(root, "bad", "1.0.0")
    toml = bad / "extension.toml"
    toml.write_text(toml.read_text().replace('type = "taskserv"', 'type = "gadget"'))

    result = run("publish", str(root))

    assert result.error is not None
    assert str(result.error).startswith(f"{bad}: ")
    assert "extension.type" in str(result.error)
    assert not Build.objects.exists()


def test_publish_refuses_a_dependency_cycle_among_the_sources(db: None, tmp_path: Path) -> None:
    from tests.factories import write_extension

    root = tmp_path / "sources"
    write_extension(root, "ping", "1.0.0", dependencies=["pong"])
    write_extension(root, "pong", "1.0.0", dependencies=["ping"])

    result = run("publish", str(root))
    assert str(result.error) == "dependency cycle among the sources: ping -> pong -> ping"
    assert not Build.objects.exists()


@pytest.fixture
def copied_examples(tmp_path: Path) -> Iterator[Path]:
    """A copy of two bundled examples with build output lying around (dist/, __pycache__/)."""
    root = tmp_path / "examples"
    for rel in ["taskservs/etcd/3.5.9", "taskservs/containerd/1.7.13"]:
        shutil.copytree(EXAMPLES / rel, root / rel)
    (root / "taskservs/etcd/3.5.9/dist").mkdir()
    (root / "taskservs/etcd/3.5.9/dist/extension.toml").write_text("not an extension\n")
    yield root


def test_publish_ignores_build_output_directories(db: None, copied_examples: Path) -> None:
    result = run("publish", str(copied_examples))
    assert result.error is None, result.err
    assert sorted(result.published) == ["containerd 1.7.13", "etcd 3.5.9"]


def test_publish_builds_the_same_bytes_as_a_local_build(db: None, tmp_path: Path) -> None:
    """Files the builder packages (a nested dist/, node_modules/ or .venv/ directory) reach the server
    too, so `manage.py publish` and `provisioning extension build` give the same package."""
    from tests.factories import write_extension

    source = write_extension(
        tmp_path,
        "etcd",
        "3.5.9",
        extra_files={
            "kcl/dist/extra.k": 'extra = "x"\n',
            "docs/node_modules/notes.txt": "vendored notes\n",
            "templates/.venv/readme.txt": "not a virtualenv\n",
            "tests/test_etcd.nu": "use std/assert\nassert equal 1 1\n",
        },
    )
    local = build_package(source, tmp_path / "local")

    result = run("publish", str(source))

    assert result.error is None, result.err
    assert Version.objects.get().sha256 == local.sha256
    assert "kcl/dist/extra.k" in [f.path for f in local.files]


def test_publish_refuses_a_symlink_in_the_source_like_a_local_build(db: None, tmp_path: Path) -> None:
    from tests.factories import write_extension

    root = tmp_path / "sources"
    write_extension(root, "good", "1.0.0")
    source = write_extension(root, "linked", "1.0.0")
    (source / "templates" / "passwd.j2").symlink_to("/etc/passwd")

    result = run("publish", str(root))

    assert str(result.error) == "1 publish(es) failed"
    assert result.published == ["good 1.0.0"]
    [line] = result.err.splitlines()
    assert line.startswith("failed   linked 1.0.0: unsafe_archive: templates/passwd.j2: is a symbolic link")
    assert not Extension.objects.filter(name="linked").exists()


@pytest.mark.django_db(transaction=True)  # the reaper starts with close_old_connections(), as in a worker
def test_reapbuilds_and_sweepstorage_report_what_they_did(private_tmp: Path) -> None:
    assert run("reapbuilds").out.strip() == "0 re-queued, 0 failed"
    assert run("sweepstorage", "--grace-seconds", "0").out.strip() == (
        "removed 0 package object(s), 0 staged upload(s), 0 temporary upload file(s), 0 build directory(ies)"
    )
    # What a killed worker leaves: a build's work directory and an upload's part, of no build.
    gone = "0b7c1a8e-3f0e-4a51-9d55-2f4f3f7a0c11"
    (private_tmp / f"build-{gone}-1").mkdir()
    (private_tmp / f"build-{gone}-1" / "upload.tar.gz").write_bytes(b"partial")
    (private_tmp / f"upload-{gone}.0.part").write_bytes(b"partial")
    for entry in private_tmp.iterdir():
        os.utime(entry, (1, 1))
    assert run("sweepstorage", "--grace-seconds", "0").out.strip() == (
        "removed 0 package object(s), 0 staged upload(s), 1 temporary upload file(s), 1 build directory(ies)"
    )
    assert list(private_tmp.iterdir()) == []
    refused = run("sweepstorage", "--grace-seconds", "-1")
    assert refused.error is not None and "0 or more" in str(refused.error)
