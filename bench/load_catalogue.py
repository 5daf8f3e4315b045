"""Load the generated benchmark catalogue (bench/catalogue.py) into a registry database, as rows
(a benchmark fixture: 3,000 versions through the build pipeline would take far longer than the
figures it serves), with each extension's index document rendered as publishing renders it.

    REGISTRY_DATA_DIR=DIR python -m bench.load_catalogue [--records FILE.json]

``--records`` loads other records of the same shape (a JSON list of ``{"name", "version",
"dependencies": {name: constraint}}``) instead, such as the generated catalogues and the
pathological graphs of the resolver's live tests.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load_catalogue")
    parser.add_argument("--records", help="a JSON file of version records (default: bench/catalogue.py's)")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "registry.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import transaction

    from bench.catalogue import generate_catalogue
    from bench.load_packages import owned_extension, version_row
    from registry import storage
    from registry.indexdocs import refresh_index
    from registry.models import Version

    call_command("migrate", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench")
    records = json.loads(Path(args.records).read_text(encoding="utf-8")) if args.records else generate_catalogue()
    by_name: dict[str, list[dict[str, object]]] = {}
    for record in records:
        by_name.setdefault(str(record["name"]), []).append(record)
    with transaction.atomic():
        for name, items in by_name.items():
            extension = owned_extension(name, user)
            rows = []
            for record in items:
                text = str(record["version"])
                deps = record["dependencies"]
                assert isinstance(deps, dict)
                digest = hashlib.sha256(f"{name}-{text}".encode()).hexdigest()
                key = storage.package_key(digest)
                row = version_row(extension=extension, text=text, digest=digest, size=1024, key=key, user=user)
                row.manifest["dependencies"] = [{"name": n, "constraint": c} for n, c in deps.items()]
                rows.append(row)
            Version.objects.bulk_create(rows)
            refresh_index(extension)
            extension.save(update_fields=["index_json", "index_etag"])
    print(f"loaded {len(by_name)} extensions, {len(records)} versions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
