"""The registry's periodic Celery tasks (with a broker; in embedded mode each web process's
background thread does the same work, registry.background)."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from registry import downloadcounts
from registry.background import REPAIR_WINDOW
from registry.staticindex import static_index_repair


@shared_task(name="registry.flush_downloads", acks_late=True, time_limit=120, ignore_result=True)
def flush_downloads() -> int:
    """Write the download counts accumulated in Redis (and this process's, if any)."""
    return downloadcounts.flush()


@shared_task(name="registry.repair_static_index", acks_late=True, time_limit=600, ignore_result=True)
def repair_static_index() -> int:
    """Rewrite the static index files of recently changed extensions that are behind their rows."""
    return static_index_repair(updated_since=timezone.now() - REPAIR_WINDOW)
