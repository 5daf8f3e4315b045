"""`python manage.py check_integrity [--quick] [--grace-seconds N] [--json] [--previous FILE]`:
verify that storage, the catalogue, the signed index and the download counts agree
(registry.integrity), plus the builds' staged uploads; exit 1 with one line per problem when
they do not. Reads only: `manage.py sweepstorage` repairs what the sweeper owns."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from builds.sweeper import leftover_uploads
from registry.errors import RegistryError
from registry.integrity import integrity_check


class Command(BaseCommand):
    help = (
        "Verify every version's package (exists, size, sha256), that every object belongs to a version, that the "
        "signed index covers exactly the catalogue, and that download counts are sane; exit 1 on any problem."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--quick", action="store_true", help="check sizes only: do not read and hash every package")
        parser.add_argument(
            "--grace-seconds",
            type=int,
            default=None,
            help="objects younger than this may belong to a publish in flight (default REGISTRY_SWEEP_GRACE_SECONDS)",
        )
        parser.add_argument("--json", action="store_true", help="the report as JSON: problems, counts, download totals")
        parser.add_argument(
            "--previous",
            type=Path,
            default=None,
            metavar="FILE",
            help="a report of an earlier run (--json): no download total may have shrunk since",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        grace = options["grace_seconds"]
        if grace is not None and grace < 0:
            raise CommandError("--grace-seconds must be 0 or more")
        previous = self._previous(options["previous"])
        try:
            report = integrity_check(hash_objects=not options["quick"], grace_seconds=grace, previous=previous)
            grace_period = timedelta(seconds=settings.REGISTRY_SWEEP_GRACE_SECONDS if grace is None else grace)
            cutoff = timezone.now() - grace_period
            report.problems += [
                f"staged upload {key} belongs to no unfinished build (`manage.py sweepstorage` removes it)"
                for key in leftover_uploads(cutoff=cutoff)
            ]
        except RegistryError as exc:  # storage (or the database) is down: not a verdict either way
            raise CommandError(f"could not check: {exc.message}") from None
        if options["json"]:
            self.stdout.write(json.dumps(report.to_dict(), indent=2, sort_keys=True))
        else:
            for problem in report.problems:
                self.stderr.write(problem)
            checked = ", ".join(f"{n} {what}" for what, n in report.checked.items())
            verdict = f"{len(report.problems)} problem(s)" if report.problems else "no problems"
            self.stdout.write(f"checked {checked}, the signed index and the download counts: {verdict}")
        if report.problems:
            raise CommandError(f"{len(report.problems)} integrity problem(s)", returncode=1)

    def _previous(self, path: Path | None) -> dict[str, int] | None:
        if path is None:
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            downloads = data["downloads"]
            return {str(label): int(n) for label, n in downloads.items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CommandError(
                f"--previous {path}: not a report of `check_integrity --json` ({type(exc).__name__}: {exc})"
            ) from None
