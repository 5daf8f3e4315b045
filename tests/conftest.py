"""Shared fixtures. Tests that need a real tool or service ask for it here: missing locally is a
skip, missing under CI=true is a failure (CI must never pass by skipping)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from extensions.checks import find_nu, kcl_available

# real services; a live registry process; an OIDC issuer on loopback
pytest_plugins = ["tests.services", "tests.live_registry", "tests.oidc_issuer"]

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require(available: bool, what: str) -> None:
    """Skip (or, under CI=true, fail) when a real component the test needs is missing."""
    if available:
        return
    if IN_CI:
        pytest.fail(f"{what} is required under CI=true but is not installed (make test installs it)")
    pytest.skip(f"{what} is not installed")


@pytest.fixture
def nu() -> str:
    """The Nushell binary."""
    path = find_nu()
    require(path is not None, "Nushell (nu)")
    assert path is not None
    return path


@pytest.fixture
def kcl() -> None:
    """KCL (kcl-lib) is importable."""
    require(kcl_available(), "KCL (kcl-lib)")


@pytest.fixture(autouse=True)
def _private_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tools (KCL writes ~/.kcl) and the client write under a private HOME, never the real one: the
    client's default home (its pinned roots among what it keeps) too, whatever the developer's
    PROVISIONING_HOME or XDG_DATA_HOME say."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    for name in ("PROVISIONING_HOME", "PROVISIONING_TRUST_ROOT"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def private_storage(settings: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Package storage private to the test (the registry's own atomic file storage), so the
    objects a test leaves can be listed exactly."""
    location = tmp_path_factory.mktemp("storage")
    settings.STORAGES = {
        **settings.STORAGES,
        "packages": {
            "BACKEND": "registry.filestorage.AtomicFileSystemStorage",
            "OPTIONS": {"location": str(location), "file_permissions_mode": 0o644},
        },
    }
    return location


@pytest.fixture
def private_tmp(settings: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A REGISTRY_TMP_DIR private to the test, so the temporary files it sees are its own (a build
    that another test's killed worker left behind is the sweeper's business, not this test's)."""
    settings.REGISTRY_TMP_DIR = tmp_path_factory.mktemp("tmp")
    return Path(settings.REGISTRY_TMP_DIR)
