from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies: list[tuple[str, str]] = []

    operations = [
        migrations.CreateModel(
            name="TrustRole",
            fields=[
                ("name", models.CharField(max_length=64, primary_key=True, serialize=False)),
                ("version", models.PositiveIntegerField()),
                ("expires", models.DateTimeField()),
                ("sha256", models.CharField(max_length=64)),
                ("length", models.PositiveBigIntegerField()),
                ("content", models.TextField(blank=True, default="")),
                ("touched_at", models.DateTimeField(auto_now=True)),
            ],
            options={"db_table": "trust_role"},
        ),
        migrations.CreateModel(
            name="TrustTarget",
            fields=[
                ("path", models.CharField(max_length=512, primary_key=True, serialize=False)),
                ("kind", models.CharField(max_length=32)),
                ("extension", models.CharField(db_index=True, max_length=64)),
                ("role", models.CharField(db_index=True, max_length=64)),
                ("sha256", models.CharField(max_length=64)),
                ("length", models.PositiveBigIntegerField()),
            ],
            options={"db_table": "trust_target"},
        ),
    ]
