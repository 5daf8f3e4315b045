"""Load a generated catalogue for the web catalog's benchmark (bench/bench_catalog.py) into a
registry database, in bulk (rows, not publishes: 100,000 versions through the build pipeline
would take hours), with what the pages read: latest versions, keywords and categories,
dependencies, index documents rendered as publishing renders them, owners and 90 days of daily
download counts for a part of the versions.

    DATABASE_URL=... python -m bench.load_catalog_pages EXTENSIONS VERSIONS

Names: ``ext-00000``...; each depends on up to three higher-numbered ones. ``chain-00`` ...
``chain-29`` are a closure of exactly 30 extensions (each needs the next two), for the graph.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
from datetime import timedelta

KEYWORDS = [f"kw-{i:02d}" for i in range(40)] + ["containers", "storage", "network", "database", "monitoring"]
CATEGORIES = ["taskservs", "databases", "networking", "observability", "security", "runtimes", "storage"]
WORDS = [
    "fast",
    "reliable",
    "cloud",
    "native",
    "cluster",
    "storage",
    "network",
    "database",
    "kubernetes",
    "backup",
    "monitor",
    "agent",
]
CHAIN = 30
BATCH = 5000


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    extensions, versions = int(args[0]), int(args[1])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "registry.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import transaction
    from django.utils import timezone

    from extensions.names import confusable_key
    from extensions.versions import SemVer
    from registry.indexdocs import render_document
    from registry.models import DailyDownloads, Dependency, Extension, Ownership, Version
    from registry.selectors import categories_text

    call_command("migrate", verbosity=0)
    rng = random.Random(14)
    user, _ = get_user_model().objects.get_or_create(username="bench")
    names = [f"ext-{i:05d}" for i in range(extensions - CHAIN)] + [f"chain-{i:02d}" for i in range(CHAIN)]
    needs: dict[str, list[str]] = {}
    for i, name in enumerate(names):
        if name.startswith("chain-"):
            k = int(name.split("-")[1])
            needs[name] = [f"chain-{j:02d}" for j in (k + 1, k + 2) if j < CHAIN]
        else:
            later = names[i + 1 : min(len(names) - CHAIN, i + 50)]
            needs[name] = sorted(rng.sample(later, min(len(later), rng.randint(0, 3))))
    with transaction.atomic():
        rows = []
        for name in names:
            keywords = sorted(rng.sample(KEYWORDS, 3))
            rows.append(
                Extension(
                    name=name,
                    confusable_key=confusable_key(name),
                    type="provider" if rng.random() < 0.1 else "taskserv",
                    description=" ".join(rng.sample(WORDS, 5)) + f" ({name})",
                    keywords_text="," + ",".join(keywords) + ",",
                    categories_text=categories_text(rng.sample(CATEGORIES, 2)),
                    downloads=0,
                )
            )
        Extension.objects.bulk_create(rows, batch_size=BATCH)
        by_name = {e.name: e for e in Extension.objects.all()}
        Ownership.objects.bulk_create([Ownership(extension=e, user=user) for e in by_name.values()], batch_size=BATCH)
        version_rows = []
        for name in names:
            extension = by_name[name]
            for v in range(versions):
                text = f"1.{v}.0"
                semver = SemVer.parse(text)
                deps = [{"name": d, "constraint": ">=1.0.0, <2.0.0-0", "written": "^1.0"} for d in needs[name]]
                manifest = {
                    "name": name,
                    "version": text,
                    "type": extension.type,
                    "description": extension.description,
                    "keywords": [k for k in extension.keywords_text.split(",") if k],
                    "compatibility": {"provisioning_version": ">=1.0.0" if v % 3 else ">=1.2.0"},
                    "provides": {f"{extension.type}s": [name]},
                    "dependencies": deps,
                }
                digest = hashlib.sha256(f"{name}-{text}".encode()).hexdigest()
                version_rows.append(
                    Version(
                        extension=extension,
                        version=text,
                        canonical=text,
                        major=semver.major,
                        minor=semver.minor,
                        patch=semver.patch,
                        type=extension.type,
                        description=extension.description,
                        manifest=manifest,
                        manifest_text="",
                        readme_html=f"<h1>{name}</h1>\n<p>{extension.description}</p>\n",
                        provisioning_version=manifest["compatibility"]["provisioning_version"],
                        sha256=digest,
                        size=1024 + v,
                        storage_key=f"sha256/{digest[:2]}/{digest}.tar.gz",
                        files=[{"path": "extension.toml", "size": 200, "sha256": digest}],
                        published_by=user,
                        downloads=0,
                    )
                )
        Version.objects.bulk_create(version_rows, batch_size=BATCH)
        by_extension: dict[int, list[Version]] = {}
        for row in Version.objects.defer("manifest_text", "readme_html", "files").order_by("id"):
            by_extension.setdefault(row.extension_id, []).append(row)
        dependencies = []
        today = timezone.now().date()
        daily = []
        for extension in by_name.values():
            rows_ = by_extension[extension.pk]
            extension.latest_version = rows_[-1]
            extension.latest_published_at = rows_[-1].published_at
            extension.index_json, extension.index_etag = render_document(extension.name, rows_)
            for row in rows_:
                for dep in row.manifest["dependencies"]:
                    dependencies.append(
                        Dependency(
                            version=row,
                            extension=by_name[dep["name"]],
                            constraint=dep["constraint"],
                            written=dep["written"],
                        )
                    )
            if rng.random() < 0.1:  # a tenth of the extensions downloaded every day, newest version
                total = 0
                for day in range(90):
                    n = rng.randint(0, 20)
                    total += n
                    daily.append(DailyDownloads(version=rows_[-1], day=today - timedelta(days=day), count=n))
                extension.downloads = total
        Extension.objects.bulk_update(
            list(by_name.values()),
            ["latest_version", "latest_published_at", "index_json", "index_etag", "downloads"],
            batch_size=1000,
        )
        Dependency.objects.bulk_create(dependencies, batch_size=BATCH)
        DailyDownloads.objects.bulk_create(daily, batch_size=BATCH)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    print(f"loaded {len(names)} extensions, {len(version_rows)} versions, {len(dependencies)} dependencies")
    return 0


if __name__ == "__main__":
    sys.exit(main())
