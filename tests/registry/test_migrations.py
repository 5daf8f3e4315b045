"""Migrations that fill new columns from existing rows: run from the migration before them on
rows made with that migration's models (the test database is put back at the newest state)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("registry", "0013_search_categories")]
AFTER = [("registry", "0014_catalog_browse_indexes")]


@pytest.fixture
def executor(transactional_db: None) -> Iterator[MigrationExecutor]:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    executor.loader.build_graph()
    yield executor
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def _version(apps: Any, extension: Any, text: str, published_at: datetime) -> Any:
    Version = apps.get_model("registry", "Version")
    major, minor, patch = (int(p) for p in text.split("."))
    row = Version.objects.create(
        extension=extension,
        version=text,
        canonical=text,
        major=major,
        minor=minor,
        patch=patch,
        type="taskserv",
        manifest={},
        manifest_text="",
        sha256=f"{major:064d}",
        size=1,
        storage_key=f"sha256/{text}",
    )
    Version.objects.filter(pk=row.pk).update(published_at=published_at)  # (auto_now_add on create)
    return row


def test_0014_fills_each_extensions_latest_publish_time(executor: MigrationExecutor) -> None:
    apps = executor.loader.project_state(BEFORE).apps
    Extension = apps.get_model("registry", "Extension")
    etcd = Extension.objects.create(name="etcd", confusable_key="etcd", type="taskserv")
    older, newer = datetime(2026, 1, 2, tzinfo=UTC), datetime(2026, 3, 4, tzinfo=UTC)
    _version(apps, etcd, "3.5.9", older)
    latest = _version(apps, etcd, "3.5.12", newer)
    Extension.objects.filter(pk=etcd.pk).update(latest_version=latest)
    Extension.objects.create(name="gone", confusable_key="gone", type="taskserv")  # every version yanked

    executor.migrate(AFTER)

    after = executor.loader.project_state(AFTER).apps.get_model("registry", "Extension")
    assert dict(after.objects.values_list("name", "latest_published_at")) == {"etcd": newer, "gone": None}
    if connection.vendor == "postgresql":  # the stored text-search vector, kept by PostgreSQL
        with connection.cursor() as cursor:
            cursor.execute("SELECT search_vector::text FROM registry_extension WHERE name = 'etcd'")
            assert cursor.fetchone() == ("'etcd':1A",)
