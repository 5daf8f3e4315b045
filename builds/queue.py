"""Sending builds to the workers. The task is named, not imported (builds.tasks imports the
services that call this), so nothing in `builds` imports in a circle."""

from __future__ import annotations

import logging

from django.conf import settings
from django.utils import timezone

from builds.models import Build
from registry.celery import app

log = logging.getLogger(__name__)

RUN_BUILD = "builds.run_build"


def enqueue(build_id: str) -> None:
    """Send the build to the workers (in embedded mode: run it now, in this process). If the broker
    cannot take it, the build stays queued (its upload is staged) and the reaper sends it again
    once the broker answers."""
    task = app.tasks[RUN_BUILD]
    if settings.CELERY_TASK_ALWAYS_EAGER:
        task.delay(build_id)  # in-process: errors are the pipeline's own, recorded on the build
        return
    try:
        task.delay(build_id)
    except Exception:  # kombu raises many kinds; all mean "not sent now"
        log.warning("build %s: the task queue is unavailable; it stays queued for the reaper", build_id, exc_info=True)
        return
    Build.objects.filter(pk=build_id).update(enqueued_at=timezone.now())
