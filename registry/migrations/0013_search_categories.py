"""An index on Version.published_at (the catalog's recent lists), and categories on the extension
row, for search filters and facets (``"\\nA\\nB\\n"``, from the latest
non-yanked version's manifest, as `registry.services.extension_refresh` keeps it)."""

from django.db import migrations, models


def fill(apps, schema_editor):  # type: ignore[no-untyped-def]
    from registry.selectors import categories_text

    Extension = apps.get_model("registry", "Extension")
    Version = apps.get_model("registry", "Version")
    for extension in Extension.objects.exclude(latest_version=None).only("pk", "latest_version").iterator():
        manifest = Version.objects.filter(pk=extension.latest_version_id).values_list("manifest", flat=True).first()
        categories = (manifest or {}).get("categories") or [] if isinstance(manifest, dict) else []
        text = categories_text(categories)
        if text:
            Extension.objects.filter(pk=extension.pk).update(categories_text=text)


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0012_version_interface"),
    ]

    operations = [
        migrations.AddField(
            model_name="extension",
            name="categories_text",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="version",
            index=models.Index(fields=["published_at"], name="version_published_at"),
        ),
    ]
