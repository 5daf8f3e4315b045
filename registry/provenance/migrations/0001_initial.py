import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("registry", "0010_dependency_written"),
    ]

    operations = [
        migrations.CreateModel(
            name="Provenance",
            fields=[
                (
                    "version",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="provenance",
                        serialize=False,
                        to="registry.version",
                    ),
                ),
                ("envelope", models.TextField()),
                ("sha256", models.CharField(db_index=True, max_length=64)),
                ("length", models.PositiveIntegerField()),
                ("keyid", models.CharField(max_length=64)),
                ("subject_sha256", models.CharField(max_length=64)),
                ("oci_referrer_sha256", models.CharField(blank=True, db_index=True, max_length=64)),
                ("oci_yanked_referrer_sha256", models.CharField(blank=True, db_index=True, max_length=64)),
                ("created_at", models.DateTimeField()),
                ("signed_at", models.DateTimeField()),
            ],
            options={
                "db_table": "provenance",
            },
        ),
        migrations.CreateModel(
            name="ProvenanceKey",
            fields=[
                ("keyid", models.CharField(max_length=64, primary_key=True, serialize=False)),
                ("public_pem", models.TextField()),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("retired_at", models.DateTimeField(blank=True, db_index=True, null=True)),
            ],
            options={
                "db_table": "provenance_key",
            },
        ),
    ]
