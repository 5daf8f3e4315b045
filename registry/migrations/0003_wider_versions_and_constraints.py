"""Columns as wide as extension.toml allows: versions up to 256 characters (as
extensions.versions.MAX_VERSION_LENGTH), and normalised constraints as text (normalising expands a
constraint: ``1`` is ``>=1.0.0, <2.0.0-0``). PostgreSQL refused longer values with an error (a 500);
SQLite stored them anyway.

On SQLite, altering a column rebuilds the table, which drops its triggers: the audit log's
append-only trigger (0002) is created again afterwards."""

from django.db import migrations, models


def recreate_sqlite_audit_trigger(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(
            "CREATE TRIGGER IF NOT EXISTS registry_auditevent_no_update BEFORE UPDATE ON registry_auditevent "
            "BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0002_audit_append_only"),
    ]

    operations = [
        migrations.AlterField(
            model_name="auditevent",
            name="version",
            field=models.CharField(blank=True, max_length=256),
        ),
        migrations.AlterField(
            model_name="dependency",
            name="constraint",
            field=models.TextField(),
        ),
        migrations.AlterField(
            model_name="version",
            name="canonical",
            field=models.CharField(max_length=256),
        ),
        migrations.AlterField(
            model_name="version",
            name="prerelease",
            field=models.CharField(blank=True, max_length=256),
        ),
        migrations.AlterField(
            model_name="version",
            name="provisioning_version",
            field=models.TextField(blank=True),
        ),
        migrations.AlterField(
            model_name="version",
            name="version",
            field=models.CharField(max_length=256),
        ),
        migrations.RunPython(recreate_sqlite_audit_trigger, migrations.RunPython.noop),
    ]
