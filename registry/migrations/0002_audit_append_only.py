"""Make the audit log append-only in the database itself, whatever code (or admin) tries.

PostgreSQL refuses UPDATE and DELETE of rows by trigger (TRUNCATE, which only an operator or the
test runner's flush uses, is not a row operation). SQLite refuses UPDATE; it keeps DELETE for the
test runner's flush, and the model and queryset refuse deletes there."""

from django.db import migrations


def create_triggers(apps, schema_editor):  # type: ignore[no-untyped-def]
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        schema_editor.execute(
            "CREATE TRIGGER registry_auditevent_no_update BEFORE UPDATE ON registry_auditevent "
            "BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;"
        )
    elif vendor == "postgresql":
        schema_editor.execute(
            "CREATE OR REPLACE FUNCTION registry_auditevent_append_only() RETURNS trigger AS $$ "
            "BEGIN RAISE EXCEPTION 'the audit log is append-only'; END; $$ LANGUAGE plpgsql;"
        )
        schema_editor.execute(
            "CREATE TRIGGER registry_auditevent_append_only BEFORE UPDATE OR DELETE ON registry_auditevent "
            "FOR EACH ROW EXECUTE FUNCTION registry_auditevent_append_only();"
        )


def drop_triggers(apps, schema_editor):  # type: ignore[no-untyped-def]
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        schema_editor.execute("DROP TRIGGER IF EXISTS registry_auditevent_no_update")
    elif vendor == "postgresql":
        schema_editor.execute("DROP TRIGGER IF EXISTS registry_auditevent_append_only ON registry_auditevent")
        schema_editor.execute("DROP FUNCTION IF EXISTS registry_auditevent_append_only()")


class Migration(migrations.Migration):
    dependencies = [("registry", "0001_initial")]
    operations = [migrations.RunPython(create_triggers, drop_triggers)]
