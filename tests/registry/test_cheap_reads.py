"""Reads that stay cheap whatever was published (issue 8): listings and lookups never load a
version's large columns, so an extension that provides thousands of names (published before the
bounds existed, or by an operator's raised settings) with a megabyte README and a MANIFEST.json of
ten thousand files costs what an ordinary one costs: the same number of queries, flat memory."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from registry.models import Extension, Ownership, Provide, Version
from registry.services import extension_refresh

pytest_plugins = ["tests.factories"]

BIG_README = "<p>" + "x" * (1024 * 1024) + "</p>"
BIG_FILES = [{"path": f"f/{i:05d}.k", "size": 1, "sha256": "0" * 64} for i in range(10_000)]


def _extension(name: str, user: Any, *, provides: int, big: bool) -> Extension:
    extension = Extension.objects.create(name=name, confusable_key=name, type="taskserv", description=f"the {name}")
    Ownership.objects.create(extension=extension, user=user)
    names = [f"{name}-p{i}" for i in range(provides)]
    manifest = {
        "name": name,
        "version": "1.0.0",
        "description": f"the {name}",
        "type": "taskserv",
        "authors": ["A"],
        "keywords": ["k"],
        "provides": {"taskservs": names},
        "dependencies": [],
    }
    version = Version.objects.create(
        extension=extension,
        version="1.0.0",
        canonical="1.0.0",
        major=1,
        minor=0,
        patch=0,
        type="taskserv",
        description=f"the {name}",
        manifest=manifest,
        manifest_text="#" * 65_000 if big else "",
        readme_html=BIG_README if big else "<p>hi</p>",
        sha256="a" * 64,
        size=1,
        storage_key=f"sha256/aa/{name}",
        files=BIG_FILES if big else [],
    )
    Provide.objects.bulk_create([Provide(version=version, kind="taskserv", name=n, confusable_key=n) for n in names])
    extension_refresh(extension)
    return extension


@pytest.fixture
def catalogue(db: None, user: Any) -> None:
    for i in range(10):
        _extension(f"plain{i}", user, provides=1, big=False)


def _cost(client: Client, url: str) -> tuple[int, int]:
    """(queries, peak bytes allocated) of one GET."""
    with CaptureQueriesContext(connection) as queries:
        tracemalloc.start()
        try:
            response = client.get(url)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert response.status_code == 200, response.content[:300]
    return len(queries), peak


READS: list[tuple[str, Callable[[str], str]]] = [
    ("taskservs", lambda name: "/api/v1/extensions/taskservs"),
    ("lookup", lambda name: f"/api/v1/extensions/taskserv/{name}-p1"),
    ("search", lambda name: "/api/v1/extensions/?q=p"),
    ("detail", lambda name: f"/api/v1/extensions/{name}/"),
    ("home", lambda name: "/"),
    ("search page", lambda name: "/search?q=p"),
]


@pytest.mark.parametrize(("what", "url"), READS, ids=[r[0] for r in READS])
def test_a_read_costs_the_same_whatever_an_extension_holds(
    client: Client, catalogue: None, user: Any, what: str, url: Callable[[str], str]
) -> None:
    _extension("small", user, provides=32, big=False)
    queries_small, _ = _cost(client, url("small"))
    _, baseline = _cost(client, url("small"))
    _extension("huge", user, provides=5000, big=True)
    queries_huge, _ = _cost(client, url("huge"))
    _, peak = _cost(client, url("huge"))
    assert queries_huge == queries_small, (queries_small, queries_huge)
    # 5,000 provided names add their own rows to a listing, never the version's large columns
    # (each of which would be a megabyte per row: gigabytes in all).
    assert peak < baseline + 16 * 1024 * 1024, (baseline, peak)
