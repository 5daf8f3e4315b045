# A version's configuration interface, read from its KCL schemas at build time (issue 14).

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0011_trusted_publishing"),
    ]

    operations = [
        migrations.AddField(
            model_name="version",
            name="interface",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
