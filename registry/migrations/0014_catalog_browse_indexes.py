"""The catalog's browse orders and text rank, read without scanning every row at scale (issue 14's
10,000-extension benchmark):

- ``Extension.latest_published_at``, the latest version's publish time (as
  `registry.services.extension_refresh` keeps it), and on PostgreSQL an index on it for
  "recently updated" (SQLite cannot index NULLS LAST);
- an index on downloads for "most downloaded", and one on the non-yanked versions' runtime
  constraints per extension for search's runtime filter;
- on PostgreSQL, ``search_vector``: the weighted text the relevance rank reads (name A, keywords
  and description B, as `registry.selectors.extension_search` ranks), a generated column that
  PostgreSQL keeps itself, so a search ranks its matches without building a vector per row. It
  is no model field: SQLite has no text search, and nothing but the rank reads it. PostgreSQL
  refuses to change the type of a column it is computed from: a later migration that changes
  name, description or keywords_text drops it first and adds it again.

During a rolling upgrade, a node still on the previous release publishes without setting
latest_published_at (docs/deploy.md says how to fill it again)."""

from django.db import migrations, models

SEARCH_VECTOR_SQL = (
    "setweight(to_tsvector('simple'::regconfig, coalesce(name, '')), 'A')"
    " || setweight(to_tsvector('simple'::regconfig, coalesce(keywords_text, '')), 'B')"
    " || setweight(to_tsvector('simple'::regconfig, coalesce(description, '')), 'B')"
)


FILL_SQL = (
    "UPDATE registry_extension SET latest_published_at = (SELECT v.published_at FROM registry_version v"
    " WHERE v.id = registry_extension.latest_version_id) WHERE latest_version_id IS NOT NULL"
)


def add_postgresql_only(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            "ALTER TABLE registry_extension ADD COLUMN search_vector tsvector "
            f"GENERATED ALWAYS AS ({SEARCH_VECTOR_SQL}) STORED"
        )
        schema_editor.execute(
            "CREATE INDEX extension_by_updated ON registry_extension (latest_published_at DESC NULLS LAST, name)"
        )


def drop_postgresql_only(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX extension_by_updated")
        schema_editor.execute("ALTER TABLE registry_extension DROP COLUMN search_vector")


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0013_search_categories"),
    ]

    operations = [
        migrations.AddField(
            model_name="extension",
            name="latest_published_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunSQL(FILL_SQL, migrations.RunSQL.noop),
        migrations.AddIndex(
            model_name="extension",
            index=models.Index(
                models.OrderBy(models.F("downloads"), descending=True), models.F("name"), name="extension_by_downloads"
            ),
        ),
        migrations.AddIndex(
            model_name="version",
            index=models.Index(
                condition=models.Q(yanked=False), fields=["extension", "provisioning_version"], name="version_runtime"
            ),
        ),
        migrations.RunPython(add_postgresql_only, drop_postgresql_only),
    ]
