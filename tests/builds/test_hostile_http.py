"""Every hostile package of tests.hostile_archives through the HTTP API (SPEC 2.4, 3.1): refused
with its 4xx status and error code, naming the member; nothing stored, no version; the registry
stays healthy and a normal publish still works afterwards."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from builds.models import Build
from registry import storage
from registry.models import AuditEvent, Extension, Version
from tests.hostile_archives import ABSOLUTE_TARGETS, ALL_HOSTILE, SOURCE_HOSTILE, Hostile

pytest_plugins = ["tests.factories"]  # the user, token and publisher fixtures

STATUS = {"unsafe_archive": 422, "invalid_archive": 422, "invalid_manifest": 422, "archive_too_large": 413}


# Package storage private to each test (tests/conftest.py), so what it leaves can be listed exactly.
pytestmark = pytest.mark.usefixtures("private_storage")


def keys(prefix: str) -> set[str]:
    return {key for key, _ in storage.list_keys(prefix)}


def upload(client: Client, token: str, url: str, field: str, data: bytes) -> Any:
    from tests.factories import autocommit_hooks

    file = SimpleUploadedFile("demo-1.0.0.tar.gz", data, content_type="application/gzip")
    with autocommit_hooks():
        return client.post(url, {field: file}, HTTP_AUTHORIZATION=f"Bearer {token}")


def assert_refused(client: Client, response: Any, case: Hostile) -> None:
    """The answer names the case's code and member; nothing of the upload remains but a failed build."""
    from tests.factories import refusal

    status, error = refusal(response)
    assert status == STATUS[case.code], (case.name, response.content[:2000])
    assert error["code"] == case.code, (case.name, error)
    if case.member is not None:
        assert case.member in error["message"], (case.name, error["message"])
    assert "allowed" in error["message"] or "limit" in error["message"] or case.code == "invalid_archive", error
    builds = {d["build"] for d in error["details"] if isinstance(d, dict) and "build" in d}
    if builds:  # refused by the pipeline (else by the upload limit, before any build existed)
        build = Build.objects.get(pk=builds.pop())
        assert build.status == Build.Status.FAILED
        assert build.error_code == case.code
        assert build.log[-1]["status"] == "failed"
        assert list(
            AuditEvent.objects.filter(action=AuditEvent.Action.PUBLISH_FAILED).values_list("details__code", flat=True)
        ) == [case.code]
    else:
        assert case.code == "archive_too_large", (case.name, error)
        assert not Build.objects.exists()
    assert not Version.objects.exists()
    assert not Extension.objects.exists()
    assert keys(storage.PACKAGES_PREFIX) == set()
    assert keys(storage.UPLOADS_PREFIX) == set()
    for target in ABSOLUTE_TARGETS:
        assert not os.path.lexists(target)
    health = client.get("/healthz")
    assert health.status_code == 200, health.content


@pytest.mark.parametrize("make", ALL_HOSTILE, ids=[make.__name__ for make in ALL_HOSTILE])
def test_a_hostile_package_is_refused_and_nothing_is_stored(
    client: Client, token: str, tmp_path: Path, make: Callable[[], Hostile]
) -> None:
    from tests.factories import publish_new

    case = make()
    assert_refused(client, upload(client, token, "/api/v1/extensions/", "file", case.data), case)

    build = publish_new(client, token, tmp_path, "etcd", "3.5.9")
    assert build["status"] == "succeeded"


@pytest.mark.parametrize("make", SOURCE_HOSTILE, ids=[make.__name__ for make in SOURCE_HOSTILE])
def test_a_hostile_source_archive_is_refused_and_nothing_is_stored(
    client: Client, token: str, tmp_path: Path, make: Callable[[], Hostile]
) -> None:
    from tests.factories import publish_new

    case = make()
    assert_refused(client, upload(client, token, "/api/v1/builds/", "source", case.data), case)

    build = publish_new(client, token, tmp_path, "etcd", "3.5.9")
    assert build["status"] == "succeeded"


def test_the_big_compressed_package_is_refused_before_it_is_read(client: Client, token: str) -> None:
    """Over 50 MiB compressed: the declared length is already over the limit, so no build is made."""
    from tests.hostile_archives import oversize_compressed

    case = oversize_compressed()
    response = upload(client, token, "/api/v1/extensions/", "file", case.data)
    assert response.status_code == 413
    assert response.json()["error"]["details"] == [{"limit": "max_package_bytes", "value": 50 * 1024 * 1024}]
    assert not Build.objects.exists()
