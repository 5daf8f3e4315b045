"""Celery tasks of the signed index."""

from __future__ import annotations

from celery import shared_task

from registry.trust import repository


@shared_task(name="trust.maintain", acks_late=True, time_limit=600, ignore_result=True)
def maintain() -> list[str]:
    return repository.maintain()
