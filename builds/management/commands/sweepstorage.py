"""`python manage.py sweepstorage [--grace-seconds N]`: what Celery beat runs hourly
(builds.sweep_storage): remove package objects no version references and staged uploads of
finished builds, older than the grace period, and the temporary files of dead uploads and
finished builds under REGISTRY_DATA_DIR/tmp/."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from builds.sweeper import sweep


class Command(BaseCommand):
    help = "Remove unreferenced package objects and finished builds' staged uploads from storage."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--grace-seconds", type=int, default=None, help="default REGISTRY_SWEEP_GRACE_SECONDS")

    def handle(self, *args: Any, **options: Any) -> None:
        grace = options["grace_seconds"]
        if grace is not None and grace < 0:
            from django.core.management.base import CommandError

            raise CommandError("--grace-seconds must be 0 or more")
        result = sweep(grace_seconds=grace)
        self.stdout.write(
            f"removed {result['packages']} package object(s), {result['uploads']} staged upload(s), "
            f"{result['tmp_uploads']} temporary upload file(s), {result['tmp_builds']} build directory(ies)"
        )
