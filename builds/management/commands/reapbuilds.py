"""`python manage.py reapbuilds`: what Celery beat runs every 30 s (builds.reap_stale_builds),
for embedded mode, where there is no beat: builds left running by a stopped process are failed
(or, with workers, re-queued)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from builds.lifecycle import build_reap_stale


class Command(BaseCommand):
    help = "Re-queue (with workers) or fail (embedded) builds whose process stopped while running them."

    def handle(self, *args: Any, **options: Any) -> None:
        result = build_reap_stale()
        self.stdout.write(f"{result['requeued']} re-queued, {result['failed']} failed")
