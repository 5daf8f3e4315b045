"""Celery tasks: each takes ids, is idempotent, acks late, has time limits, and calls a service."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from builds import lifecycle, services, sweeper


@shared_task(
    name="builds.run_build",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=settings.REGISTRY_BUILD_TIME_LIMIT,
    time_limit=settings.REGISTRY_BUILD_TIME_LIMIT + 30,
    ignore_result=True,
)
def run_build(build_id: str) -> None:
    services.build_run(build_id)


@shared_task(name="builds.reap_stale_builds", acks_late=True, time_limit=120, ignore_result=True)
def reap_stale_builds() -> dict[str, int]:
    return lifecycle.build_reap_stale()


@shared_task(name="builds.sweep_storage", acks_late=True, time_limit=3600, ignore_result=True)
def sweep_storage() -> dict[str, int]:
    return sweeper.sweep()
