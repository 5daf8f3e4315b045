"""Load extensions into a registry database as rows (a benchmark fixture: thousands of versions
through the build pipeline would take far longer than the figures they serve), with provides,
confusable keys and index documents as publishing makes them, and optionally the package files
(stored at their content-addressed keys) and the static index.

    REGISTRY_DATA_DIR=DIR python -m bench.load_packages RECORDS.json [--static-index]

RECORDS.json is a JSON list of ``{"name", "version", "file"?}``: with ``file`` (a path), the file
is stored as the version's package and its sha256 and size are the version's; without, the row
gets a made-up digest and no object.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any


def version_row(*, extension: Any, text: str, digest: str, size: int, key: str, user: Any) -> Any:
    """An unsaved Version row of the extension as publishing would make it (a taskserv that
    provides its own name), with that package digest, size and storage key."""
    from extensions.versions import SemVer
    from registry.models import Version

    name = extension.name
    version = SemVer.parse(text)
    manifest = {
        "name": name,
        "version": text,
        "type": "taskserv",
        "description": f"{name} (bench)",
        "compatibility": {"provisioning_version": ">=1.0.0"},
        "provides": {"taskservs": [name]},
        "dependencies": [],
    }
    return Version(
        extension=extension,
        version=text,
        canonical=str(version.without_build()),
        major=version.major,
        minor=version.minor,
        patch=version.patch,
        type="taskserv",
        description=f"{name} (bench)",
        manifest=manifest,
        manifest_text="",
        provisioning_version=">=1.0.0",
        sha256=digest,
        size=size,
        storage_key=key,
        published_by=user,
    )


def owned_extension(name: str, user: Any) -> Any:
    """A new taskserv extension row owned by user."""
    from extensions.names import confusable_key
    from registry.models import Extension, Ownership

    extension = Extension.objects.create(
        name=name, confusable_key=confusable_key(name), type="taskserv", description=f"{name} (bench)"
    )
    Ownership.objects.create(extension=extension, user=user)
    return extension


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load_packages")
    parser.add_argument("records", help="a JSON file of version records")
    parser.add_argument("--static-index", action="store_true", help="also write every static index file")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "registry.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import transaction

    from extensions.names import confusable_key
    from extensions.versions import SemVer
    from registry import storage
    from registry.indexdocs import refresh_index
    from registry.models import Provide, Version
    from registry.staticindex import static_index_repair

    call_command("migrate", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench")
    records = json.loads(Path(args.records).read_text(encoding="utf-8"))
    by_name: dict[str, list[dict[str, str]]] = {}
    for record in records:
        by_name.setdefault(record["name"], []).append(record)
    with transaction.atomic():
        for name, items in by_name.items():
            extension = owned_extension(name, user)
            rows = []
            for record in items:
                text = record["version"]
                if record.get("file"):
                    path = Path(record["file"])
                    digest = hashlib.sha256(path.read_bytes()).hexdigest()
                    size = path.stat().st_size
                    with path.open("rb") as handle:
                        key = storage.put_package(digest, handle, size)
                else:
                    digest = hashlib.sha256(f"{name}-{text}".encode()).hexdigest()
                    size, key = 1024, storage.package_key(digest)
                rows.append(version_row(extension=extension, text=text, digest=digest, size=size, key=key, user=user))
            created = Version.objects.bulk_create(rows)
            Provide.objects.bulk_create(
                [Provide(version=v, kind="taskserv", name=name, confusable_key=confusable_key(name)) for v in created]
            )
            extension.latest_version = max(created, key=lambda v: SemVer.parse(v.version))
            extension.latest_published_at = extension.latest_version.published_at
            refresh_index(extension)
            extension.save(update_fields=["latest_version", "latest_published_at", "index_json", "index_etag"])
    if args.static_index:
        static_index_repair()
    print(f"loaded {len(by_name)} extensions, {len(records)} versions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
